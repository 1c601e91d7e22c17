"""The trim's record of what refused a removal (hetinfra.plan.trim): a judgement that refuses one names the model it
missed, that model's verdict and its worst bound (plan.json fidelity.trim.last_pass[]), not only "an objective
missed on the search's seeds" (held-out h190, heldout67 F4: a removal 41 runs met without, refused with no word of
what the trim had seen)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import yaml

from hetinfra.plan.ceiling import Ceilings
from hetinfra.plan.trim import MISSED_ON_SEARCH, trim
from hetinfra.plan.verdicts import refusal_figures
from hetinfra.spec.load import load_spec
from tests.plan.conftest import REPO


class _NeedsAll:
    """A judge that meets while the plan keeps all ``have`` replicas, and otherwise finds chat-8b ``decision`` at
    ``bound``."""

    def __init__(self, have: int, ceilings: Ceilings, decision: str, bound: float | None):
        self.have, self.decision, self.bound = have, decision, bound
        self.progress, self.config, self.ceilings, self.last_pass = None, SimpleNamespace(load=1.2), ceilings, []

    def __call__(self, view: dict) -> dict:
        count = sum(int(a["count"]) for a in view["allocations"])
        met = count >= self.have
        entry = {"model": "chat-8b", "met": met, "decision": "met" if met else self.decision,
                 "objective": {"met": met, "ratio": 0.9 if met else 1.3}}
        if self.bound is not None:
            entry["ratio_bound"] = 0.95 if met else self.bound
        return {"met": met, "models": [entry], "units": []}


@pytest.fixture(scope="module")
def unverified(tmp_path_factory):
    """services/chat.yaml's unverified plan (estimated rates: no measured ceiling binds a removal first), with
    headroom for replicas to remove, and its loaded spec and path."""
    from hetinfra.plan.pipeline import plan_document

    folder = tmp_path_factory.mktemp("trim")
    spec = yaml.safe_load((REPO / "services" / "chat.yaml").read_text())
    spec.setdefault("planning", {})["headroom"] = 0.6
    path = folder / "service.yaml"
    path.write_text(yaml.safe_dump(spec))
    pr, _plan = plan_document(path, with_baselines=False, verify=False)
    return pr, load_spec(path)[0], path


@pytest.mark.parametrize("decision, bound", [("undecided", 1.0213), ("missed", None), ("missed", 3.5)])
def test_a_removal_the_search_refuses_names_the_model_its_verdict_and_its_bound(unverified, decision, bound):
    pr, spec, path = unverified
    judge = _NeedsAll(sum(pr.result.n.values()), Ceilings(spec, path), decision, bound)
    kept, _sim, steps = trim(pr, judge)
    assert not steps and kept is pr
    refused = [c for c in judge.last_pass if c.get("refused_by") == "simulation"]
    assert refused and all(c["detail"] == MISSED_ON_SEARCH and c["missed_model"] == "chat-8b"
                           and c["decision"] == decision for c in refused)
    # the bound where the judgement has one, else the objective's ratio
    assert all(c["ratio_bound"] == (bound if bound is not None else 1.3) for c in refused)


def test_a_check_after_the_bounds_is_named_as_the_verdict():
    """A model whose bounds met but a later check refused (a veto, the cliff probe, thrashing, the lumpy count) is
    named by that check; the removed unit's model is named before another that missed."""
    vetoed = {"model": "a", "met": False, "decision": "met", "vetoed": True, "ratio_bound": 0.85}
    cliff = {"model": "b", "met": False, "decision": "met", "cliff": {"collapsed": True}, "ratio_bound": 0.9}
    lumpy = {"model": "c", "met": False, "decision": "met", "lumpy": {"met": False}, "ratio_bound": 0.7}
    judged = {"met": False, "models": [vetoed, cliff, lumpy]}
    assert refusal_figures(judged, "b") == {"missed_model": "b", "decision": "cliff", "ratio_bound": 0.9}
    assert refusal_figures(judged, "c") == {"missed_model": "c", "decision": "lumpy", "ratio_bound": 0.7}
    assert refusal_figures(judged, "z") == {"missed_model": "a", "decision": "vetoed", "ratio_bound": 0.85}
    assert refusal_figures({"met": True, "models": []}, "a") == {}
