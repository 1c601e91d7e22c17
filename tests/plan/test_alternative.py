"""The vetoed plan, padded (hetinfra.plan.alternative): at each veto the plan the confirmation missed is
padded (each step judged on fresh confirm seeds), and verification ends on the cheaper of it and the
plan the resumed search confirms. The search and its judges are test_pad's stand-ins (they count
replicas); the plan is a real solve of its two-model spec."""

from __future__ import annotations

import pytest

from hetinfra.plan import pad, rounds, verify
from tests.plan.test_pad import _Judge, _replicas, planned  # noqa: F401  (the module's fixture)


def _chat_b(pr) -> list[str]:
    return sorted(u for u, n in pr.result.n.items() if pr.units[u].model == "chat-b" and n > 0)


def _verified_resuming_at(monkeypatch, pr, need: int, resumed):
    """verify() of ``pr``, whose confirmation meets chat-b at ``need`` replicas and whose search, sent
    back by a veto, resumes at the plan ``resumed`` (and keeps it): (the Verification, the confirm judge)."""
    from hetinfra.plan.ceiling import Ceilings

    ceilings = Ceilings(pr.inputs.spec, pr.inputs.spec_path)
    decide, confirm = _Judge({}, ceilings), _Judge({"chat-b": need}, ceilings)
    monkeypatch.setattr(verify, "simulators", lambda pr, progress=None: (decide, confirm))
    monkeypatch.setattr(rounds.Search, "veto", lambda self, judged, doc: True)

    def search_and_confirm(out, pr, *args):  # the rounds keep the plan they are given; the trim removes nothing
        view = verify.simulation_view(pr)
        out.pr, out.sim, out.confirmation = pr, decide(view), confirm(view)
        out.history.append({"cost_usd_per_hour": 0.0})

    monkeypatch.setattr(verify, "_search_and_confirm", search_and_confirm)
    monkeypatch.setattr(verify, "_sustained", lambda *args: {})
    return verify.verify(pr, lambda derate, counts: resumed), confirm


def _plus(pr, uid: str, k: int):
    for _ in range(k):
        pr = pad.with_replica(pr, uid)
    return pr


def _cost(pr) -> float:
    return pr.result.cost(pr.problem)


def test_the_vetoed_plan_padded_is_kept_where_the_resumed_search_ends_dearer(planned, monkeypatch):
    """h136's shape: one replica more would have met, and the resumed rounds ended three replicas up."""
    from hetinfra.plan.fidelity import record as recorded

    pr, doc = planned
    [uid] = _chat_b(pr)[:1]
    first = _replicas(verify.simulation_view(pr))["chat-b"]
    dearer = _plus(pr, uid, 3)
    v, confirm = _verified_resuming_at(monkeypatch, pr, first + 1, dearer)
    assert v.met and len(v.vetoes) == 1
    assert v.pr.result.n == _plus(pr, uid, 1).result.n  # the vetoed plan, one replica up; nothing else moved
    assert v.vetoes[0]["kept"] and v.vetoes[0]["padded_usd_per_hour"] == pytest.approx(_cost(v.pr), abs=1e-3)
    assert _cost(v.pr) < _cost(dearer)
    [record] = v.padded
    assert record["after_veto"] == 1 and record["met"] and record["replicas_by_unit"] == {uid: 1}
    # its confirmation is the padding's, on seeds neither the vetoed judgement nor the resumed one saw
    padded_seeds = set(next(m for m in v.confirmation["models"] if m["model"] == "chat-b")["seeds"])
    others = [set(j["chat-b"]) for j in confirm.seeds_by_model if "chat-b" in j][:-1]
    assert others and all(not padded_seeds & seeds for seeds in others[:1] + others[2:])
    written = recorded(doc, v, strict=False)
    assert written.fidelity.confirmation.vetoes[0].kept and written.fidelity.confirmation.padded[0].after_veto == 1
    assert any("the plan of veto 1 of 1" in w and "cost less than the plan the resumed search confirmed" in w
               for w in written.warnings)


def test_the_resumed_search_stays_where_the_padded_plan_costs_no_less(planned, monkeypatch):
    """The resumed search's confirmed plan costs what the padded one does: it stays, and no veto is kept."""
    pr, _doc = planned
    [uid] = _chat_b(pr)[:1]
    first = _replicas(verify.simulation_view(pr))["chat-b"]
    same = _plus(pr, uid, 1)
    v, _confirm = _verified_resuming_at(monkeypatch, pr, first + 1, same)
    assert v.met and v.pr is same and not v.padded
    assert v.vetoes[0]["padded_usd_per_hour"] == pytest.approx(_cost(same), abs=1e-3)
    assert not v.vetoes[0].get("kept")


def test_a_vetoed_plan_no_cheaper_than_the_padded_one_is_not_padded_again(planned, monkeypatch):
    """Padding only adds replicas: a later vetoed plan that costs at least the alternative is left as it is
    (no confirm seeds spent on it), and the alternative outlives a final padding that costs more."""
    pr, _doc = planned
    [uid] = _chat_b(pr)[:1]
    other = sorted(u for u, n in pr.result.n.items() if pr.units[u].model == "chat-8b" and n > 0)[0]
    first = _replicas(verify.simulation_view(pr))["chat-b"]
    # the resumed search buys chat-8b two replicas, and chat-b still misses: vetoed again, then padded
    resumed = _plus(pr, other, 2)
    assert _cost(resumed) >= _cost(_plus(pr, uid, 1))
    v, confirm = _verified_resuming_at(monkeypatch, pr, first + 1, resumed)
    assert len(v.vetoes) == verify.VETOES and v.met
    assert v.vetoes[0]["padded_usd_per_hour"] and "padded_usd_per_hour" not in v.vetoes[1]
    # the first confirmation, its plan padded (1 step), the second and third confirmations, the final padding
    assert [models for _, models in confirm.judged] == [["chat-8b", "chat-b"], ["chat-b"], ["chat-8b", "chat-b"],
                                                        ["chat-8b", "chat-b"], ["chat-b"]]
    assert v.pr.result.n == _plus(pr, uid, 1).result.n and v.vetoes[0]["kept"]
