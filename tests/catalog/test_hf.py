"""Any Hugging Face model: config.json -> the estimator's architecture facts, offline from a cache
built here with the hub's real layout, or from `architecture: path/to/config.json` (issue 17)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from hetinfra.catalog.hf import arch_from_file
from hetinfra.catalog.models import get_model
from hetinfra.errors import InvalidInputError

DATA = Path(__file__).resolve().parents[1] / "data" / "hf"
REPO = "acme/Llama-3.1-8B-Clone"  # not a catalog alias: must come from the cache
COMMIT = "0e9e39f249a16976918f6564b8830bc894c89659"


def _cache(tmp_path: Path, monkeypatch, *, with_config: bool = True) -> Path:
    hub = tmp_path / "hf" / "hub"
    repo = hub / ("models--" + REPO.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    snap = repo / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    if with_config:
        shutil.copy(DATA / "llama-3.1-8b.config.json", snap / "config.json")
        shutil.copy(DATA / "llama-3.1-8b.safetensors.index.json", snap / "model.safetensors.index.json")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return hub


def test_dense_gqa_config_matches_the_catalog():
    a, ref = arch_from_file(DATA / "llama-3.1-8b.config.json", "x"), get_model("llama-3.1-8b")
    assert (a.layers, a.hidden_size, a.heads, a.kv_heads, a.head_dim, a.vocab_size, a.max_context) == \
        (ref.layers, ref.hidden_size, ref.heads, ref.kv_heads, ref.head_dim, ref.vocab_size, ref.max_context)
    assert a.params == pytest.approx(ref.params, rel=0.002) and a.active_params is None


def test_moe_config_gives_total_and_active_parameters():
    a = arch_from_file(DATA / "mixtral-8x7b.config.json", "x")
    assert a.params == pytest.approx(46.7e9, rel=0.005) and a.active_params == pytest.approx(12.9e9, rel=0.01)


def test_mla_config_keeps_one_latent_per_token():
    a = arch_from_file(DATA / "deepseek-v3.config.json", "x")
    # (kv_lora_rank 512 + qk_rope 64) x 61 layers x 2 bytes = 70,272 B/token (vllm.md s2.1), not split by TP
    from hetinfra.perf.estimator import kv_bytes_per_token_per_gpu

    assert kv_bytes_per_token_per_gpu(a, 8) == pytest.approx(61 * 576 * 2, rel=0.01)
    assert a.params == pytest.approx(671e9, rel=0.01) and a.active_params == pytest.approx(37e9, rel=0.03)


def test_sliding_window_config_maps_conservatively():
    a = arch_from_file(DATA / "mistral-7b-v0.1.config.json", "x")
    assert (a.layers, a.kv_heads, a.max_context) == (32, 8, 32768) and a.params == pytest.approx(7.24e9, rel=0.01)


def test_unsupported_architecture_is_a_clear_error():
    with pytest.raises(InvalidInputError, match="unsupported architecture MambaForCausalLM"):
        arch_from_file(DATA / "mamba-130m.config.json", "x")


def _spec(model: dict) -> dict:
    return {"name": "hf", "models": [{"name": "llama-3.1-8b", "source": REPO, "slo": {"ttft_ms": 2000, "tpot_ms": 100},
                                      "demand": {"rate_rps": 2, "sizes": {"classes": [
                                          {"name": "a", "input_tokens": 500, "output_tokens": 200, "share": 1}]}},
                                      **model}],
            "infrastructure": {"clouds": ["aws"], "regions": ["us-east-1"], "gpus": ["L4", "L40S"]}}


def _plan(tmp_path, run_cli, spec, *extra):
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    return run_cli("plan", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "out"), "--no-baselines", "--no-verify", "--json", *extra)


def test_plan_from_a_hub_repo_id_offline(tmp_path, monkeypatch, run_cli):
    _cache(tmp_path, monkeypatch)
    code, out, err = _plan(tmp_path, run_cli, _spec({"model": REPO}))
    assert code == 0, err
    plan = json.loads(out)
    # same architecture as the catalog's llama-3.1-8b, so the same plan as naming the catalog entry
    (tmp_path / "ref").mkdir()
    code2, out2, err2 = _plan(tmp_path / "ref", run_cli, _spec({"model": "llama-3.1-8b"}))
    assert code2 == 0, err2
    ref = json.loads(out2)
    assert plan["models"][0]["model"] == REPO
    assert plan["cost_usd_per_hour"] == pytest.approx(ref["cost_usd_per_hour"])
    assert [t["capacity_rps"]["a"] for t in plan["templates"]] == \
        pytest.approx([t["capacity_rps"]["a"] for t in ref["templates"]], rel=0.01)


def test_missing_from_the_cache_offline_is_exit_2(tmp_path, monkeypatch, run_cli):
    _cache(tmp_path, monkeypatch, with_config=False)
    code, _, err = _plan(tmp_path, run_cli, _spec({"model": REPO}))
    assert code == 2 and "no config.json in the Hugging Face cache" in err and "HF_HUB_OFFLINE" in err


def test_architecture_config_path(tmp_path, run_cli):
    shutil.copy(DATA / "mixtral-8x7b.config.json", tmp_path / "config.json")
    code, out, err = _plan(tmp_path, run_cli, _spec({"architecture": "config.json"}))
    assert code == 0, err
    shutil.copy(DATA / "mamba-130m.config.json", tmp_path / "config.json")
    code, _, err = _plan(tmp_path, run_cli, _spec({"architecture": "config.json"}))
    assert code == 2 and "unsupported architecture" in err


def test_estimate_accepts_repo_ids_and_config_files(tmp_path, monkeypatch, run_cli):
    _cache(tmp_path, monkeypatch)
    args = ["--gpu", "L4", "--input", "500", "--output", "200", "--ttft-ms", "2000", "--tpot-ms", "100", "--json"]
    code, out, err = run_cli("estimate", "--model", REPO, *args)
    assert code == 0, err
    code, ref, _ = run_cli("estimate", "--model", "llama-3.1-8b", *args)
    assert json.loads(out)["max_rps"] == pytest.approx(json.loads(ref)["max_rps"], rel=0.01)
    code, out, err = run_cli("estimate", "--architecture", str(DATA / "llama-3.1-8b.config.json"), *args)
    assert code == 0 and json.loads(out)["max_rps"] == pytest.approx(json.loads(ref)["max_rps"], rel=0.01)
    code, _, err = run_cli("estimate", "--model", "acme/not-cached", *args)
    assert code == 2 and "no config.json" in err


@pytest.mark.parametrize("content,expected", [
    (None, "is a folder, not a file"),  # refused where the spec is loaded (hetinfra.spec.files)
    (b"\xff\xfe{}", "not UTF-8 text (byte 0xff at offset 0)"),
    (b'{"num_hidden_layers": 32', "not valid JSON"),
    (b'{"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 0}', "num_attention_heads is 0: must be at least 1"),
    (b'{"num_hidden_layers": "32", "hidden_size": 4096, "num_attention_heads": 32}', "num_hidden_layers is '32' (text)"),
    (b'{"num_hidden_layers": NaN, "hidden_size": 4096, "num_attention_heads": 32}', "num_hidden_layers is nan"),
    (b'{"num_hidden_layers": 1e400, "hidden_size": 4096, "num_attention_heads": 32}', "num_hidden_layers is inf"),
    (b'{"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "intermediate_size": -14336}',
     "intermediate_size is -14336: must be at least 1"),
    (b'{"hidden_size": 4096, "num_attention_heads": 32}', "config.json has no num_hidden_layers"),
])
def test_a_bad_config_file_names_the_spec_line_the_file_and_the_field(tmp_path, run_cli, content, expected):
    """Each problem of an `architecture:` file is one error (exit 2) after the spec line naming it."""
    if content is None:
        (tmp_path / "config.json").mkdir()
    else:
        (tmp_path / "config.json").write_bytes(content)
    code, _, err = _plan(tmp_path, run_cli, _spec({"architecture": "config.json"}))
    assert code == 2 and expected in err, err
    assert "s.yaml:" in err and "models[0].architecture: " in err and "Traceback" not in err


@settings(max_examples=30, derandomize=True, deadline=None)
@given(owner=st.integers(1, 300), name=st.integers(1, 300), char=st.sampled_from("aZ9._-"))
def test_property_any_owner_name_is_read_or_refused_never_a_traceback(tmp_path_factory, owner, name, char):
    """`model: OWNER/NAME` names the cache folder models--OWNER--NAME: one over 255 bytes was an OSError
    traceback (File name too long) in `plan` and `estimate` wherever the cache existed. Any repo id is
    now looked up or refused (exit 2) with the hub's rule, each part 1-96 characters."""
    from unittest import mock

    from hetinfra.perf.model import resolve_model_name

    hub = tmp_path_factory.getbasetemp() / "hf-any-owner" / "hub"
    hub.mkdir(parents=True, exist_ok=True)
    repo_id = "o" + char * (owner - 1) + "/n" + char * (name - 1)
    with mock.patch.dict("os.environ", {"HF_HUB_CACHE": str(hub), "HF_HUB_OFFLINE": "1"}):
        with pytest.raises(InvalidInputError) as exc:
            resolve_model_name(repo_id, "--model")
    why = exc.value.message + (exc.value.hint or "")
    assert ("no config.json in the Hugging Face cache" in why) == (owner <= 96 and name <= 96), why
    assert len(exc.value.message) < 400
