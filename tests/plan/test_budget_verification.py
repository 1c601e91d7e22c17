"""The work budget (hetinfra.plan.budget) inside verification: each loop asks it before its next step
and, once it is spent, stops there conservatively and says so (plan.json work_budget.stopped, a
warning): the rounds keep the cheapest met round, undecided models count as missed, the trim keeps the
plan (minimality not proven), the over-provisioning search reports its lower bound, and a plan whose
confirmation never ran is "not confirmed", never met. The clock is faked through hetinfra.solver.clock,
and runs out at one chosen step."""

from __future__ import annotations

import pytest

from hetinfra.plan import confirm, pad, replicated, rounds, trim, verify
from hetinfra.plan.budget import Budget, current, opened
from hetinfra.plan.pipeline import BASELINES, plan_document
from hetinfra.sim import minimal
from hetinfra.solver import clock
from tests.plan.test_budget import linked_spec  # noqa: F401  (a fixture: two models, briefly verified)
from tests.plan.test_replicated import VIEW, _judge


@pytest.fixture
def spec(linked_spec):  # noqa: F811
    """tests/plan/test_budget.py's spec: two models sharing a cap, verified briefly (six rounds, a trim
    that checks five removals and keeps none, a confirmation that meets)."""
    return linked_spec


@pytest.fixture
def frozen(monkeypatch):
    """A clock that stands still until the test spends the budget (``spend()``)."""
    now = [1000.0]
    monkeypatch.setattr(clock, "now", lambda: now[0])
    monkeypatch.setenv("HETINFRA_CACHE_DIR", "off")

    def spend() -> None:
        now[0] += 1e9

    return spend


def _spent_after(monkeypatch, owner, name: str, spend, calls: int = 1) -> None:
    """``owner.name`` as it was, but the budget is spent once it returned ``calls`` times."""
    real, seen = getattr(owner, name), [0]

    def wrapped(*args, **kwargs):
        out = real(*args, **kwargs)
        seen[0] += 1
        if seen[0] == calls:
            spend()
        return out

    monkeypatch.setattr(owner, name, wrapped)


def _plan(path) -> dict:
    """plan.json of ``path``; its summary, as `hetinfra plan` prints it, under the key "summary"."""
    from rich.console import Console

    from hetinfra.plan.summary import render_summary

    doc = plan_document(path)[1]
    console = Console(record=True, width=200)
    render_summary(doc, console)
    return {**doc.to_dict(), "summary": console.export_text()}


def test_with_time_left_nothing_is_cut(spec, frozen):
    doc = _plan(spec)
    assert "work_budget" not in doc and doc["fidelity"]["confirmation"]["met"] is True
    assert "reason" not in doc["fidelity"]["confirmation"] and doc["fidelity"]["rounds"] > 1


def test_a_budget_spent_before_the_confirmation_leaves_the_plan_not_confirmed(spec, frozen, monkeypatch):
    _spent_after(monkeypatch, verify, "trim", frozen)  # the trim ends, then the budget is gone
    doc = _plan(spec)
    c = doc["fidelity"]["confirmation"]
    assert c["met"] is False and c["models"] == [] and c["seeds"] == [] and c["reason"] == confirm.NOT_CONFIRMED
    assert doc["fidelity"]["met"] is False and doc["fidelity"]["replications"]["simulated"]["confirm"] == 0
    # the baselines are solved on a side thread once the rounds end: under load they can still be running when
    # the budget goes, and are stopped too (a flake of this test on a loaded host, not of the plan's verdict)
    stopped = doc["work_budget"]["stopped"]
    assert confirm.CONFIRMATION_CUT in stopped and set(stopped) <= {confirm.CONFIRMATION_CUT, BASELINES}
    assert any("not confirmed" in w for w in doc["warnings"])
    assert "not confirmed" in doc["summary"] and "work budget" in doc["summary"]  # the summary prints both
    assert not any("met on the seeds" in w or "misses" in w for w in doc["warnings"])  # it never ran: no verdict
    assert not any(m["met"] for m in c["models"]) and doc["fidelity"]["over_provisioning"]["ratio"] is None


def test_spent_after_the_first_round_the_rounds_stop_there_and_say_so(spec, frozen, monkeypatch):
    _spent_after(monkeypatch, rounds, "next_factors", frozen)
    doc = _plan(spec)
    assert doc["fidelity"]["rounds"] == 1 and doc["work_budget"]["stopped"][0] == rounds.ROUNDS_CUT
    assert confirm.CONFIRMATION_CUT in doc["work_budget"]["stopped"]  # nothing after it runs either
    assert doc["fidelity"]["met"] is False and any(rounds.ROUNDS_CUT in w for w in doc["warnings"])


def test_spent_as_the_trim_starts_the_plan_is_kept_and_minimality_is_not_claimed(spec, frozen, monkeypatch):
    _spent_after(monkeypatch, minimal, "removal_order", frozen)
    doc = _plan(spec)
    assert doc["fidelity"]["trim"]["checked_removals"] == 0 and doc["fidelity"]["trim"]["removed"] == []
    assert doc["work_budget"]["stopped"][0] == trim.TRIM_CUT and "may not be minimal" in trim.TRIM_CUT
    assert any("may not be minimal" in w for w in doc["warnings"])


def test_undecided_models_count_as_missed_when_the_budget_stops_their_replications(monkeypatch, frozen):
    whole, _ = _judge(monkeypatch)
    reference = {m["model"]: m for m in whole(VIEW)["models"]}
    judge, runs = _judge(monkeypatch)
    real = judge._run

    def run_then_spend(*args):
        out = real(*args)
        if len(runs) == 2:  # the screen and the first START replications: the rule wants more for some
            frozen()
        return out

    monkeypatch.setattr(judge, "_run", run_then_spend)
    with opened(Budget(10.0)) as budget:
        cut = {m["model"]: m for m in judge(VIEW)["models"]}
    assert len(runs) == 2 and budget.stopped == [replicated.REPLICATIONS_CUT]
    assert reference["edge"]["met"] and reference["edge"]["replications"] > replicated.START
    for name in ("edge", "straddle"):  # open after START: never met on fewer replications than the rule needs
        assert not cut[name]["met"] and cut[name]["decision"] == "undecided" and not cut[name]["objective"]["met"]
    assert cut["clear"] == reference["clear"] and cut["out"] == reference["out"]  # decided: as they were


def test_the_sustained_load_search_reports_its_lower_bound_when_stopped():
    doc = {"models": [{"name": "a", "rate_rps": 1.0}]}
    steps = []

    def meets(d):
        steps.append(d["models"][0]["rate_rps"])
        return {"a": True}  # meets everywhere: the whole grid's top without a stop

    assert minimal.sustained_load(doc, 1.0, meets) == {"a": 1.875}
    steps.clear()
    allowed = iter([True, False])
    assert minimal.sustained_load(doc, 1.0, meets, lambda: next(allowed)) == {"a": 1.125} and len(steps) == 1


def test_outside_a_plan_command_the_checks_never_stop_anything():
    assert current().check(rounds.ROUNDS_CUT) and current().stopped == []


def test_spent_when_a_confirmation_misses_the_rounds_do_not_resume(spec, frozen, monkeypatch):
    real = verify._search_and_confirm

    def confirmation_misses(out, *args):  # chat-0 misses on the confirm seeds; then the budget is gone
        real(out, *args)
        models = [{**m, "met": False} if m["model"] == "chat-0" else m for m in out.confirmation["models"]]
        out.confirmation = {**out.confirmation, "models": models, "met": False}
        frozen()

    monkeypatch.setattr(verify, "_search_and_confirm", confirmation_misses)
    doc = _plan(spec)
    # nor does the padding (hetinfra.plan.pad) add a replica: the miss stands, stated
    assert doc["work_budget"]["stopped"] == [verify.RESUME_CUT, pad.PAD_CUT]
    assert doc["fidelity"]["confirmation"]["vetoes"] == []
    assert doc["fidelity"]["confirmation"]["padded"] == [{"model": "chat-0", "missed_on": "confirmation", "replicas_added": 0, "replicas_by_unit": {}, "seeds": [],
                                                          "met": False, "reason": pad.BUDGET_SPENT}]
    assert doc["fidelity"]["met"] is False and any("chat-0" in w and "fresh seeds" in w for w in doc["warnings"])


def test_spent_before_a_vetoed_plan_is_padded_the_resumed_search_stands(frozen):
    """hetinfra.plan.alternative asks the budget before padding a vetoed plan: spent, it pads nothing (no
    judge is called), keeps the alternative it had, and work_budget.stopped names it."""
    from types import SimpleNamespace

    from hetinfra.plan import alternative

    out = SimpleNamespace(pr=SimpleNamespace(result=SimpleNamespace(periods=[])),  # no judge may read more of it
                          confirmation={"met": False, "models": []}, vetoes=[{}])
    alternatives = alternative.Alternatives()
    with opened(Budget(10.0)) as budget:
        frozen()
        alternatives.pad(out, None, None)
        assert budget.stopped == [alternative.ALTERNATIVE_CUT] and out.vetoes == [{}] and alternatives.best is None


def test_spent_before_the_alternatives_second_look_the_resumed_plan_stands(frozen):
    """The second look (hetinfra.plan.alternative.Alternatives.keep_cheaper) is a whole confirmation: with the
    budget spent it is not run, the resumed search's plan stays, and work_budget.stopped names the step."""
    from types import SimpleNamespace

    from hetinfra.plan import alternative

    def plan(cost: float):
        return SimpleNamespace(result=SimpleNamespace(cost=lambda _problem: cost, periods=[]), problem=None)

    out = SimpleNamespace(pr=plan(100.0), sim={"met": True}, confirmation={"met": True}, vetoes=[{}])
    alt = alternative.Alternative(1, plan(50.0), {"met": True}, {"met": True}, [], [], [], [], {}, 50.0,
                                  judge=None)  # a look would need a judge: it must not be taken
    with opened(Budget(10.0)) as budget:
        frozen()
        alternative.Alternatives(best=alt).keep_cheaper(out, SimpleNamespace(simulations=0))
        assert budget.stopped == [alternative.ALTERNATIVE_CUT] and out.pr is not alt.pr and out.vetoes == [{}]
