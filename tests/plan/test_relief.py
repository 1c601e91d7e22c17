"""Relief (hetinfra.plan.relief): where a model's units can take no replica within the spec's rules, the
padding moves a share of the unit's load to one replica more of a sibling unit, within that replica's
headroom and every rule; the padding removes it again, flows and all, where it bought no promise."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.plan import pad, relief, verify
from hetinfra.plan.trim import breaks_rules
from hetinfra.solver.recheck import verify as recheck
from tests.plan.conftest import REPO
from tests.plan.test_pad import _Judge


@pytest.fixture(scope="module")
def chat():
    """services/chat.yaml's unverified plan: chat-8b on one unit (4 replicas), 11 sibling units unused."""
    from hetinfra.plan.pipeline import plan_document

    pr, _doc = plan_document(REPO / "services" / "chat.yaml", with_baselines=False, verify=False)
    return pr


def _served(pr) -> dict[str, float]:
    out: dict[str, float] = {}
    for (_u, _m, w), v in pr.result.flow.items():
        out[w] = out.get(w, 0.0) + v
    return out


def _on(pr, uid: str) -> float:
    return sum(v for k, v in pr.result.flow.items() if k[0] == uid)


def _used(pr) -> str:
    [uid] = [u for u, c in pr.result.n.items() if c]
    return uid


def test_relief_moves_one_replicas_share_to_a_sibling_within_its_headroom_and_the_rules(chat):
    uid = _used(chat)
    out, target, moved = relief.relieved(chat, uid)
    assert target != uid and out.result.n[target] == 1 and out.result.n[uid] == chat.result.n[uid]
    before = sum(v for k, v in chat.result.flow.items() if k[0] == uid)
    assert 0 < moved <= before / (chat.result.n[uid] + 1) + 1e-9
    assert sum(v for k, v in out.result.flow.items() if k[0] == uid) == pytest.approx(before - moved)
    assert _served(out) == pytest.approx(_served(chat))  # every class served in full, as before
    assert recheck(out.problem, out.result) == [] and breaks_rules(out) == []  # the target within its headroom
    assert chat.result.n == {uid: chat.result.n[uid]}  # the plan it was given is unchanged


def test_relief_takes_the_sibling_whose_replica_costs_least_per_req_s_it_takes_over(chat):
    """Not the cheapest per req/s at full use: one replica takes at most the share, so a large instance
    cheap when full moved 2.4 req/s of this unit at $21.96/h where one at $3.67/h moved as much."""
    uid = _used(chat)
    out, target, moved = relief.relieved(chat, uid)
    mix = {k[2]: v for k, v in chat.result.flow.items() if k[0] == uid and v > 0}
    share = 1.0 / (chat.result.n[uid] + 1)
    units = {u.id: u for u in chat.problem.units}
    prices = {u.id: u.cost / (part * sum(mix.values())) for u in relief._siblings(chat.problem.units, uid, "chat-8b", mix)
              if (part := relief._part(chat, u, mix, share)) > 1e-12
              and not breaks_rules(relief._moved(chat, uid, u, mix, part))}
    assert units[target].cost / moved == pytest.approx(min(prices.values()))
    # the first choice's GPU group capped at 0: the next sibling that the caps leave takes it
    capped = replace(chat, problem=replace(chat.problem, caps={g: 0 for g, _n in units[target].gpu_use}))
    if any(g in dict(units[uid].gpu_use) for g in capped.problem.caps):
        pytest.skip("the sibling shares the relieved unit's GPU group")
    out2, second, _ = relief.relieved(capped, uid)
    assert second != target and not set(dict(units[second].gpu_use)) & set(capped.problem.caps)
    assert breaks_rules(out2) == []


def test_no_relief_where_every_sibling_breaks_a_rule_or_the_model_is_routed_per_origin(chat, monkeypatch):
    uid = _used(chat)
    monkeypatch.setattr(relief, "breaks_rules", lambda candidate: ["a cap"])
    assert relief.relieved(chat, uid) is None
    monkeypatch.undo()
    per_origin = replace(chat, result=replace(chat.result, origin_flow={(uid, "chat-8b", "chat", "r"): 1.0}))
    assert relief.relieved(per_origin, uid) is None
    sliced = replace(chat, problem=replace(chat.problem, routing="sliced"))  # each slice to one unit whole
    assert relief.relieved(sliced, uid) is None


def test_a_unit_at_a_cap_is_relieved_again_at_the_next_step_not_passed_over(chat, monkeypatch):
    """Step 2 of a model whose unit sits at a cap relieves that unit again (its flows move on); before,
    step 2 gave the sibling of step 1 a replica with the flows unchanged, and the unit kept its load."""
    from hetinfra.plan.ceiling import Ceilings
    from hetinfra.plan.trim import breaks_rules as real

    uid = _used(chat)
    n0 = chat.result.n[uid]
    monkeypatch.setattr(pad, "breaks_rules", lambda c: ["a cap"] if c.result.n.get(uid, 0) > n0 else real(c))
    judge = _Judge({"chat-8b": n0 + 2}, Ceilings(chat.inputs.spec, chat.inputs.spec_path))
    out, conf, [record] = pad.padded(chat, judge(verify.simulation_view(chat)), judge)
    assert conf["met"] and record["replicas_added"] == 2 and out.result.n[uid] == n0
    first = _on(chat, uid) / (n0 + 1)  # what the first relief moves: one replica's share
    assert _on(out, uid) < _on(chat, uid) - first - 1e-6  # the second moved more off it
    assert record["relieved"][uid] == pytest.approx(_on(chat, uid) - _on(out, uid))


def test_a_trim_that_takes_from_a_padded_unit_drops_the_relief_figure():
    record = {"model": "m", "replicas_added": 2, "replicas_by_unit": {"b": 1, "t": 1}, "relieved": {"a": 2.4}}
    kept = pad.net_of_trim([record], {"a": 4, "b": 2, "t": 1}, {"a": 4, "b": 2, "t": 1})
    assert kept[0]["relieved"] == {"a": 2.4}  # nothing trimmed from it: it stands
    [after] = pad.net_of_trim([record], {"a": 4, "b": 2, "t": 1}, {"a": 4, "b": 2})  # the trim took t
    assert after["replicas_by_unit"] == {"b": 1} and "relieved" not in after


@pytest.mark.parametrize("need, met", [(5, True), (50, False)])
def test_the_padding_relieves_a_capped_unit_and_removes_the_relief_where_it_bought_nothing(chat, monkeypatch,
                                                                                              need, met):
    from hetinfra.plan.ceiling import Ceilings

    monkeypatch.setattr(pad, "breaks_rules", lambda candidate: ["a cap"])  # no unit takes one more replica
    judge = _Judge({"chat-8b": need}, Ceilings(chat.inputs.spec, chat.inputs.spec_path))
    conf = judge(verify.simulation_view(chat))
    out, conf2, [record] = pad.padded(chat, conf, judge)
    assert conf2["met"] is met and record["met"] is met
    if met:
        uid = _used(chat)
        [target] = record["replicas_by_unit"]
        assert record["replicas_added"] == 1 and out.result.n[target] == 1 and set(record["relieved"]) == {uid}
        assert record["relieved"][uid] == pytest.approx(_on(chat, uid) - _on(out, uid))
    else:  # every step relieved, none met: the plan goes back whole, flows included
        assert out.result.n == chat.result.n and out.result.flow == chat.result.flow
        assert "relieved" not in record and record["replicas_added"] == 0 and "removed again" in record["reason"]


@settings(max_examples=60, deadline=None)
@given(scale=st.floats(0.01, 50.0), count=st.integers(1, 12), busy=st.floats(0.0, 1.2))
def test_a_reliefs_target_never_passes_its_headroom_and_no_request_is_lost(chat, scale, count, busy):
    """Whatever the relieved unit's load and replicas, and however busy its sibling already is: the
    classes are served in full, the relieved unit hands on at most 1 / (n + 1) of its load, and the
    sibling's load stays within (1 - headroom) of its replicas (or nothing moves)."""
    uid = _used(chat)
    mix = {k[2]: v * scale for k, v in chat.result.flow.items() if k[0] == uid and v > 0}
    sibling = relief._siblings(chat.problem.units, uid, "chat-8b", mix)[0]
    # the sibling already carries ``busy`` of one replica, in the same mix
    per_replica = busy / sum(v / sibling.rates[w] for w, v in mix.items())
    flow = {**{(uid, "chat-8b", w): v for w, v in mix.items()},
            **{(sibling.id, "chat-8b", w): v * per_replica for w, v in mix.items()}}
    pr = replace(chat, result=replace(chat.result, n={uid: count, sibling.id: 1}, flow=flow))
    part = relief._part(pr, sibling, mix, 1.0 / (count + 1))
    if part <= 1e-12:  # no room: nothing moves
        assert busy >= 2 * (1 - chat.problem.headroom) - 1e-9
        return
    out, rps_moved = relief._moved(pr, uid, sibling, mix, part), part * sum(mix.values())
    assert rps_moved <= sum(mix.values()) / (count + 1) * (1 + 1e-9)
    assert sum(out.result.flow.values()) == pytest.approx(sum(flow.values()))
    load = sum(v / sibling.rates[k[2]] for k, v in out.result.flow.items() if k[0] == sibling.id)
    assert load <= (1 - chat.problem.headroom) * 2 + 1e-9
