"""Every field of a config.json or safetensors index that the reader takes, beyond the sizes that
hetinfra.architecture checks, is typed where it is read: any JSON value there gives a model with a
finite parameter count or an InvalidInputError naming the key, never another exception. And the hub
cache's ref file, which names the snapshot to read, is read by the one file reader and must name a
commit."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from hetinfra.catalog.hf import arch_from_config, cached_file
from hetinfra.errors import InvalidInputError

DATA = Path(__file__).resolve().parents[1] / "data" / "hf"
CONFIG = json.loads((DATA / "llama-3.1-8b.config.json").read_text())
INDEX = json.loads((DATA / "llama-3.1-8b.safetensors.index.json").read_text())

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)

#: (where the value goes, key): the fields read besides the sizes
FIELDS = [("config", "architectures"), ("config", "quantization_config"), ("config", "model_type"),
          ("config", "torch_dtype"), ("config", "tie_word_embeddings"), ("config", "multi_query"),
          ("config", "text_config"), ("quant", "bits"), ("quant", "w_bit"), ("quant", "quant_method"),
          ("quant", "format"), ("index", "metadata"), ("meta", "total_size")]


@settings(max_examples=300, deadline=None)
@given(field=st.sampled_from(FIELDS), value=json_values)
def test_any_value_in_a_read_field_is_a_model_or_a_named_refusal(field, value):
    cfg, index = json.loads(json.dumps(CONFIG)), json.loads(json.dumps(INDEX))
    cfg["quantization_config"] = {"quant_method": "awq", "bits": 4}
    place, key = field
    target = {"config": cfg, "quant": cfg["quantization_config"], "index": index, "meta": index["metadata"]}[place]
    target[key] = value
    try:
        arch = arch_from_config(cfg, "x", index=index, where="cfg.json")
    except InvalidInputError as exc:
        assert "\n" not in exc.message and len(exc.message) < 400
        return
    assert math.isfinite(arch.params) and arch.params > 0


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ref=st.binary(max_size=40))
def test_a_ref_file_names_a_snapshot_of_its_repo_or_is_refused(tmp_path_factory, monkeypatch, ref):
    cache = tmp_path_factory.mktemp("hub")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    repo = cache / "models--org--m"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_bytes(ref)
    try:
        found = cached_file("org/m", "config.json")
    except InvalidInputError:
        return
    assert found is None or (repo / "snapshots") in found.resolve().parents


def test_a_ref_out_of_the_repo_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "config.json").write_text("{}")
    refs = tmp_path / "hub" / "models--org--m" / "refs"
    refs.mkdir(parents=True)
    (refs / "main").write_text("../../../elsewhere")
    with pytest.raises(InvalidInputError, match="not a commit hash"):
        cached_file("org/m", "config.json")


#: key -> the JSON type its value must have (or null); a flag is a boolean
TYPED = {"tie_word_embeddings": bool, "multi_query": bool, "model_type": str, "torch_dtype": str, "text_config": dict}


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from(sorted(TYPED)), value=json_values)
def test_a_flag_or_name_of_another_type_is_refused_never_read_by_its_truth(key, value):
    """``"multi_query": "false"`` (a string) read as true shrank the KV cache to one head, and
    ``"tie_word_embeddings": "false"`` left the output embedding uncounted, silently; a model_type,
    torch_dtype or text_config of another type was turned into text or passed over. A boolean flag
    gives the model that flag gives."""
    cfg = json.loads(json.dumps(CONFIG))
    cfg.pop("quantization_config", None)
    if key == "multi_query":
        cfg.pop("num_key_value_heads")  # the flag decides the KV heads only where the config names none
    cfg[key] = value
    if value is None or isinstance(value, TYPED[key]) and (TYPED[key] is not bool or isinstance(value, bool)):
        if TYPED[key] is bool:
            kv = arch_from_config({**cfg, key: value}, "x", index=INDEX, where="cfg.json")
            expected = arch_from_config({**cfg, key: bool(value)}, "x", index=INDEX, where="cfg.json")
            assert (kv.kv_heads, kv.params) == (expected.kv_heads, expected.params)
        return
    with pytest.raises(InvalidInputError, match=rf"^cfg\.json: {key} is "):
        arch_from_config(cfg, "x", index=INDEX, where="cfg.json")
