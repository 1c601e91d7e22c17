"""Infeasible specs exit 3 and say what to relax (estimator-backed cases; budget/caps cases
are in tests/solver/test_hand_solved.py)."""

from __future__ import annotations

import json
import re

import yaml

from tests.cli.test_invalid_specs import GOOD, _set


def _write(tmp_path, spec) -> str:
    path = tmp_path / "service.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(path)


def test_unreachable_tpot_names_the_fastest_gpu(tmp_path, run_cli):
    spec = _set(_set(GOOD, "models.0.slo.tpot_ms", 1), "infrastructure.gpus", ["L4", "A100-80GB", "H100"])
    spec = _set(spec, "infrastructure.clouds", ["aws", "gcp", "azure"])
    code, out, err = run_cli("plan", _write(tmp_path, spec))
    assert code == 3
    m = re.search(r"no allowed GPU meets TPOT 1 ms for requests in<=200,out<=100: fastest is (\S+) tp=(\d) at ([\d.]+) ms", err)
    assert m, err
    assert m.group(1) == "H100" and float(m.group(3)) > 1
    assert "Traceback" not in err + out


def test_unreachable_ttft_names_the_fastest_gpu(tmp_path, run_cli):
    """A prompt no allowed layout prefills within the TTFT objective even alone: the message names the
    fastest layout and its prefill time (it named the first two layouts' reasons in alphabetical
    order: A10's weights not fitting, for a 70B model whose TTFT no GPU reaches)."""
    spec = _set(_set(GOOD, "models.0.slo.ttft_ms", 5), "infrastructure.gpus", ["L4", "A100-80GB", "H100"])
    spec = _set(_set(spec, "infrastructure.clouds", ["aws", "gcp", "azure"]), "models.0.slo.tpot_ms", 200)
    code, out, err = run_cli("plan", _write(tmp_path, spec))
    assert code == 3
    m = re.search(r"no allowed GPU meets TTFT 5 ms for requests in<=200,out<=100: fastest is (\S+) tp=(\d) at ([\d.]+) ms", err)
    assert m, err
    assert m.group(1) == "H100" and float(m.group(3)) > 5
    assert "Traceback" not in err + out


def test_model_too_big_for_allowed_gpus(tmp_path, run_cli):
    # AWS offers T4 only as g4dn.xlarge (1 x 16 GB): 70B weights cannot fit.
    spec = _set(_set(GOOD, "models.0.model", "llama-3.1-70b"), "infrastructure.gpus", ["T4"])
    code, out, err = run_cli("plan", _write(tmp_path, spec), "--json")
    assert code == 3
    assert "no allowed GPU can serve requests in<=200,out<=100" in err
    assert "weights" in err
    doc = json.loads(out)["error"]
    assert doc["exit_code"] == 3 and doc["type"] == "InfeasibleError" and doc["relax"]
