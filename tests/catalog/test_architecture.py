"""The rules of an architecture (hetinfra.architecture), one place that both the spec's
`architecture:` block and a config.json go through: every real model obeys them, a consistent
generated one loads both ways, and each broken rule is refused naming its field as the source spells it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from hetinfra.architecture import HEAD_SPAN, arch_problem
from hetinfra.catalog.hf import arch_from_config, arch_from_file
from hetinfra.catalog.models import MODELS
from hetinfra.errors import InvalidInputError
from hetinfra.spec.load import parse_spec_text

DATA = Path(__file__).resolve().parents[1] / "data" / "hf"
SPEC = Path(__file__).resolve().parents[2] / "services" / "chat.yaml"

#: config.json facts of models whose shapes the rules must allow (from their Hugging Face config.json):
#: heads x head_dim over hidden_size from 0.76x (Gemma 3 27B) to 3x (GLM-4.5-Air)
REAL_CONFIGS = {
    "gemma-7b": dict(model_type="gemma", num_hidden_layers=28, hidden_size=3072, num_attention_heads=16,
                     num_key_value_heads=16, head_dim=256, intermediate_size=24576, vocab_size=256000,
                     max_position_embeddings=8192),
    "gemma-3-27b": dict(model_type="gemma3_text", num_hidden_layers=62, hidden_size=5376, num_attention_heads=32,
                        num_key_value_heads=16, head_dim=128, intermediate_size=21504, vocab_size=262208,
                        max_position_embeddings=131072),
    "qwen3-30b-a3b": dict(model_type="qwen3_moe", num_hidden_layers=48, hidden_size=2048, num_attention_heads=32,
                          num_key_value_heads=4, head_dim=128, intermediate_size=6144, moe_intermediate_size=768,
                          num_experts=128, num_experts_per_tok=8, vocab_size=151936, max_position_embeddings=40960),
    "glm-4.5-air": dict(model_type="glm4_moe", num_hidden_layers=46, hidden_size=4096, num_attention_heads=96,
                        num_key_value_heads=8, head_dim=128, intermediate_size=10944, moe_intermediate_size=1408,
                        n_routed_experts=128, num_experts_per_tok=8, n_shared_experts=1, first_k_dense_replace=1,
                        vocab_size=151552, max_position_embeddings=131072),
    # a dense config may say it has no experts, and carry top_k as a sampling default
    "gpt2-like": dict(model_type="gpt2", n_layer=12, n_embd=768, n_head=12, n_positions=1024, vocab_size=50257,
                      num_experts=0, top_k=50),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_catalog_model_obeys_the_rules(name):
    m = MODELS[name]
    assert arch_problem(vars(m)) is None


@pytest.mark.parametrize("name", sorted(REAL_CONFIGS))
def test_real_configs_obey_the_rules(name):
    arch_from_config(REAL_CONFIGS[name], name)


@pytest.mark.parametrize("path", sorted(p.name for p in DATA.glob("*.config.json") if "mamba" not in p.name))
def test_the_test_data_configs_obey_the_rules(path):
    a = arch_from_file(DATA / path, "x")
    assert arch_problem(vars(a)) is None


# ---- generated architectures --------------------------------------------------------------------

@st.composite
def architectures(draw) -> dict:
    """A consistent architecture as the spec's block spells it: KV heads dividing the heads, heads x
    head_dim within the real span of hidden_size, parameters at least layers x hidden_size^2."""
    kv = draw(st.integers(1, 16))
    heads = kv * draw(st.integers(1, 8))
    head_dim = draw(st.sampled_from([32, 64, 80, 96, 128, 192, 256]))
    hidden = max(1, round(heads * head_dim / draw(st.floats(0.34, 1.34))))
    layers = draw(st.integers(1, 128))
    params = float(layers * hidden * hidden * draw(st.integers(1, 200)))
    arch = {"layers": layers, "hidden_size": hidden, "heads": heads, "kv_heads": kv, "head_dim": head_dim,
            "params": params}
    if draw(st.booleans()):
        arch["active_params"] = params * draw(st.floats(0.01, 1.0))
    return arch


def _config(a: dict) -> dict:
    """``a`` as a config.json spells it."""
    return {"num_hidden_layers": a["layers"], "hidden_size": a["hidden_size"], "num_attention_heads": a["heads"],
            "num_key_value_heads": a["kv_heads"], "head_dim": a["head_dim"], "intermediate_size": 3 * a["hidden_size"],
            "vocab_size": 32000, "max_position_embeddings": 8192}


def _spec_error(arch: dict) -> str | None:
    doc = yaml.safe_load(SPEC.read_text())
    m = doc["models"][0]
    m.pop("model", None)
    m["architecture"] = arch
    try:
        parse_spec_text(yaml.safe_dump(doc), "svc.yaml")
    except InvalidInputError as exc:
        return exc.message
    return None


FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(architectures())
def test_a_consistent_architecture_loads_both_ways(a):
    assert _spec_error(a) is None
    m = arch_from_config(_config(a), "x")
    assert (m.layers, m.hidden_size, m.heads, m.kv_heads, m.head_dim) == \
        (a["layers"], a["hidden_size"], a["heads"], a["kv_heads"], a["head_dim"])


def _non_divisor(heads: int, pick: int) -> int:
    """A KV head count that does not divide ``heads``: a non-divisor below it, or one above it."""
    bad = [k for k in range(2, heads) if heads % k] + [heads + 1 + pick % 7]
    return bad[pick % len(bad)]


#: rule -> (break it in a spec's block, the field the error names; break it in a config.json, the key named)
BREAKS = {
    "kv_heads divides heads": (lambda a, p: {**a, "kv_heads": _non_divisor(a["heads"], p)}, "kv_heads",
                               lambda c, p: {**c, "num_key_value_heads": _non_divisor(c["num_attention_heads"], p)},
                               "num_key_value_heads"),
    "heads x head_dim near hidden_size": (
        lambda a, p: {**a, "hidden_size": a["heads"] * a["head_dim"] * (HEAD_SPAN + 1 + p % 3),
                      "params": 1e14}, "head_dim",
        lambda c, p: {**c, "head_dim": 1, "hidden_size": c["num_attention_heads"] * (HEAD_SPAN + 1 + p % 3)},
        "head_dim"),
    "sizes > 0": (lambda a, p: {**a, ["layers", "hidden_size", "heads", "kv_heads", "head_dim"][p % 5]: -(p % 2)},
                  None,
                  lambda c, p: {**c, ["num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads",
                                      "head_dim", "intermediate_size"][p % 6]: [0, -14336, "32", math.nan, 1e400][p % 5]},
                  None),
    "experts_per_tok <= experts": (None, None,
                                   lambda c, p: {**c, "num_local_experts": p % 9, "num_experts_per_tok": p % 9 + 1 + p % 5},
                                   "num_experts_per_tok"),
    "active_params <= params": (lambda a, p: {**a, "active_params": a["params"] * (1.5 + p % 3)}, "active_params",
                                None, None),
    "params >= layers x hidden_size^2": (
        lambda a, p: {**a, "params": a["layers"] * a["hidden_size"] ** 2 / (2 + p % 5), "active_params": None},
        "params", None, None),
}


def _broken_field(before: dict, after: dict) -> str:
    return next(k for k in after if after[k] != before.get(k))


@FAST
@given(architectures(), st.sampled_from(sorted(BREAKS)), st.integers(0, 1000))
def test_each_broken_rule_is_refused_naming_its_field(a, rule, pick):
    spec_break, spec_field, cfg_break, cfg_key = BREAKS[rule]
    if spec_break is not None:
        broken = {k: v for k, v in spec_break(a, pick).items() if v is not None}
        field = spec_field or _broken_field(a, broken)
        msg = _spec_error(broken)
        assert msg is not None and field in msg and "\n" not in msg, (rule, broken, msg)
        assert "ArchitectureSpec" not in msg and "valid string" not in msg
    if cfg_break is not None:
        before = _config(a)
        cfg = cfg_break(before, pick)
        key = cfg_key or next(k for k in cfg if repr(cfg[k]) != repr(before[k]))
        with pytest.raises(InvalidInputError) as exc:
            arch_from_config(cfg, "x", where="cfg.json")
        assert exc.value.message.startswith("cfg.json: ") and key in exc.value.message, (rule, cfg, exc.value.message)
