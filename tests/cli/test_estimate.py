"""`hetinfra estimate`: the estimator on the command line."""

from __future__ import annotations

import json

import pytest

from hetinfra.catalog.gpus import get_gpu
from hetinfra.catalog.models import get_model
from hetinfra.perf.estimator import estimate

ARGS = ["estimate", "--model", "llama-3.1-70b", "--gpu", "H100", "--tp", "4", "--pp", "1", "--input", "1000",
        "--output", "250", "--ttft-ms", "2000", "--tpot-ms", "50"]


def test_json_matches_the_estimator(run_cli):
    code, out, _ = run_cli(*ARGS, "--json")
    assert code == 0
    doc = json.loads(out)
    est = estimate(get_model("llama-3.1-70b"), get_gpu("H100"), tp=4, pp=1, input_tokens=1000, output_tokens=250,
                   ttft_ms=2000, tpot_ms=50)
    assert doc["feasible"] is True and est.feasible
    assert doc["max_rps"] == pytest.approx(est.max_rps, abs=1e-4)
    assert doc["batch"] == est.batch and doc["binding"] == est.binding
    assert doc["tpot_ms"] <= 50 + 1e-6 and doc["ttft_ms"] <= 2000
    assert doc["weights_gb_per_gpu"] == pytest.approx(141.1 / 4, abs=0.1)


def test_precision_flag_changes_the_answer(run_cli):
    bf16 = json.loads(run_cli(*ARGS, "--json")[1])
    fp8 = json.loads(run_cli(*ARGS, "--json", "--precision", "fp8")[1])
    assert fp8["weights_gb_per_gpu"] < bf16["weights_gb_per_gpu"]
    assert fp8["max_rps"] > bf16["max_rps"]


def test_infeasible_has_reason(run_cli):
    code, out, _ = run_cli("estimate", "--model", "llama-3.1-70b", "--gpu", "L4", "--input", "1000", "--output", "250",
                           "--ttft-ms", "2000", "--tpot-ms", "50", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["feasible"] is False and doc["max_rps"] == 0
    assert doc["binding"] == "weights" and "weights need 141.1 GB" in doc["reason"]


@pytest.mark.parametrize("flags,fragment,hint", [
    (["--tp", "3"], "--tp 3: llama-3.1-8b's 32 attention heads are not divisible by tp=3", "1, 2, 4, 8, 16, 32"),
    (["--pp", "40"], "--pp 40: pp=40 exceeds llama-3.1-8b's 32 layers", "at most 32"),
    (["--input", "200000"], "--input/--output: a request of 200000+250 tokens exceeds", "within 131072 tokens"),
])
def test_a_layout_or_request_the_model_cannot_take_is_exit_2(run_cli, flags, fragment, hint):
    """vLLM would not start the engine (or take the request): an invalid argument, not a capacity answer."""
    args = ["estimate", "--model", "llama-3.1-8b", "--gpu", "H100", "--input", "1000", "--output", "250",
            "--ttft-ms", "2000", "--tpot-ms", "50", *flags]
    code, out, err = run_cli(*args)
    assert code == 2 and fragment in err and hint in err and not out
    code, out, _ = run_cli(*args, "--json")
    assert code == 2 and json.loads(out)["error"]["exit_code"] == 2


def test_a_tp_vllm_cannot_shard_the_kv_heads_over_is_exit_2_with_the_ones_it_can(run_cli):
    code, out, err = run_cli("estimate", "--model", "phi-4", "--gpu", "H100", "--tp", "4", "--input", "1000",
                             "--output", "250", "--ttft-ms", "2000", "--tpot-ms", "50")
    assert code == 2 and "--tp 4: phi-4's 10 KV heads are not divisible by tp=4" in err
    assert "attention over: 1, 2, 5, 10, 20, 40" in err and not out


def test_an_infeasible_answer_says_what_would_change_it(run_cli):
    code, out, _ = run_cli("estimate", "--model", "llama-3.1-70b", "--gpu", "L4", "--input", "1000", "--output", "250",
                           "--ttft-ms", "2000", "--tpot-ms", "50")
    assert code == 0 and "infeasible (weights)" in out and "a lower --precision" in out


def test_text_output_names_binding(run_cli):
    code, out, _ = run_cli(*ARGS)
    assert code == 0 and "binding" in out and "req/s per engine" in out


@pytest.mark.parametrize("flag,value,fragment", [("--model", "llama-3.1-7b", "did you mean 'llama-3.1-70b'"),
                                                 ("--gpu", "H10", "did you mean 'H100'")])
def test_unknown_names_exit_2(run_cli, flag, value, fragment):
    args = list(ARGS)
    args[args.index(flag) + 1] = value
    code, _, err = run_cli(*args)
    assert code == 2 and fragment in err


def test_compare_without_aiconfigurator_says_how_to_install_it(run_cli, monkeypatch):
    from hetinfra.perf import aic_backend

    monkeypatch.setattr(aic_backend, "available", lambda: False)
    code, _, err = run_cli(*ARGS, "--compare")
    assert code == 2 and "hetinfra[aiconfigurator]" in err


def test_compare_outside_the_kernel_database_is_a_clear_error(run_cli):
    from hetinfra.perf import aic_backend

    if not aic_backend.available():
        pytest.skip("aiconfigurator-core is not installed (pip install 'hetinfra[aiconfigurator]')")
    code, _, err = run_cli("estimate", "--model", "llama-3.1-8b", "--gpu", "L4", "--input", "500", "--output", "100",
                           "--ttft-ms", "2000", "--tpot-ms", "50", "--compare")
    assert code == 2 and "does not cover" in err and "L4" in err


# its layout's kernel fit is one of test_aic_backend's spread: made once, on their worker (tests/xdist_groups.py)
@pytest.mark.xdist_group("kernel-fits")
def test_compare_prints_both_sources_and_widens_where_they_disagree(run_cli):
    from hetinfra.perf import aic_backend

    if not aic_backend.available():
        pytest.skip("aiconfigurator-core is not installed (pip install 'hetinfra[aiconfigurator]')")
    code, out, _ = run_cli(*ARGS, "--compare", "--json")
    assert code == 0
    cmp = json.loads(out)["compare"]
    low, _, high = cmp["interval"]
    assert cmp["aiconfigurator"]["binding"] and low <= cmp["ratio"] <= high
    est = json.loads(out)["max_rps"]
    if cmp["widened"]:  # safe plans the pessimistic of the two figures
        assert cmp["safe_rps"] == pytest.approx(est * min(1.0, cmp["ratio"]), rel=1e-3)
    else:  # the estimate, or the interval's low end where it is extrapolated
        assert cmp["safe_rps"] in (pytest.approx(est, rel=1e-3), pytest.approx(est * low, rel=1e-3))
