"""Ceilings that measurement and physics set (hetinfra.plan.ceiling, issue 33): a measured template
is never loaded past the top of its measured interval, whatever the simulation says, neither by the
trim nor by credit; every other one never past its roofline."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from hetinfra.plan.ceiling import Ceilings, unit_loads
from hetinfra.sim.minimal import scaled
from hetinfra.spec.load import load_spec

MEASURED = "custom-gpu/service.yaml"  # a GPU outside the catalog, rated by a measured profile


def _judges(doc: dict, spec, path):
    from tests.plan.test_minimal import _judges as judges

    return judges(doc["fidelity"], spec, path)


@pytest.mark.parametrize("name", ["chat.yaml", "summarize.yaml", MEASURED])
def test_verified_examples_stay_under_their_ceilings(verified_examples, name):
    doc, path = verified_examples[name]
    spec, _, _ = load_spec(path)
    ceilings = Ceilings(spec, path)
    loads = unit_loads(doc, doc["fidelity"]["load"], ceilings)
    assert loads and all(ratio <= 1.0 for ratio, _ in loads.values()), loads
    assert ceilings.over(doc, doc["fidelity"]["load"]) == {}


def test_a_plan_at_150pct_of_its_measured_profile_is_refused(verified_examples):
    doc, path = verified_examples[MEASURED]
    spec, _, _ = load_spec(path)
    load = doc["fidelity"]["load"]
    [(unit, (ratio, basis))] = unit_loads(doc, load, Ceilings(spec, path)).items()
    assert basis == "measured interval"
    planted = scaled(doc, {"chat-8b": 1.5 / ratio})  # the same fleet offered 150% of its measured top
    decide, confirm = _judges(doc, spec, path)
    for judge in (decide, confirm):
        verdict = judge(planted)
        assert not verdict["met"]
        [m] = verdict["models"]
        assert m["decision"] == "missed" and not m["objective"]["met"] and m["objective"]["ratio"] >= 1.5 - 1e-3
        [u] = [u for u in verdict["units"] if u["unit"] == unit]
        assert u["ceiling"] == {"ratio": pytest.approx(1.5, abs=1e-3), "basis": "measured interval"}
    assert decide(doc)["met"]  # the plan as verified meets


class _AlwaysMet:
    """A judge whose simulation always meets: what binds the trim is the spec's rules and the ceilings."""

    def __init__(self, ceilings: Ceilings, load: float):
        self.progress, self.config, self.ceilings, self.last_pass = None, SimpleNamespace(load=load), ceilings, []

    def __call__(self, view: dict) -> dict:
        return {"met": True, "models": [], "units": []}


def test_the_trim_never_takes_a_removal_past_a_measured_ceiling(tmp_path):
    """Where the simulation would meet with fewer replicas, the trim stops at the measured ceiling: the
    fewest replicas whose measured capacity (x 1.05) carries the load. Planted fault: without the
    ceiling check the trim goes down to one replica."""
    import math
    import shutil

    import yaml

    from hetinfra.plan.pipeline import plan_document
    from hetinfra.plan.plan_json import simulation_view
    from hetinfra.plan.trim import trim
    from tests.plan.conftest import REPO

    src = REPO / "services" / "custom-gpu"
    for f in ("offers.csv", "profiles.csv"):
        shutil.copy(src / f, tmp_path / f)
    spec = yaml.safe_load((src / "service.yaml").read_text())
    spec["planning"]["headroom"] = 0.6  # an unverified plan of many replicas to trim
    path = tmp_path / "service.yaml"
    path.write_text(yaml.safe_dump(spec))
    loaded, _, _ = load_spec(path)
    pr, plan = plan_document(path, with_baselines=False, verify=False)
    doc = plan.to_dict()
    ceilings, load = Ceilings(loaded, path), 1.2
    [(ratio, basis)] = unit_loads(doc, load, ceilings).values()
    [a] = doc["allocations"]
    floor = math.ceil(ratio * a["count"] - 1e-9)
    assert basis == "measured interval" and a["count"] > floor + 1
    trimmed, _sim, steps = trim(pr, _AlwaysMet(ceilings, load))
    assert sum(trimmed.result.n.values()) == floor and len(steps) == a["count"] - floor
    assert ceilings.over(simulation_view(trimmed), load) == {}


def test_credit_stops_at_the_measured_interval(verified_examples):
    """A measured template's credit limit is the measured interval's top (1.05) at any class mix."""
    doc, path = verified_examples[MEASURED]
    spec, _, _ = load_spec(path)
    [t] = doc["templates"]
    [m] = doc["models"]
    estimated = {**t, "capacity_rps": {w: r / t["derate"] for w, r in t["capacity_rps"].items()}, "derate": 1.0}
    assert Ceilings(spec, path).credit_limit(estimated, m) == pytest.approx(1.05, rel=1e-6)
    assert t["derate"] <= 1.05


def test_a_ceilings_roofline_memo_gives_each_template_its_own_roofline(verified_examples):
    """One Ceilings remembers rooflines across templates (by model, variant, GPU, tp, pp and class
    sizes): every template of a plan, its GPU, tp and pp varied, gets from the shared one exactly
    what a fresh Ceilings computes for it alone (a key missing tp or the GPU fails this)."""
    doc, path = verified_examples["chat.yaml"]
    spec, _, _ = load_spec(path)
    [m] = [x for x in doc["models"] if x["name"] == doc["templates"][0]["model"]]
    variants = [{**t, "id": f"{t['id']}-{gpu}-{tp}", "gpu": gpu, "tp": tp, "sources": {}}
                for t in doc["templates"] if t["model"] == m["name"]
                for gpu in ("L4", "A100-80GB", "H100") for tp in (1, 2, 4)]
    shared = Ceilings(spec, path)
    got = [shared.of_template(t, m) for t in variants]
    assert got == [Ceilings(spec, path).of_template(t, m) for t in variants]
    assert len({c.rps for ceilings in got for c in ceilings.values()}) > len(variants) // 2  # they do differ
