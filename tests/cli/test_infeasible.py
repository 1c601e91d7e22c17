"""Infeasible specs exit 3 and say what to relax (estimator-backed cases; budget/caps cases
are in tests/solver/test_hand_solved.py)."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from tests.cli.test_invalid_specs import GOOD, _set


def _write(tmp_path, spec) -> str:
    path = tmp_path / "service.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(path)


@pytest.mark.parametrize("what, objective, other", [("TPOT", 1, ("ttft_ms", 2000)), ("TTFT", 5, ("tpot_ms", 200))])
def test_an_unreachable_objective_names_the_fastest_gpu(tmp_path, run_cli, what, objective, other):
    """No allowed layout reaches the objective even alone (a decode step, or the prompt's prefill, with
    nothing queued): the message names the fastest layout and its time. An unreachable TTFT named the
    first two layouts' reasons in alphabetical order (a 70B model at TTFT 20 ms for 8,000-token
    prompts: A10's weights not fitting)."""
    spec = _set(_set(GOOD, f"models.0.slo.{what.lower()}_ms", objective), f"models.0.slo.{other[0]}", other[1])
    spec = _set(_set(spec, "infrastructure.gpus", ["L4", "A100-80GB", "H100"]), "infrastructure.clouds",
                ["aws", "gcp", "azure"])
    code, out, err = run_cli("plan", _write(tmp_path, spec))
    assert code == 3
    m = re.search(rf"no allowed GPU meets {what} {objective} ms for requests in<=200,out<=100: fastest is (\S+) "
                  r"tp=(\d) at ([\d.]+) ms", err)
    assert m, err
    assert m.group(1) == "H100" and float(m.group(3)) > objective
    assert "Traceback" not in err + out


def test_model_too_big_for_allowed_gpus(tmp_path, run_cli):
    """No allowed layout can hold the weights: one short line that says so, whose hint is more memory or a
    lower precision (not "loosen the SLO", which cannot help). An 8T-parameter model's message was 516
    characters repeating one A10 layout's reason twice."""
    # AWS offers T4 only as g4dn.xlarge (1 x 16 GB): 70B weights cannot fit.
    spec = _set(_set(GOOD, "models.0.model", "llama-3.1-70b"), "infrastructure.gpus", ["T4"])
    code, out, err = run_cli("plan", _write(tmp_path, spec), "--json")
    assert code == 3
    doc = json.loads(out)["error"]
    assert doc["exit_code"] == 3 and doc["type"] == "InfeasibleError" and doc["relax"]
    assert re.fullmatch(r"model chat-8b: its weights need 141 GB at bf16, more than any allowed layout holds \(at most "
                        r"[\d.]+ GB: \d nodes? of 1 x T4 at gpu_memory_utilization 0.9\)", doc["message"]), doc["message"]
    assert "lower precision" in doc["hint"] and "SLO" not in doc["hint"] and len(doc["message"]) < 200


def test_an_unserved_class_names_its_nearest_layout_once(tmp_path, run_cli):
    """Weights that some layout could hold but no layout serves: the reason of the layout with the most GPUs
    (the nearest to serving), each distinct reason once, and a hint that names memory too."""
    spec = _set(_set(GOOD, "models.0.model", "llama-3.1-70b"), "infrastructure.gpus", ["L4"])
    spec = _set(_set(spec, "infrastructure.clouds", ["aws", "gcp", "azure"]), "planning", {"max_nodes_per_template": 1})
    spec = _set(spec, "models.0.demand.sizes", {"classes": [{"name": "long", "input_tokens": 100000,
                                                             "output_tokens": 1000, "share": 1}]})
    spec = _set(_set(spec, "models.0.slo.ttft_ms", 60000), "models.0.slo.tpot_ms", 500)
    code, out, err = run_cli("plan", _write(tmp_path, spec), "--json")
    doc = json.loads(out)["error"]
    assert code == 3 and "(L4 tp=8: KV cache of llama-3.1-70b on L4 (tp=8, pp=1, bf16) holds" in doc["message"]
    assert doc["message"].count("weights need") <= 1 and "more memory" in doc["hint"]
