"""The padding (hetinfra.plan.pad) through verification (hetinfra.plan.verify.verify): a model the
confirmation still misses after the search's last veto gets replicas, one at a time, each padded
plan judged on confirm seeds no judgement saw, until it meets; no other model's allocation changes
and nothing is removed. The search and its judges are stand-ins that count replicas (the planner's
rounds and simulator are tested elsewhere); the plan is a real solve of a two-model spec."""

from __future__ import annotations

import shutil
from dataclasses import replace
from types import SimpleNamespace

import pytest
import yaml

from hetinfra.plan import pad, relief, rounds, verify
from hetinfra.plan.alternative import ALTERNATIVE_BLOCKS
from tests.plan.conftest import REPO


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """(plan result, its unverified document) of custom-gpu with a second model beside chat-8b (its
    profile rows copied)."""
    from hetinfra.plan.pipeline import plan_document

    folder = tmp_path_factory.mktemp("pad")
    src = REPO / "services" / "custom-gpu"
    for f in ("offers.csv", "profiles.csv"):
        shutil.copy(src / f, folder / f)
    spec = yaml.safe_load((src / "service.yaml").read_text())
    spec["models"].append({**spec["models"][0], "name": "chat-b", "demand": {**spec["models"][0]["demand"],
                                                                            "rate_rps": 3}})
    rows = (folder / "profiles.csv").read_text().splitlines()
    rows += [r.replace("chat-8b,", "chat-b,", 1) for r in rows[1:] if r.startswith("chat-8b,")]
    (folder / "profiles.csv").write_text("\n".join(rows) + "\n")
    path = folder / "service.yaml"
    path.write_text(yaml.safe_dump(spec))
    return plan_document(path, with_baselines=False, verify=False)


def _replicas(view: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in view["allocations"]:
        out[a["model"]] = out.get(a["model"], 0) + int(a["count"])
    return out


class _Judge:
    """Meets a model while its plan keeps at least ``need[model]`` replicas (any other: 1), on the
    seeds of its block (:meth:`fresh` moves every model, or the models named, to their next, as
    Replicated.fresh does); every judgement is noted as (its seeds, models)."""

    def __init__(self, need: dict[str, int], ceilings):
        self.need, self.ceilings, self.block, self.blocks = need, ceilings, 0, {}
        # every judgement, its copies' too (hetinfra.plan.alternative judges on copies of the judges)
        self.log = SimpleNamespace(judged=[], seeds_by_model=[])
        self.progress, self.last_pass, self.simulations, self.vetoes, self.pressure = None, [], 0, [], set()
        self.config = SimpleNamespace(load=1.2, requests=1000)
        self.longest = 1000

    @property
    def judged(self) -> list[tuple[list[int], list[str]]]:
        """Each judgement's (seeds, models), in order."""
        return self.log.judged

    @property
    def seeds_by_model(self) -> list[dict[str, list[int]]]:
        """Each judgement's seeds of each model."""
        return self.log.seeds_by_model

    @property
    def seeds(self) -> list[int]:
        return [100 * self.block + k for k in range(2)]

    def under_pressure(self, view: dict, model: str) -> bool:
        return False

    def refreshes(self, view: dict, verdict: dict) -> bool:  # Replicated.refreshes under Poisson arrivals
        return not verdict["met"] or self.under_pressure(view, verdict["model"])

    def seeds_of(self, model: str) -> list[int]:
        return [100 * self.blocks.get(model, self.block) + k for k in range(2)]

    def fresh(self, models=None) -> None:
        if models is None:
            self.block, self.blocks = max([self.block, *self.blocks.values()]) + 1, {}
        for m in models or ():
            self.blocks[m] = self.blocks.get(m, self.block) + 1

    def first_replication(self, view: dict) -> dict:
        return {"models": [], "units": []}

    def lengthen(self, requests) -> None:
        pass

    def length(self, model: str) -> int:
        return 1000

    def veto(self, view: dict, models) -> None:
        self.vetoes.append(sorted(models))

    def __call__(self, view: dict) -> dict:
        have = _replicas(view)
        seeds = sorted({s for m in have for s in self.seeds_of(m)})
        self.judged.append((seeds, sorted(have)))
        self.seeds_by_model.append({m: self.seeds_of(m) for m in have})
        self.simulations += 1
        models = [{"model": m, "met": have[m] >= self.need.get(m, 1), "seeds": self.seeds_of(m), "replications": 2,
                   "slo": {"ttft_ms": 2000, "tpot_ms": 100, "percentile": "p99"}, "count": 1000,
                   "ttft_ms": {"p99": 1.0}, "tpot_ms": {"p99": 1.0}, "objective": {}} for m in sorted(have)]
        units = [{"unit": a["unit"], "model": a["model"], "objective": {"ratio": 1.0}} for a in view["allocations"]]
        return {"met": all(m["met"] for m in models), "seeds": seeds, "models": models, "units": units}


def _verified(monkeypatch, pr, need: dict[str, int], search_needs: dict[str, int] | None = None, judge=None):
    """verify() of ``pr`` whose search keeps ``pr`` every round and whose confirmation meets a model
    only at ``need`` replicas (the search's judge at ``search_needs``): (the Verification, the
    confirm judge)."""
    from hetinfra.plan.ceiling import Ceilings

    ceilings = Ceilings(pr.inputs.spec, pr.inputs.spec_path)
    decide, confirm = _Judge(search_needs or {}, ceilings), (judge or _Judge)(need, ceilings)
    monkeypatch.setattr(verify, "simulators", lambda pr, progress=None: (decide, confirm))
    monkeypatch.setattr(rounds.Search, "veto", lambda self, judged, doc: True)

    def search_and_confirm(out, pr, *args):  # the rounds keep pr; the trim removes nothing
        view = verify.simulation_view(pr)
        out.pr, out.sim, out.confirmation = pr, decide(view), confirm(view)
        out.history.append({"cost_usd_per_hour": out.sim.get("cost_usd_per_hour", 0.0)})

    monkeypatch.setattr(verify, "_search_and_confirm", search_and_confirm)
    monkeypatch.setattr(verify, "_sustained", lambda *args: {})
    return verify.verify(pr, lambda derate, counts: pr), confirm


def test_a_model_missed_after_the_last_veto_is_padded_and_confirmed_on_fresh_seeds(planned, monkeypatch):
    pr, _doc = planned
    before = dict(pr.result.n)
    mine = {u for u in before if pr.units[u].model == "chat-b"}
    first = sum(before[u] for u in mine)
    v, confirm = _verified(monkeypatch, pr, {"chat-b": first + 2})  # two replicas more are needed
    assert len(v.vetoes) == verify.VETOES and v.met and v.confirmation["met"] and v.sim["met"]
    [record] = v.padded
    assert record["model"] == "chat-b" and record["replicas_added"] == 2 and record["met"] and "reason" not in record
    after = v.pr.result.n
    assert sum(after[u] for u in mine) == first + 2 and sum(record["replicas_by_unit"].values()) == 2
    assert {u: n for u, n in after.items() if u not in mine} == {u: n for u, n in before.items() if u not in mine}
    assert all(after[u] >= before[u] for u in before)  # nothing removed
    # each padded plan was judged on chat-b alone: after each veto the vetoed plan's padding (hetinfra.plan.
    # alternative), after the last the final plan's; every judgement of chat-b on seeds no other one saw
    # (the alternative judges the padded vetoed plan again, whole, on blocks of its own: not the verification's)
    whole = [k for k, (seeds, models) in enumerate(confirm.judged)
             if models == ["chat-8b", "chat-b"] and max(seeds) < 100 * ALTERNATIVE_BLOCKS]
    assert len(whole) == verify.VETOES + 1
    padding = confirm.judged[whole[-1] + 1:]
    assert [models for _, models in padding] == [["chat-b"], ["chat-b"]]
    of_b = [tuple(j["chat-b"]) for j in confirm.seeds_by_model if "chat-b" in j]
    assert len({s for seeds in of_b for s in seeds}) == 2 * len(of_b)
    assert record["seeds"] == padding[-1][0] and set(record["seeds"]) <= set(v.confirmation["seeds"])
    # the first vetoed plan padded costs what the final one does: the final stays (no veto kept); the second,
    # padded, cost no less than the first, so it was not judged a second time nor recorded
    assert v.vetoes[0].get("padded_usd_per_hour") and "padded_usd_per_hour" not in v.vetoes[1]
    assert not any(veto.get("kept") for veto in v.vetoes)
    assert "after_veto" not in record
    # the model that met, far from its KV limit, kept its seeds through both vetoes (its verdict is the memo's)
    own = [j["chat-8b"] for j in confirm.seeds_by_model if "chat-8b" in j and j["chat-8b"][0] < 100 * ALTERNATIVE_BLOCKS]
    assert own == [[0, 1]] * (verify.VETOES + 1)


class _VetoingJudge(_Judge):
    """A search judge that, as Replicated does, misses every model plan a confirmation vetoed (marked
    ``vetoed``) whatever its own seeds say."""

    def veto(self, view: dict, models) -> None:
        super().veto(view, models)
        self.vetoed = getattr(self, "vetoed", set()) | {(m, _replicas(view)[m]) for m in models}

    def __call__(self, view: dict) -> dict:
        out = super().__call__(view)
        gone = getattr(self, "vetoed", set())
        models = [{**m, "met": False, "vetoed": True} if (m["model"], _replicas(view)[m["model"]]) in gone else m
                  for m in out["models"]]
        return {**out, "models": models, "met": all(m["met"] for m in models)}


def test_a_plan_the_search_met_and_the_confirmation_vetoed_sends_the_search_back_before_any_padding(
        planned, monkeypatch):
    """The search's judgement of a plan the confirmation vetoed misses (Replicated.veto), but not on the
    search's seeds: the rounds did not run out, so the search is sent back (the vetoes spent) and only
    then padded, as missed on the confirmation. Read as a miss of the search, azgcp's kept round was
    padded at once, recorded ``missed_on: search``, and the summary said its rounds had run out. The
    stand-in rounds keep the plan; its confirmation vetoes and the search judges it again, as
    hetinfra.plan.confirm.confirmed does."""
    from hetinfra.plan.ceiling import Ceilings

    pr, _doc = planned
    first = sum(n for u, n in pr.result.n.items() if pr.units[u].model == "chat-b")
    ceilings = Ceilings(pr.inputs.spec, pr.inputs.spec_path)
    decide, confirm = _VetoingJudge({}, ceilings), _Judge({"chat-b": first + 1}, ceilings)
    monkeypatch.setattr(verify, "simulators", lambda pr, progress=None: (decide, confirm))
    monkeypatch.setattr(rounds.Search, "veto", lambda self, judged, doc: True)

    def search_and_confirm(out, pr, *args):
        view = verify.simulation_view(pr)
        out.pr, out.sim, out.confirmation = pr, decide(view), confirm(view)
        if not out.confirmation["met"]:
            decide.veto(view, [m["model"] for m in out.confirmation["models"] if not m["met"]])
            out.sim = decide(view)
        out.history.append({"cost_usd_per_hour": 0.0})

    monkeypatch.setattr(verify, "_search_and_confirm", search_and_confirm)
    monkeypatch.setattr(verify, "_sustained", lambda *args: {})
    v = verify.verify(pr, lambda derate, counts: pr)
    assert len(v.vetoes) == verify.VETOES and v.met
    [record] = v.padded
    assert record["missed_on"] == "confirmation" and record["replicas_added"] == 1


class _CliffJudge(_Judge):
    """A confirmation whose misses are the cliff probe's (hetinfra.plan.cliff): met at the promised load,
    collapsed at 5% more while a model has fewer than ``need`` replicas."""

    def __call__(self, view: dict) -> dict:
        judged = super().__call__(view)
        for m in judged["models"]:
            if not m["met"]:
                m["cliff"] = {"load": 1.26, "seeds": m["seeds"], "run_ratios": [2.0, 2.0], "collapsed": True}
        return judged


def test_a_confirmation_missed_only_at_the_cliff_pads_at_once_and_says_why(planned, monkeypatch):
    """No veto (it would derate every regime of the model: benchmarks/specs/two-models.yaml's summary-7b
    went from 2 x L40S to one H100 at $14.32/h, where a third L40S is $13.03/h): the padding adds the
    replica, recorded as missed_on 'cliff', and the warning says what the probe saw."""
    from hetinfra.plan.fidelity import _warnings

    pr, _doc = planned
    first = sum(n for u, n in pr.result.n.items() if pr.units[u].model == "chat-b")
    v, confirm = _verified(monkeypatch, pr, {"chat-b": first + 1}, judge=_CliffJudge)
    assert v.vetoes == [] and v.met
    [record] = v.padded
    assert record["missed_on"] == "cliff" and record["replicas_added"] == 1 and record["met"]
    fidelity = SimpleNamespace(load=1.2, rounds=1)
    [warning] = [w for w in _warnings(fidelity, v, strict=False) if "replica(s) added" in w]
    assert "collapsed at 5% more load" in warning


def test_after_a_veto_a_model_under_kv_pressure_is_judged_on_fresh_seeds_too(planned, monkeypatch):
    pr, _doc = planned
    first = sum(n for u, n in pr.result.n.items() if pr.units[u].model == "chat-b")
    monkeypatch.setattr(_Judge, "under_pressure", lambda self, view, model: model == "chat-8b")
    v, confirm = _verified(monkeypatch, pr, {"chat-b": first + 2})
    assert len(v.vetoes) == verify.VETOES and v.met
    seeds = [j["chat-8b"] for j in confirm.seeds_by_model
             if "chat-8b" in j and j["chat-8b"][0] < 100 * ALTERNATIVE_BLOCKS]  # the verification's own blocks
    assert seeds == [[100 * k, 100 * k + 1] for k in range(verify.VETOES + 1)]  # a new block at each veto


def test_the_padding_stops_after_its_steps_and_the_plan_says_it_misses(planned, monkeypatch):
    from hetinfra.plan.fidelity import record as recorded
    from hetinfra.plan.summary_promise import promise_lines

    pr, doc = planned
    v, confirm = _verified(monkeypatch, pr, {"chat-b": 10_000})
    [record] = v.padded
    # the replicas tried bought no promise: they are removed again, and the record says so
    assert record["replicas_added"] == 0 and not record["met"] and record["replicas_by_unit"] == {}
    assert record["reason"] == f"{pad.STEPS_SPENT}; the {pad.PAD_STEPS} replica(s) tried were removed again"
    assert v.pr.result.n == pr.result.n and v.pr.result.periods == pr.result.periods
    # each vetoed plan's padding (hetinfra.plan.alternative) and the final plan's tried every step
    assert len(confirm.judged) == (verify.VETOES + 1) * (1 + pad.PAD_STEPS)
    assert not any(veto.get("padded_usd_per_hour") for veto in v.vetoes)
    last = max(k for k, (_, models) in enumerate(confirm.judged) if models == ["chat-8b", "chat-b"])
    first = confirm.seeds_by_model[last]["chat-b"]  # the judgement before the padding stands for chat-b
    assert next(m for m in v.confirmation["models"] if m["model"] == "chat-b")["seeds"] == first
    assert not v.met
    written = recorded(doc, v, strict=False)
    assert written.fidelity.confirmation.padded[0].reason == record["reason"]
    assert any("misses the latency objective of chat-b" in w for w in written.warnings)
    assert not any("added to chat-b" in line for line in promise_lines(written))


def test_the_unit_that_missed_the_most_is_padded_first_then_the_busiest_per_replica():
    """pad._order: by the last judgement's worst ratio, then req/s per replica, then id; the other
    model's units never."""
    units = {"a1": SimpleNamespace(model="a"), "a2": SimpleNamespace(model="a"), "a3": SimpleNamespace(model="a"),
             "b1": SimpleNamespace(model="b")}
    result = SimpleNamespace(n={"a1": 1, "a2": 2, "a3": 1, "b1": 1},
                             flow={("a1", "a", "k"): 1.0, ("a2", "a", "k"): 8.0, ("a3", "a", "k"): 3.0,
                                   ("b1", "b", "k"): 99.0})
    pr = SimpleNamespace(units=units, result=result)
    conf = {"units": [{"unit": "a1", "model": "a", "objective": {"ratio": 1.3}},
                      {"unit": "a2", "model": "a", "objective": {"ratio": 0.9}},
                      {"unit": "a3", "model": "a", "objective": {"ratio": 0.9}},
                      {"unit": "b1", "model": "b", "objective": {"ratio": 2.0}}]}
    assert pad._order(pr, pad.unit_ratios(conf), "a") == ["a1", "a2", "a3"]  # a2: 4 req/s per replica, a3: 3
    assert pad._order(pr, {}, "a") == ["a2", "a3", "a1"]


def test_the_unit_holding_the_models_misses_is_padded_before_a_small_one_with_a_worse_percentile():
    """A model's percentile pools its units' requests, so the padding relieves the unit whose requests
    are outside the bounds (``missed_requests`` per replication: azgcp's 2 x A100-80GB unit with 1.5%
    of a 70B model's requests and the worst p99 got the replica, and the H100 unit holding the misses
    kept missing), and an unstable unit before either (its queue fails the model on its own). The
    judged entries come from hetinfra.sim.replications.judge, which counts the misses."""
    from hetinfra.sim.replications import judge

    units = {"small": SimpleNamespace(model="a"), "big": SimpleNamespace(model="a"), "slow": SimpleNamespace(model="a")}
    result = SimpleNamespace(n={"small": 1, "big": 2, "slow": 1},
                             flow={("small", "a", "k"): 0.2, ("big", "a", "k"): 9.0, ("slow", "a", "k"): 3.0})
    pr = SimpleNamespace(units=units, result=result)
    obj = {"met": False, "ratio": 1.0, "ratios": {}}

    def run(seed: int, small_att: float, big_att: float) -> dict:
        def unit(name: str, count: int, ratio: float, att: float) -> dict:
            return {"unit": name, "model": "a", "count": count, "ttft_ms": {"p99": ratio * 100}, "tpot_ms": {"p99": 1.0},
                    "objective": {"met": ratio <= 1, "ratio": ratio, "attainment": att}, "stability": None}
        return {"seed": seed, "models": [{"model": "a", "count": 10000, "ttft_ms": {"p99": 101.0}, "tpot_ms": {"p99": 1.0},
                                          "objective": obj, "slo": {"ttft_ms": 100, "tpot_ms": 50, "percentile": "p99"}}],
                "units": [unit("small", 150, 1.4, small_att), unit("big", 7500, 1.02, big_att),
                          unit("slow", 2350, 0.8, 1.0)]}

    judged = judge([run(1, 0.9, 0.986), run(2, 0.92, 0.99)])
    missed = {u["unit"]: u["missed_requests"] for u in judged["units"]}
    assert missed == {"small": 15 + 12, "big": 105 + 75, "slow": 0}
    assert pad._order(pr, pad.unit_ratios(judged), "a") == ["big", "small", "slow"]
    unstable = {**judged, "units": [{**u, "stable": u["unit"] != "slow"} for u in judged["units"]]}
    assert pad._order(pr, pad.unit_ratios(unstable), "a")[0] == "slow"


def test_a_padded_replica_keeps_the_flows_and_runs_in_the_levels_at_the_units_peak(planned):
    pr, _doc = planned
    uid = next(u for u in pr.result.n if pr.units[u].model == "chat-b")
    peak = pr.result.n[uid]
    levels = [{"level": 0, "counts": {uid: peak}}, {"level": 1, "counts": {uid: peak - 1}} if peak > 1 else
              {"level": 1, "counts": {}}]
    profiled = replace(pr, result=replace(pr.result, periods=levels))
    out = pad.with_replica(profiled, uid)
    assert out.result.n[uid] == peak + 1 and out.result.flow == pr.result.flow
    assert [lv["counts"] for lv in out.result.periods] == [{uid: peak + 1}, levels[1]["counts"]]
    assert pr.result.n[uid] == peak  # the plan it was given is unchanged


def test_where_no_unit_can_take_a_replica_within_the_rules_nothing_is_added_and_it_says_why(planned, monkeypatch):
    from hetinfra.plan.ceiling import Ceilings

    pr, _doc = planned
    monkeypatch.setattr(pad, "breaks_rules", lambda candidate: ["a rule broken"])  # e.g. a cap the spec sets
    monkeypatch.setattr(relief, "breaks_rules", lambda candidate: ["a rule broken"])  # on every sibling too
    judge = _Judge({"chat-b": 10}, Ceilings(pr.inputs.spec, pr.inputs.spec_path))
    conf = judge(verify.simulation_view(pr))
    out, conf2, [record] = pad.padded(pr, conf, judge)
    assert out.result.n == pr.result.n and record["reason"] == pad.NO_UNIT and record["replicas_added"] == 0
    assert not conf2["met"] and len(judge.judged) == 1  # no judgement of a plan that did not change


def test_a_model_the_search_still_misses_when_its_rounds_run_out_is_padded_until_both_judges_meet(planned,
                                                                                                   monkeypatch):
    pr, _doc = planned
    mine = {u for u in pr.result.n if pr.units[u].model == "chat-b"}
    first = sum(pr.result.n[u] for u in mine)
    # the search's seeds need two replicas more, the fresh confirm seeds one: padding stops at two
    v, confirm = _verified(monkeypatch, pr, {"chat-b": first + 1}, search_needs={"chat-b": first + 2})
    assert not v.vetoes and v.met and v.sim["met"] and v.confirmation["met"]
    [record] = v.padded
    assert record["missed_on"] == "search" and record["replicas_added"] == 2 and record["met"]
    assert sum(v.pr.result.n[u] for u in mine) == first + 2


@pytest.mark.parametrize("fresh_met", [True, False])
def test_a_padded_plan_whose_rounds_ran_out_is_trimmed_and_kept_only_if_fresh_seeds_hold(monkeypatch, fresh_met):
    """verify._trim_padded: the round closest to meeting, padded, carries replicas no model needs; the
    trim (both judges) takes them and the trimmed plan must meet on FRESH confirm seeds, else the
    padded plan stays as it was confirmed."""
    padded_pr = SimpleNamespace(problem=SimpleNamespace(objective="min_cost"), name="padded")
    trimmed_pr = SimpleNamespace(problem=padded_pr.problem, name="trimmed")
    removal = {"unit": "u", "model": "m", "cost_usd_per_hour": 1.0}
    calls = []
    monkeypatch.setattr(verify, "trim", lambda pr, decide, confirm: (trimmed_pr, {"met": True}, [(removal, pr)]))
    monkeypatch.setattr(verify, "simulation_view", lambda pr: {"of": pr.name})
    monkeypatch.setattr("hetinfra.plan.confirm.budgeted_confirmation",
                        lambda confirm, view: calls.append((confirm.block, view)) or {"met": fresh_met, "seeds": [9]})
    confirm = SimpleNamespace(block=0)
    confirm.fresh = lambda: setattr(confirm, "block", confirm.block + 1)
    padded_pr.result, trimmed_pr.result = SimpleNamespace(n={"u": 3, "w": 2}), SimpleNamespace(n={"u": 2, "w": 2})
    records = [{"model": "m", "replicas_added": 2, "replicas_by_unit": {"u": 1, "w": 1}, "met": True}]
    out = SimpleNamespace(pr=padded_pr, sim={"met": True}, confirmation={"met": True, "seeds": [1]}, trimmed=[],
                          padded=records)
    verify._trim_padded(out, object(), confirm)
    assert calls == [(1, {"of": "trimmed"})]  # judged once, on the next block of confirm seeds
    if fresh_met:
        assert out.pr is trimmed_pr and out.trimmed == [removal] and out.confirmation["seeds"] == [9]
        # the trim took a replica of u, where the padding had added one: the record no longer claims it
        assert out.padded == [{**records[0], "replicas_added": 1, "replicas_by_unit": {"w": 1}}]
    else:
        assert out.pr is padded_pr and out.trimmed == [] and out.confirmation["seeds"] == [1]
        assert out.padded == records
    out.confirmation = {"met": False}  # a padded plan that is not confirmed is not trimmed
    verify._trim_padded(out, object(), confirm)
    assert len(calls) == 1
