"""Any Hugging Face model: its architecture from ``config.json`` (and its weight size from
``model.safetensors.index.json``), read from the local Hugging Face cache, downloaded with
``huggingface_hub`` when it is installed and not offline, or from a file the spec names.

The cache layout is the hub's own (``huggingface_hub`` writes it, this module only reads it)::

    $HF_HUB_CACHE (else $HF_HOME/hub, else ~/.cache/huggingface/hub)
      models--<org>--<name>/refs/main                 the commit of the main branch
      models--<org>--<name>/snapshots/<commit>/config.json

``HF_HUB_OFFLINE=1`` never touches the network: a repo missing from the cache is an error that
says how to fix it. Mapped architecture families (what the estimator models): dense decoders,
GQA / MQA, MoE (Mixtral, Qwen-MoE, DeepSeek, gpt-oss style: total and active parameters), sliding
window attention (recorded; the KV cache is sized for the full context, which errs on the safe
side) and MLA (DeepSeek-V2/V3: the compressed latent cache, not split by TP, as vLLM keeps it).
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from hetinfra.architecture import arch_problem, size_problem
from hetinfra.catalog.models import ModelArch
from hetinfra.errors import InvalidInputError
from hetinfra.fileio import read_json, read_text

__all__ = ["MAX_REPO_PART", "hub_cache_dir", "is_repo_id", "cached_file", "load_config", "arch_from_config",
           "arch_from_file", "arch_from_hub"]

#: the hub's bound on a repo name (huggingface_hub's validate_repo_id: 1-96 characters), here on the
#: owner too: the cache folder models--OWNER--NAME is one file name (at most 255 bytes), and a longer
#: one was an OSError traceback ("File name too long") in `plan` and `estimate` wherever the cache existed
MAX_REPO_PART = 96
_REPO_PART = rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_REPO_PART - 1}}}"
_REPO_ID = re.compile(rf"^{_REPO_PART}/{_REPO_PART}\Z")
#: model types the estimator cannot describe (state-space, recurrent, encoder-decoder)
_UNSUPPORTED = ("mamba", "mamba2", "falcon_mamba", "jamba", "zamba", "zamba2", "rwkv", "rwkv5", "rwkv6", "xlstm",
                "t5", "mt5", "bart", "mbart", "whisper", "bert", "roberta", "encoder_decoder", "recurrent_gemma")
#: model types whose MLP has two matrices (up, down) instead of three
_UNGATED = ("gpt2", "gpt_neox", "gptj", "falcon", "gpt_bigcode", "opt", "bloom", "phi", "starcoder2", "mpt")
_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "int8": 1}


def hub_cache_dir() -> Path:
    """Where the hub keeps downloaded repos (huggingface_hub's own rules; each variable checked as a
    path, hetinfra.envpaths)."""
    from hetinfra.envpaths import env_path, home_dir

    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env_path(var):
            return env_path(var)
    if env_path("HF_HOME"):
        return env_path("HF_HOME") / "hub"
    return (env_path("XDG_CACHE_HOME") or home_dir() / ".cache") / "huggingface" / "hub"


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def is_repo_id(name: str) -> bool:
    """Whether ``name`` is a hub repo id (OWNER/NAME, each 1-96 letters, digits, '.', '_', '-', a letter
    or digit first): the one rule of every model name read as a repo id (the spec's ``model``,
    ``estimate --model``) before it names a folder of the cache."""
    return bool(_REPO_ID.match(name or ""))


#: what a ref file of the cache holds: the commit hash the hub wrote (a name, never a path)
_COMMIT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")


def cached_file(repo_id: str, filename: str, revision: str = "main") -> Path | None:
    """``filename`` of ``repo_id`` at ``revision`` (a branch or a commit) in the local cache, or None.
    The ref file goes through the one file reader (bytes that are not UTF-8 were a traceback) and must
    hold a commit name: ``../../x`` would read a config.json from outside the repo's snapshots."""
    repo = hub_cache_dir() / ("models--" + repo_id.replace("/", "--"))
    ref = repo / "refs" / revision
    commit = revision
    if ref.is_file():
        fix = f"download the repo again (`huggingface-cli download {repo_id} config.json`) or remove {ref}"
        commit = read_text(ref, "Hugging Face cache ref", max_bytes=4096, hint=fix).strip()
        if not _COMMIT.match(commit):
            raise InvalidInputError(f"{ref}: holds {commit[:60]!r}, not a commit hash", hint=fix)
    path = repo / "snapshots" / commit / filename
    return path if path.is_file() else None


def load_config(repo_id: str) -> tuple[dict, dict | None, str]:
    """(config.json, safetensors index or None, where it came from) of a hub repo: the cache first;
    else, unless offline, ``huggingface_hub`` downloads them (into the same cache)."""
    cfg = cached_file(repo_id, "config.json")
    index = cached_file(repo_id, "model.safetensors.index.json")
    if cfg is None:
        fix = (f"download it once online (`huggingface-cli download {repo_id} config.json "
               "model.safetensors.index.json`), point HF_HOME / HF_HUB_CACHE at a cache that has it, or describe "
               "the model with `architecture: path/to/config.json`")
        if offline():
            raise InvalidInputError(f"model {repo_id}: no config.json in the Hugging Face cache {hub_cache_dir()} "
                                    "(HF_HUB_OFFLINE is set)", hint=fix)
        try:
            from huggingface_hub import hf_hub_download  # optional: only to fetch what the cache lacks
        except ImportError:
            raise InvalidInputError(f"model {repo_id}: not in the Hugging Face cache {hub_cache_dir()}, and "
                                    "huggingface_hub is not installed to download its config.json",
                                    hint="pip install huggingface_hub, or " + fix) from None
        try:
            cfg = Path(hf_hub_download(repo_id, "config.json"))
        except Exception as exc:  # gated, missing, no network: the hub's own message says which
            raise InvalidInputError(f"model {repo_id}: cannot fetch config.json from the Hugging Face hub: "
                                    f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
                                    hint="check the repo id and HF_TOKEN (gated models), or " + fix) from None
        try:
            index = Path(hf_hub_download(repo_id, "model.safetensors.index.json"))
        except Exception:  # single-file checkpoints have no index: parameters from the config
            index = None
    return (_read_json(cfg, f"{repo_id}'s config.json"),
            _read_json(index, f"{repo_id}'s safetensors index") if index else None, str(cfg))


#: how to mend a config.json that cannot be read or described
_FIX = "correct the config.json, or describe the model with an `architecture:` block (layers, hidden_size, heads, ...)"


def _read_json(path: Path, what: str, hint: str | None = None) -> dict:
    """A config.json or safetensors index: a regular UTF-8 file of one JSON object (fileio's rules: a
    directory, bytes that are not UTF-8 or broken JSON are each named with the fix). NaN and Infinity
    are read, so that the field holding one is named by the check that refuses it."""
    doc = read_json(path, what, hint=hint, allow_nan=True,
                    parse_hint="the file is not the JSON Hugging Face writes: download it again, or correct it")
    if not isinstance(doc, dict):
        raise InvalidInputError(f"{path}: not a JSON object (a config.json is one: {{\"num_hidden_layers\": ...}})")
    return doc


def arch_from_hub(repo_id: str, name: str | None = None) -> ModelArch:
    cfg, index, where = load_config(repo_id)
    return arch_from_config(cfg, name or repo_id.lower(), index=index, where=where)


def arch_from_file(path: str | Path, name: str) -> ModelArch:
    """A ``config.json`` file (a ``model.safetensors.index.json`` beside it gives the weight size)."""
    p = Path(path)
    side = p.parent / "model.safetensors.index.json"
    cfg = _read_json(p, "architecture file", "give the path of the model's config.json (relative to the spec file)")
    return arch_from_config(cfg, name, index=_read_json(side, "safetensors index") if side.is_file() else None,
                            where=str(p))


class _Sizes:
    """Reads a config's sizes, each checked by hetinfra.architecture's bounds as it is read (a
    bad one is refused naming its key), and remembers which key gave each field for the rules between
    them (``arch_problem``)."""

    def __init__(self, cfg: dict, where: str):
        self.cfg, self.where, self.names = cfg, where, {}

    def __call__(self, field: str, *keys: str) -> int | None:
        """The first of ``keys`` the config sets (not null), as ``field``'s whole number; None if none is set."""
        key = next((k for k in keys if self.cfg.get(k) is not None), None)
        if key is None:
            return None
        why = size_problem(self.cfg[key], field)
        if why:
            raise InvalidInputError(f"{self.where}: {key} {why}", hint=_FIX)
        self.names.setdefault(field, key)
        return int(self.cfg[key])


def arch_from_config(cfg: dict, name: str, *, index: dict | None = None, where: str = "config.json") -> ModelArch:
    """The estimator's facts from an HF ``config.json`` (``text_config`` of multimodal models); a config
    breaking a rule of hetinfra.architecture is refused (exit 2) naming its key."""
    top = cfg
    if _typed(cfg, "text_config", dict, "an object", where):
        cfg = {**{k: v for k, v in cfg.items() if k != "text_config"}, **cfg["text_config"]}
    mtype = (_typed(cfg, "model_type", str, "a name such as llama", where) or "").lower()
    size = _Sizes(cfg, where)
    layers, hidden, heads = _checked_shape(size, top, mtype, where)
    kv = size("kv_heads", "num_key_value_heads", "num_kv_heads", "n_head_kv") or (1 if _flag(cfg, "multi_query", where)
                                                                                  else heads)
    head_dim = size("head_dim", "head_dim") or hidden // heads
    size.names.setdefault("head_dim", f"{size.names['hidden_size']} / {size.names['heads']}")
    vocab = size("vocab_size", "vocab_size", "padded_vocab_size") or 32000
    ctx = size("max_context", "max_position_embeddings", "n_positions", "seq_length", "max_seq_len") or 4096
    inter = size("intermediate_size", "intermediate_size", "ffn_hidden_size", "n_inner") or 4 * hidden
    shape = dict(layers=layers, hidden_size=hidden, heads=heads, kv_heads=kv, head_dim=head_dim)
    problem = arch_problem(shape, size.names)  # before the counts below, which assume a consistent shape
    if problem:
        raise InvalidInputError(f"{where}: {problem}", hint=_FIX)
    attn, kv, head_dim = _attention(size, hidden, heads, kv, head_dim)
    total_mlp, active_mlp, moe = _mlp_params(size, mtype, layers, hidden, inter)
    tied = _flag(top, "tie_word_embeddings", where)
    embed = vocab * hidden * (1 if (_flag(cfg, "tie_word_embeddings", where) if tied is None else tied) else 2)
    total = embed + layers * attn + total_mlp
    active = embed + layers * attn + active_mlp
    scale = _checkpoint_scale(cfg, top, index, total, where)
    total, active = total * scale, active * scale
    counted = "parameters counted from it" + (" and its safetensors index" if scale != 1.0 else "")
    problem = arch_problem({**shape, **moe, "params": total, "active_params": active},
                           {**size.names, "params": counted, "active_params": "active " + counted})
    if problem:
        raise InvalidInputError(f"{where}: {problem}", hint=_FIX)
    return ModelArch(name=name, layers=layers, hidden_size=hidden, heads=heads, kv_heads=kv, head_dim=head_dim,
                     params=float(total), active_params=float(active) if active < total * 0.999 else None,
                     vocab_size=vocab, max_context=ctx)


_SHAPE_KEYS = {"layers": ("num_hidden_layers", "n_layer", "num_layers"), "hidden_size": ("hidden_size", "n_embd", "d_model"),
               "heads": ("num_attention_heads", "n_head")}


def _checked_shape(size: _Sizes, top: dict, mtype: str, where: str) -> tuple[int, int, int]:
    """(layers, hidden size, attention heads) of a decoder-only transformer's config; any other
    architecture, or a config without one of the three, is refused (exit 2) with the fix."""
    archs = [str(a) for a in _typed(top, "architectures", list, "a list of class names", where) or []]
    label = archs[0] if archs else (mtype or "unknown")
    if mtype in _UNSUPPORTED or any(x in a.lower() for a in archs for x in ("mamba", "rwkv", "encoderdecoder")):
        raise InvalidInputError(f"{where}: unsupported architecture {label} ({mtype or 'no model_type'}): the "
                                "estimator models decoder-only transformers (dense, GQA, MoE, sliding window, MLA)",
                                hint="describe it with an `architecture:` block, or plan from measured `profiles:`")
    found = [size(field, *keys) for field, keys in _SHAPE_KEYS.items()]
    for value, keys in zip(found, _SHAPE_KEYS.values()):
        if value is None:
            raise InvalidInputError(f"{where}: unsupported architecture {label}: config.json has no {keys[0]} (nor "
                                    f"{' or '.join(keys[1:])})", hint=_FIX)
    return found[0], found[1], found[2]


def _attention(size: _Sizes, hidden: int, heads: int, kv: int, head_dim: int) -> tuple[int, int, int]:
    """(attention parameters per layer, KV heads, head dim as the KV cache counts them). MLA
    (DeepSeek-V2/V3) keeps one compressed latent per token and layer."""
    rank, rope = size("lora_rank", "kv_lora_rank"), size("lora_rank", "qk_rope_head_dim")
    if rank is None or rope is None:
        return hidden * heads * head_dim * 2 + 2 * hidden * kv * head_dim, kv, head_dim
    nope = size("lora_rank", "qk_nope_head_dim") or 128
    v_dim = size("lora_rank", "v_head_dim") or nope
    q_rank = size("lora_rank", "q_lora_rank")
    q = hidden * q_rank + q_rank * heads * (nope + rope) if q_rank else hidden * heads * (nope + rope)
    attn = q + hidden * (rank + rope) + rank * heads * (nope + v_dim) + heads * v_dim * hidden
    # KV bytes per token = 2 x layers x kv_heads x head_dim x b: one "head" of (rank + rope) / 2
    # values gives layers x (rank + rope) x b, replicated on every TP rank (kv_heads = 1)
    return attn, 1, (rank + rope + 1) // 2


def _mlp_params(size: _Sizes, mtype: str, layers: int, hidden: int, inter: int) -> tuple[int, int, dict]:
    """(total, active) MLP parameters over the layers, and the MoE facts the rules check: dense, or MoE
    (routed experts, shared experts, leading dense layers; the router's hidden x experts per MoE layer).
    ``top_k`` alone is no MoE key: older configs carry it as a sampling default."""
    experts = size("experts", "num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
    top_k = size("experts_per_tok", "num_experts_per_tok", "moe_topk")
    moe = {"experts": experts, "experts_per_tok": top_k}
    mlp_mult = 2 if mtype in _UNGATED else 3  # gated MLPs (SwiGLU / GeGLU): gate, up, down
    dense_mlp = mlp_mult * hidden * inter
    if not experts or experts <= 1 or (top_k or 0) > experts:  # dense, or refused by the rules
        return layers * dense_mlp, layers * dense_mlp, moe
    sampling = size("experts_per_tok", "top_k")  # MoE's in a few configs, a sampling default (50) in others
    top_k = top_k or (sampling if sampling and sampling <= experts else 2)
    e_inter = size("intermediate_size", "moe_intermediate_size", "expert_intermediate_size") or inter
    expert = mlp_mult * hidden * e_inter
    shared = ((size("shared_experts", "n_shared_experts") or 0) * expert
              + mlp_mult * hidden * (size("intermediate_size", "shared_expert_intermediate_size") or 0))
    dense_layers = min(size("dense_layers", "first_k_dense_replace") or 0, layers)
    moe_layers = layers - dense_layers
    return (dense_layers * dense_mlp + moe_layers * (experts * expert + shared + hidden * experts),
            dense_layers * dense_mlp + moe_layers * (top_k * expert + shared + hidden * experts),
            {"experts": experts, "experts_per_tok": top_k, "dense_layers": size.cfg.get("first_k_dense_replace")})


def _typed(doc: dict, key: str, types, expected: str, where: str, name: str = ""):
    """``doc[key]``, None when absent or null; a value of another JSON type is refused naming the key
    (a config.json or index edited or written by another tool: a list where an object goes was an
    AttributeError). A boolean is no number here, as in :func:`hetinfra.architecture.size_problem`."""
    value = doc.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, types):
        raise InvalidInputError(f"{where}: {name or key} is {value!r:.40}: expected {expected}", hint=_FIX)
    return value


def _flag(doc: dict, key: str, where: str) -> bool | None:
    """A config's true/false flag, None when absent or null; anything else is refused naming the key: a
    flag was read by its truth, so ``"multi_query": "false"`` (a string) shrank the KV cache to one head
    and ``"tie_word_embeddings": "false"`` left the output embedding uncounted, silently."""
    value = doc.get(key)
    if value is None or isinstance(value, bool):
        return value
    raise InvalidInputError(f"{where}: {key} is {value!r:.40}: expected true or false", hint=_FIX)


def _checkpoint_scale(cfg: dict, top: dict, index: dict | None, total: float, where: str) -> float:
    """The factor that makes the counted parameters match the checkpoint's safetensors index (its
    total bytes over the bytes per weight of its quantization or dtype), or 1 without an index."""
    at = f"the safetensors index beside {where}"
    size = _typed(_typed(index or {}, "metadata", dict, "an object", at) or {}, "total_size", (int, float),
                  "a number of bytes", at, "metadata.total_size")
    if size is None:
        return 1.0
    if not math.isfinite(size) or size <= 0:
        raise InvalidInputError(f"{at}: metadata.total_size is {size!r}: must be a number of bytes > 0", hint=_FIX)
    qc = (_typed(cfg, "quantization_config", dict, "an object", where)
          or _typed(top, "quantization_config", dict, "an object", where) or {})
    method = str(qc.get("quant_method", "")).lower()
    key = "bits" if qc.get("bits") is not None else "w_bit"
    bits = _typed(qc, key, (int, float), "a number of bits", where, f"quantization_config.{key}")
    if method in ("fp8", "fbgemm_fp8") or "fp8" in str(qc.get("format", "")).lower():
        per = 1.0
    elif bits:
        if not 1 <= bits <= 64:
            raise InvalidInputError(f"{where}: quantization_config.{key} is {bits!r}: must be 1 to 64 bits", hint=_FIX)
        per = float(bits) / 8.0
    else:
        dtype = _typed(cfg, "torch_dtype", str, "a dtype name such as bfloat16", where) or _typed(
            cfg, "dtype", str, "a dtype name such as bfloat16", where) or "bfloat16"
        per = float(_DTYPE_BYTES.get(dtype, 2))
    return (size / per) / total
