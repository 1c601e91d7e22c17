"""Verified plans: `hetinfra plan` simulates its solution and re-plans what misses its percentile
objective; an independent `hetinfra simulate` of the written plan then confirms the promise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from hetinfra.plan.verify import BRACKET, CREDIT_STEP, FACTOR_MAX, FACTOR_MIN, MIN_CREDIT, next_factors

REPO = Path(__file__).resolve().parents[2]


def _tight_spec(tmp_path: Path, **planning) -> Path:
    """A 70B model with a tight p99 TPOT (50 ms), long prompts and a TTFT of 1.5 s, where a plan at the
    mean-field capacity is known to miss its p99 (the first round misses: asserted below)."""
    spec = {
        "name": "tight",
        "models": [{
            "name": "code-70b", "model": "llama-3.1-70b", "source": "meta-llama/Llama-3.1-70B-Instruct",
            "precision": "fp8", "slo": {"ttft_ms": 1500, "tpot_ms": 50, "percentile": "p99"},
            "demand": {"rate_rps": 3, "sizes": {"histogram": {
                "input_edges": [0, 1000, 4000], "output_edges": [0, 200, 600],
                "weights": [[0.4, 0.2], [0.25, 0.15]]}}}}],
        "infrastructure": {"clouds": ["aws", "gcp"], "gpus": ["H100", "A100-80GB", "L40S"]},
        # confidence expected: rates at the estimate's middle, so the first (mean-field) round misses
        "planning": {"confidence": "expected", "verify": {"requests": 3000, "load": 1.2, **planning}},
    }
    path = tmp_path / "tight.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_tight_slo_plan_is_verified_and_holds_in_an_independent_simulation(tmp_path, run_cli):
    spec = _tight_spec(tmp_path)
    out = tmp_path / "out"
    code, stdout, err = run_cli("plan", str(spec), "--out", str(out), "--no-baselines")
    assert code == 0, err
    plan = json.loads((out / "plan.json").read_text())
    f = plan["fidelity"]
    assert f["verified"] and f["met"] and f["simulator"] == "sim-v1" and f["load"] == 1.2
    assert f["history"][0]["met"] is False  # the mean-field plan misses its p99 ...
    assert f["rounds"] >= 2 and f["derate"]["code-70b"] < 1.0  # ... so it was derated and re-solved
    assert f["load_basis"] == "planning.verify.load" and f["margin"] == 0.0
    [m] = f["models"]
    # the promise is the replications' one-sided 95% bound (issue 33), not one seed's p99
    assert m["decision"] == "met" and m["bound"]["ttft_ms"] <= 1500 and m["bound"]["tpot_ms"] <= 50
    assert min(t["derate"] for t in plan["templates"]) == f["derate"]["code-70b"]
    assert "Latency objectives, simulated at 1.2x demand" in stdout
    # an independent run: another seed, more requests, the declared demand
    code, stdout, err = run_cli("simulate", str(out), "--json", "--seed", "7", "--requests", "6000")
    assert code == 0, err
    sim = json.loads(stdout)
    [m] = sim["models"]
    assert m["met"], m["objective"]
    assert m["objective"]["attainment"] >= 0.99
    assert m["ttft_ms"]["p99"] <= 1500 and m["tpot_ms"]["p99"] <= 50


def test_no_verify_says_so_and_strict_verify_fails_when_rounds_run_out(tmp_path, run_cli, monkeypatch):
    from hetinfra.plan import pad, relief

    spec = _tight_spec(tmp_path)
    code, stdout, err = run_cli("plan", str(spec), "--json", "--no-baselines", "--no-verify")
    assert code == 0, err
    plan = json.loads(stdout)
    assert plan["fidelity"] == {"verified": False, "reason": "plan --no-verify"}
    assert any("not verified by simulation" in w for w in plan["warnings"])
    assert all(t["derate"] == 1.0 for t in plan["templates"])

    # one round, no settling: the first plan misses on the search's seeds and the rounds run out; the padding adds
    # replicas to code-70b until it meets on fresh confirm seeds and on the search's
    one_round = _tight_spec(tmp_path, max_rounds=1, settle_rounds=0)
    code, stdout, err = run_cli("plan", str(one_round), "--json", "--no-baselines")
    assert code == 0, err
    plan = json.loads(stdout)
    f = plan["fidelity"]
    assert f["met"] is True and f["rounds"] == 1 and f["history"][0]["met"] is False
    [padded] = f["confirmation"]["padded"]
    assert padded["model"] == "code-70b" and padded["missed_on"] == "search" and padded["met"]
    assert padded["replicas_added"] >= 1 and plan["cost_usd_per_hour"] > f["history"][0]["cost_usd_per_hour"]
    assert any("as the search's rounds ran out with it missing; met on fresh seeds" in w for w in plan["warnings"])

    # where no unit can take a replica within the spec's rules (a cap; here every candidate breaks one),
    # the plan says it misses, and --strict-verify fails it
    monkeypatch.setattr(pad, "breaks_rules", lambda candidate: ["a rule broken"])
    monkeypatch.setattr(relief, "breaks_rules", lambda candidate: ["a rule broken"])  # nor a sibling's replica
    code, stdout, err = run_cli("plan", str(one_round), "--json", "--no-baselines")
    assert code == 0, err
    plan = json.loads(stdout)
    assert plan["fidelity"]["met"] is False and plan["fidelity"]["rounds"] == 1
    assert plan["fidelity"]["confirmation"]["padded"][0]["replicas_added"] == 0
    assert any("misses the latency objective of code-70b" in w for w in plan["warnings"])

    out = tmp_path / "strict"
    code, stdout, err = run_cli("plan", str(one_round), "--out", str(out), "--no-baselines", "--strict-verify")
    assert code == 3 and "misses the latency objective of code-70b" in err and "hint:" in err
    assert not out.exists()  # nothing written


def test_rounds_that_run_out_unmet_settle_before_any_padding(tmp_path, run_cli):
    """The same one-round spec with settle_rounds at its default: the rounds go on settling (no factor
    rises) until a plan meets, so nothing is padded, and plan.json says which rounds settled."""
    code, stdout, err = run_cli("plan", str(_tight_spec(tmp_path, max_rounds=1)), "--json", "--no-baselines")
    assert code == 0, err
    f = json.loads(stdout)["fidelity"]
    assert f["met"] is True and f["max_rounds"] == 1 and f["settle_rounds"] == 6 and 1 < f["rounds"] <= 7
    assert f["history"][0]["met"] is False and "settling" not in f["history"][0]
    assert all(h["settling"] is True for h in f["history"][1:]) and f["history"][-1]["met"] is True
    assert not f["confirmation"].get("padded")


def test_same_input_same_verified_plan(tmp_path, run_cli):
    spec = _tight_spec(tmp_path)
    docs = []
    for _ in range(2):
        code, stdout, err = run_cli("plan", str(spec), "--json", "--no-baselines", "--no-template-cache")
        assert code == 0, err
        doc = json.loads(stdout)
        doc["solver"].pop("build_s"), doc["solver"].pop("solve_s")
        docs.append(doc)
    assert docs[0] == docs[1]


REGIMES = {"ta": ("ra", "a"), "tb": ("rb", "b"), "ta2": ("ra2", "a")}
DOC = {"allocations": [{"unit": "ua", "template": "ta", "model": "a"}, {"unit": "ub", "template": "tb", "model": "b"}]}
CEILING = {"ra": 1.92, "rb": 1.92, "ra2": 1.92}


def _sim(models: dict[str, tuple[bool, float | None]]) -> dict:
    """A simulation where each model's one unit (u<model>) misses or meets as the model does."""
    return {"models": [{"model": m, "met": met, "objective": {"ratio": r}} for m, (met, r) in models.items()],
            "units": [{"unit": f"u{m}", "count": 100, "objective": {"met": met, "ratio": r}}
                      for m, (met, r) in models.items()]}


def _next(models, g, ok, bad):
    return next_factors(_sim(models), DOC, g, ok, bad, CEILING, REGIMES)


def test_factors_shrink_by_the_miss_ratio_then_bisect_per_regime():
    ok, bad = {}, {}
    g = _next({"a": (False, 1.25), "b": (True, 0.85)}, {"ra": 1.0, "rb": 1.0, "ra2": 1.0}, ok, bad)
    # 1 / 1.25; a regime that met keeps its factor; the model's untried regime takes the same step
    assert g == {"ra": pytest.approx(0.8), "rb": 1.0, "ra2": pytest.approx(0.8)}
    g = _next({"a": (False, 5.0), "b": (True, 0.85)}, g, ok, bad)
    assert g["ra"] == pytest.approx(0.8 * FACTOR_MIN)  # never more than halved in one round
    g = _next({"a": (False, 1.01), "b": (True, 0.85)}, g, ok, bad)
    assert g["ra"] == pytest.approx(0.4 * FACTOR_MAX)  # always at least 8% off while missing
    g = _next({"a": (False, 3.0), "b": (True, 0.85)}, g, ok, bad)
    assert g["ra"] == pytest.approx(0.368 * FACTOR_MIN)
    g = _next({"a": (True, 0.85), "b": (True, 0.85)}, g, ok, bad)
    assert g["ra"] == pytest.approx((0.184 * 0.368) ** 0.5)  # met at 0.184, missed at 0.368: the midpoint
    mid = (0.184 * 0.368) ** 0.5
    g = _next({"a": (True, 0.9), "b": (True, 0.85)}, g, ok, bad)
    assert g["ra"] == pytest.approx((mid * 0.368) ** 0.5)  # met at mid: bisect [mid, 0.368]
    met_at = g["ra"]
    assert 0.368 / met_at < BRACKET  # met there: the bracket [met_at, 0.368] is narrow enough to stop
    assert _next({"a": (True, 0.95), "b": (True, 0.85)}, g, ok, bad)["ra"] == pytest.approx(met_at)


def test_a_credit_under_ten_percent_is_not_taken():
    """A regime within MIN_CREDIT of the top of its interval (a measured template at 1.0 of +-5%)
    keeps its factor: no re-solve for capacity the trim takes back where it is a whole replica."""
    near = {"ra": 1.05, "rb": 1.92, "ra2": 1.05}
    g = {"ra": 1.0, "rb": 1.8, "ra2": 1.0}
    out = next_factors(_sim({"a": (True, 0.3), "b": (True, 0.3)}), DOC, g, {}, {}, near, REGIMES)
    assert out == g  # 1.05 and 1.92 / 1.8 are both under MIN_CREDIT
    far = {"ra": 1.05 * MIN_CREDIT, "rb": 1.92, "ra2": 1.05}
    out = next_factors(_sim({"a": (True, 0.3), "b": (True, 0.3)}), DOC, g, {}, {}, far, REGIMES)
    assert out["ra"] == pytest.approx(1.05 * MIN_CREDIT) and out["rb"] == 1.8


def test_slack_is_credited_up_to_the_top_of_the_confidence_interval():
    ok, bad = {}, {}
    g = {"ra": 1.0, "rb": 0.82, "ra2": 1.0}
    g = _next({"a": (True, 0.9), "b": (True, 0.5)}, g, ok, bad)
    assert g["rb"] == pytest.approx(0.82 * CREDIT_STEP) and g["ra"] == 1.0  # little slack: no credit
    for _ in range(5):
        g = _next({"a": (True, 0.9), "b": (True, 0.5)}, g, ok, bad)
    assert g["rb"] == pytest.approx(CEILING["rb"])
    g = _next({"a": (True, 0.9), "b": (False, 1.2)}, g, ok, bad)  # credited too far: back into the bracket
    assert g["rb"] < CEILING["rb"]


def test_the_trim_keeps_the_specs_rules_and_each_origins_routing():
    """A removal hands its flows on per class and per origin (``_drop_replica``); one that leaves an
    origin's class with no unit is refused (None), and one that breaks a rule the simulation does not
    judge (here the spot fraction) is found by ``breaks_rules`` (the solver's re-check without the
    load), so the trim does not take it."""
    from dataclasses import replace

    from hetinfra.plan.planner import PlanResult
    from hetinfra.plan.trim import _drop_replica, breaks_rules
    from hetinfra.solver.problem import AllocationProblem, SolverUnit
    from hetinfra.solver.result import SolveResult

    group = (("lab", "r1", "G"), 1)
    units = (SolverUnit("od", "m", 2.0, 1, (group,), {"x": 1.0}, "r1"),
             SolverUnit("sp", "m", 1.0, 1, (group,), {"x": 1.0}, "r1", spot=True))
    problem = AllocationProblem(units=units, demand={("m", "x"): 2.0}, max_spot_fraction={"m": 0.5})
    result = SolveResult("optimal", n={"od": 1, "sp": 1}, flow={("od", "m", "x"): 1.0, ("sp", "m", "x"): 1.0},
                         origin_flow={("od", "m", "x", "east"): 0.5, ("sp", "m", "x", "east"): 0.5,
                                      ("od", "m", "x", "west"): 0.5, ("sp", "m", "x", "west"): 0.5})
    pr = PlanResult(None, {}, problem, result, [])
    assert breaks_rules(pr) == []
    fewer = _drop_replica(pr, "od")
    assert fewer.result.n == {"sp": 1} and fewer.result.flow == {("sp", "m", "x"): 2.0}
    assert fewer.result.origin_flow == {("sp", "m", "x", "east"): 1.0, ("sp", "m", "x", "west"): 1.0}
    assert breaks_rules(fewer) == ["model m: 1 of 1 GPUs on spot > 50%"]
    alone = replace(pr, result=replace(result, origin_flow={("od", "m", "x", "west"): 1.0, ("sp", "m", "x", "east"): 1.0}))
    assert _drop_replica(alone, "od") is None  # west's class x would have no unit


def test_a_class_a_unit_served_alone_goes_to_the_units_that_can_serve_it():
    """The trim's removal of a unit's last replica hands a class it served alone to the model's other
    units whose rates cover it (the pairs the ILP may route), in proportion to what each could carry
    of it (replicas x rate), as hetinfra.sim.minimal.without_one_replica hands plan.json's routing on:
    chat at 3x its rate kept 2 L4s ($1.41/h) that served one class alone, where the L40Ss had room."""
    from hetinfra.plan.planner import PlanResult
    from hetinfra.plan.trim import _drop_replica
    from hetinfra.solver.problem import AllocationProblem, SolverUnit
    from hetinfra.solver.result import SolveResult

    group = (("lab", "r1", "G"), 1)
    units = (SolverUnit("big", "m", 2.0, 1, (group,), {"x": 1.0, "y": 4.0}, "r1"),
             SolverUnit("mid", "m", 2.0, 1, (group,), {"x": 1.0, "y": 2.0}, "r1"),
             SolverUnit("small", "m", 1.0, 1, (group,), {"y": 3.0}, "r1"),
             SolverUnit("xonly", "m", 1.0, 1, (group,), {"x": 1.0}, "r1"))
    problem = AllocationProblem(units=units, demand={("m", "x"): 2.0, ("m", "y"): 3.0})
    result = SolveResult("optimal", n={"big": 1, "mid": 2, "small": 1, "xonly": 1},
                         flow={("big", "m", "x"): 1.0, ("mid", "m", "x"): 1.0, ("small", "m", "y"): 3.0})
    fewer = _drop_replica(PlanResult(None, {}, problem, result, []), "small")
    assert fewer.result.flow == {("big", "m", "x"): 1.0, ("mid", "m", "x"): 1.0,
                                 ("big", "m", "y"): 1.5, ("mid", "m", "y"): 1.5}  # 1 x 4 and 2 x 2: halves
    none_can = SolveResult("optimal", n={"small": 1, "xonly": 1}, flow={("small", "m", "y"): 3.0, ("xonly", "m", "x"): 2.0})
    assert _drop_replica(PlanResult(None, {}, problem, none_can, []), "small") is None  # no other unit serves y


def test_the_trim_record_is_the_final_plans_not_a_vetoed_ones(tmp_path, run_cli, monkeypatch):
    """benchmarks/specs/capped-trio.yaml: a confirmation before its last puts a removal back, still misses,
    and vetoes the plan; the rounds resume and the final plan's own trim puts nothing back. plan.json's
    fidelity.trim.put_back is the last confirmation's (as trim.removed is the last trim's), so the
    summary no longer reads "1 replica(s) trimmed, 1 put back" of a plan that was replaced (a held-out
    spec's record named a put-back unit its final plan does not have)."""
    from hetinfra.plan import confirm

    attempts: list[list[str]] = []
    real = confirm.confirmed

    def recorded(*args, **kw):
        res = real(*args, **kw)
        attempts.append([r["unit"] for r in res[3]])
        return res

    monkeypatch.setattr(confirm, "confirmed", recorded)
    out = tmp_path / "out"
    code, _stdout, err = run_cli("plan", str(REPO / "benchmarks/specs/capped-trio.yaml"), "--out", str(out),
                                 "--no-baselines")
    assert code == 0, err
    fid = json.loads((out / "plan.json").read_text())["fidelity"]
    assert any(attempts[:-1]), f"capped-trio no longer puts back before a veto: {attempts}"
    assert fid["confirmation"]["vetoes"]
    assert [r["unit"] for r in fid["trim"]["put_back"]] == attempts[-1]
    units = {a["unit"] for a in json.loads((out / "plan.json").read_text())["allocations"]}
    assert all(r["unit"] in units for r in fid["trim"]["put_back"])
