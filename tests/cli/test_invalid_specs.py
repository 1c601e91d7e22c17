"""Bad input gets exit 2 and a short, located message, never a traceback."""

from __future__ import annotations

import copy

import pytest
import yaml

from tests.conftest import write_offers

GOOD = {
    "name": "chat",
    "models": [{
        "name": "chat-8b", "model": "llama-3.1-8b", "source": "meta-llama/Llama-3.1-8B-Instruct",
        "slo": {"ttft_ms": 2000, "tpot_ms": 120},
        "demand": {"rate_rps": 4, "sizes": {"classes": [
            {"name": "short", "input_tokens": 200, "output_tokens": 100, "share": 1}]}},
    }],
    "infrastructure": {"clouds": ["aws"], "gpus": ["L4"]},
}


def _set(spec: dict, dotted: str, value) -> dict:
    spec = copy.deepcopy(spec)
    cur = spec
    parts = dotted.split(".")
    for p in parts[:-1]:
        cur = cur[int(p)] if p.isdigit() else cur[p]
    last = parts[-1]
    if value is _DELETE:
        del cur[last]
    else:
        cur[int(last) if last.isdigit() else last] = value
    return spec


_DELETE = object()

CASES = [
    # (id, spec-or-text, expected fragment in the message)
    ("unknown top-level key", _set(GOOD, "modles", []), "did you mean 'models'"),
    ("unknown nested key", _set(GOOD, "models.0.slo.tpot_msx", 5), "did you mean 'tpot_ms'"),
    ("rate is text", _set(GOOD, "models.0.demand.rate_rps", "fast"), "rate_rps"),
    ("rate zero", _set(GOOD, "models.0.demand.rate_rps", 0), "greater than or equal to 0.001"),
    ("rate negative", _set(GOOD, "models.0.demand.rate_rps", -3), "greater than or equal to 0.001"),
    ("bad duration unit", _set(GOOD, "models.0.slo.ttft_ms", "2 parsecs"), "expected a duration"),
    ("unknown model", _set(GOOD, "models.0.model", "llama-3.1-8"), "did you mean 'llama-3.1-8b'"),
    ("unknown gpu", _set(GOOD, "infrastructure.gpus", ["H10"]), "unknown GPU 'H10'"),
    ("unknown cloud", _set(GOOD, "infrastructure.clouds", ["awz"]), "did you mean 'aws'"),
    ("unknown region", _set(GOOD, "infrastructure.regions", ["us-east-9"]), "no offer in region 'us-east-9'"),
    ("weights sum to zero", _set(GOOD, "models.0.demand.sizes", {"histogram": {
        "input_edges": [0, 100], "output_edges": [0, 100], "weights": [[0]]}}), "sum to a positive number"),
    ("weights wrong shape", _set(GOOD, "models.0.demand.sizes", {"histogram": {
        "input_edges": [0, 100, 200], "output_edges": [0, 100], "weights": [[1, 2]]}}), "must be 2 rows"),
    ("edges not increasing", _set(GOOD, "models.0.demand.sizes", {"histogram": {
        "input_edges": [0, 100, 50], "output_edges": [0, 100], "weights": [[1], [1]]}}), "strictly increase"),
    ("two size sources", _set(GOOD, "models.0.demand.sizes.histogram", {
        "input_edges": [0, 100], "output_edges": [0, 100], "weights": [[1]]}), "exactly one of histogram"),
    ("model and architecture", _set(GOOD, "models.0.architecture", {
        "layers": 2, "hidden_size": 8, "heads": 1, "kv_heads": 1, "head_dim": 8, "params": 1000}), "exactly one of `model`"),
    ("missing profile file", _set(GOOD, "profiles", ["nope.csv"]), "profile file not found"),
    ("missing offers file", _set(GOOD, "offers", ["nope.csv"]), "offers file not found"),
    ("missing dataset file", _set(GOOD, "models.0.demand.sizes", {"dataset": {
        "path": "nope.csv", "input_edges": [0, 100], "output_edges": [0, 100]}}), "dataset file not found"),
    ("max_throughput without budget", _set(GOOD, "planning", {"objective": "max_throughput"}), "needs budget_usd_per_hour"),
    ("uppercase service name", _set(GOOD, "name", "Chat"), "must be lowercase"),
    ("duplicate model names", _set(GOOD, "models", GOOD["models"] * 2), "repeated: chat-8b"),
    ("headroom out of range", _set(GOOD, "planning", {"headroom": 1.5}), "headroom"),
    ("unknown objective", _set(GOOD, "planning", {"objective": "cheapest"}), "objective"),
    ("missing slo", _set(GOOD, "models.0.slo", _DELETE), "missing required field 'models[0].slo'"),
    ("request longer than context", _set(GOOD, "models.0.demand.sizes.classes", [
        {"name": "huge", "input_tokens": 200000, "output_tokens": 100, "share": 1}]), "tokens of context"),
    ("spot is not boolean", _set(GOOD, "infrastructure.spot", "maybe"), "spot"),
    ("availability unknown region", _set(GOOD, "infrastructure.availability", [
        {"cloud": "aws", "region": "mars-1", "gpu": "L4", "max_gpus": 4}]), "no aws offer in region 'mars-1'"),
    ("yaml syntax error", "name: chat\nmodels: [\n  - {name: a\n", "YAML syntax error"),
    ("not a mapping", "- just\n- a list\n", "must be a YAML mapping"),
]


@pytest.mark.parametrize("case_id,spec,fragment", CASES, ids=[c[0] for c in CASES])
def test_invalid_spec_exit_2(tmp_path, run_cli, case_id, spec, fragment):
    path = tmp_path / "service.yaml"
    path.write_text(spec if isinstance(spec, str) else yaml.safe_dump(spec, sort_keys=False))
    code, out, err = run_cli("plan", str(path))
    assert code == 2, f"exit {code}: {err}{out}"
    assert fragment in err
    assert "Traceback" not in err + out
    assert len(err.strip().splitlines()) <= 4
    assert str(path) in err or "not found" in err


def test_yaml_error_has_line_and_column(tmp_path, run_cli):
    path = tmp_path / "service.yaml"
    path.write_text("name: chat\nmodels:\n  - name: a\n   model: x\n")
    code, _, err = run_cli("plan", str(path))
    assert code == 2
    assert f"{path}:4:" in err


def test_unknown_key_points_at_its_line(tmp_path, run_cli):
    path = tmp_path / "service.yaml"
    path.write_text(yaml.safe_dump(_set(GOOD, "models.0.slo.tpot_msx", 5), sort_keys=False))
    line = next(i for i, l in enumerate(path.read_text().splitlines(), 1) if "tpot_msx" in l)
    code, _, err = run_cli("plan", str(path))
    assert code == 2 and f"{path}:{line}:" in err


def test_missing_spec_file(tmp_path, run_cli):
    code, _, err = run_cli("plan", str(tmp_path / "nope.yaml"))
    assert code == 2 and "spec file not found" in err


@pytest.mark.parametrize("row,fragment", [
    ({"price_per_hour": -1}, "price_per_hour must be > 0"),
    ({"price_per_hour": 1, "spot_price_per_hour": 2}, "must be > 0 and <= price_per_hour"),
    ({"price_per_hour": "cheap"}, "not a number"),
    ({"price_per_hour": 1, "gpu_count": 1.5}, "'gpu_count' must be a whole number"),
])
def test_bad_offers_csv(tmp_path, run_cli, row, fragment):
    base = {"cloud": "lab", "region": "r1", "instance_type": "n1", "gpu": "L4", "gpu_count": 1,
            "gpu_memory_gb": 24, "vcpus": 4, "memory_gb": 16}
    write_offers(tmp_path / "offers.csv", [{**base, **row}])
    path = tmp_path / "service.yaml"
    path.write_text(yaml.safe_dump(_set(_set(GOOD, "offers", ["offers.csv"]), "infrastructure.clouds", ["lab"])))
    code, _, err = run_cli("plan", str(path))
    assert code == 2 and fragment in err and "offers.csv:2" in err


def test_bad_profile_header(tmp_path, run_cli):
    (tmp_path / "p.csv").write_text("model,gpu,tp\nx,L4,1\n")
    path = tmp_path / "service.yaml"
    path.write_text(yaml.safe_dump(_set(GOOD, "profiles", ["p.csv"])))
    code, _, err = run_cli("plan", str(path))
    assert code == 2 and "lacks column(s) pp, input_tokens" in err
