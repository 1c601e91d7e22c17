"""hetinfra.plan.pipeline: the baselines solve in a thread beside the trim's simulations, from the
rounds' plan (with --no-verify, beside the plan's solve, or after it where the solves go through
Pyomo); they must be those of the final plan, as solving them after it gives."""

from __future__ import annotations

import pytest
import yaml

from tests.plan.test_blocks import _fleet


def test_baselines_solved_beside_the_trim_are_the_final_plans(tmp_path):
    from hetinfra.plan.pipeline import assemble, plan_document
    from hetinfra.solver.memo import clear

    pr, plan = plan_document(_fleet(tmp_path), template_cache=False)
    doc = plan.to_dict()
    assert doc["fidelity"]["verified"] and doc["baselines"]
    clear()  # solved again from scratch, after the trim, in this thread
    again = assemble(pr, True).to_dict()
    assert again["baselines"] == doc["baselines"]
    assert again["cost_usd_per_hour"] == doc["cost_usd_per_hour"]


def test_unverified_baselines_solved_beside_the_plan_are_the_plans(tmp_path, monkeypatch):
    """--no-verify: the baselines solve on a side thread while the plan solves (they price the pool at
    the starting factors); they must be what solving them after the plan, in this thread, gives."""
    import threading

    import hetinfra.plan.planner as planner
    from hetinfra.plan.pipeline import assemble, plan_document
    from hetinfra.solver.memo import clear

    threads = []
    real = planner.baselines
    monkeypatch.setattr(planner, "baselines", lambda *a, **kw: threads.append(threading.current_thread().name)
                        or real(*a, **kw))
    pr, plan = plan_document(_fleet(tmp_path), verify=False, template_cache=False)
    doc = plan.to_dict()
    assert doc["baselines"] and threads and threads[0].startswith("hetinfra-baselines")
    clear()
    again = assemble(pr, True).to_dict()
    assert again["baselines"] == doc["baselines"]
    assert again["cost_usd_per_hour"] == doc["cost_usd_per_hour"]


def test_the_baselines_prune_apart_from_the_plan_and_again_only_what_changed():
    """Each GPU type's baseline keeps its own pruning memo (``planner.baselines``): a bucket (a model's
    units of one purchase option) holds other units there than in the plan's pool, so with one memo
    the two pruned each other's buckets out, and the plan's next solve (after a veto) and the next
    set of baselines pruned every bucket again. Counted by the memos' entries: the plan's are the same
    objects after the baselines, and baselines at the same factors prune no bucket again."""
    from hetinfra.plan.planner import baselines, pool_at, prune_by_flows
    from tests.plan.test_prune import _units

    inputs, units = _units("batch.yaml")  # a capped group; 11 GPU types (multi-region's origins prune unremembered)
    pool = pool_at(inputs, units, {}, None)
    prune_by_flows(inputs, pool)
    plans = dict(inputs.reuse["pruned"])
    first = baselines(inputs, pool, 60.0, 1e-3)
    assert [b.gpu for b in first if b.feasible] and len({b.gpu for b in first}) > 1
    assert {k: v for k, v in inputs.reuse["pruned"].items()} == plans  # nothing of the plan's evicted ...
    assert all(inputs.reuse["pruned"][k] is v for k, v in plans.items())  # ... nor pruned again
    own = {name: dict(memo) for name, memo in inputs.reuse.items() if isinstance(name, tuple) and name[0] == "pruned"}
    assert set(own) == {("pruned", b.gpu) for b in first}
    again = baselines(inputs, pool, 60.0, 1e-3)
    assert [(b.gpu, b.cost) for b in again] == [(b.gpu, b.cost) for b in first]
    for name, entries in own.items():  # the same units: every bucket's pruning remembered, none redone
        assert all(inputs.reuse[name][k] is v for k, v in entries.items()), name


def test_the_baselines_are_sized_for_the_load_the_plan_is_sized_for():
    """A verified plan's ILP sizes for the verification load (verification_overrides: headroom 1 - 1 /
    load); its single-GPU baselines must be sized the same, else each reads cheaper than the plan it is
    compared with. The plan is the cheapest mix over every GPU type at the same factors, so no baseline
    is below it (within the MIP gap). Planted here as a headroom of one half: the plan doubles, and
    baselines at the spec's headroom (0) read about half of it."""
    from hetinfra.plan.planner import solve_units
    from tests.plan.test_prune import _units

    inputs, units = _units("chat.yaml")
    pr = solve_units(inputs, units, {}, overrides={"headroom": 0.5})
    feasible = [b for b in pr.baselines if b.feasible]
    assert pr.problem.headroom == 0.5 and len(feasible) > 1
    cost = pr.result.cost(pr.problem)
    gap = inputs.spec.planning.mip_gap
    assert all(b.cost >= cost * (1 - gap) - 1e-9 for b in feasible), [(b.gpu, b.cost, cost) for b in feasible]


@pytest.mark.parametrize("example", ["multi-region.yaml", "europe.yaml"])
def test_the_baselines_keep_the_specs_locality(example):
    """A single-GPU baseline is a fleet the spec allows: its caps AND its locality (each origin region
    serves planning.locality of its own traffic). Dropped, an H100-only baseline served a us-central1
    origin from eastus and read "this plan saves -16.7%". So each feasible baseline has a unit of each
    model in each of its origin regions and costs no less than the plan (the cheapest mix under the same
    rules, within the MIP gap); a GPU type offered in no such region says so."""
    from hetinfra.plan.planner import solve_units
    from tests.plan.test_prune import _units

    inputs, units = _units(example)
    pr = solve_units(inputs, units, {})
    p, cost, gap = pr.problem, pr.result.cost(pr.problem), inputs.spec.planning.mip_gap
    local = {k for k, lam in p.local_demand.items() if lam > 0}
    assert p.locality > 0 and local
    regions_of = {u.id: (u.model, u.region) for u in pr.all_units}
    for b in pr.baselines:
        if not b.feasible:
            assert "locality" in b.reason or "cannot serve" in b.reason, (b.gpu, b.reason)
            continue
        placed = {regions_of[uid] for uid, n in b.allocation.items() if n > 0}
        assert local <= placed, (b.gpu, sorted(local - placed))
        assert b.cost >= cost * (1 - gap) - 1e-9, (b.gpu, b.cost, cost)
    assert any("locality" in (b.reason or "") for b in pr.baselines) == (example == "europe.yaml")


def test_baselines_of_a_replaced_plan_stop_at_their_next_gpu_type():
    """A veto sends verification's search back and the rounds end again: the earlier plan's baselines
    (planner.baselines, on the pipeline's side thread) stop at their next GPU type, and the pipeline
    throws them away. Stale from the start, they solve nothing; stale after the first type, one."""
    from hetinfra.plan.planner import baselines
    from tests.plan.test_prune import _units

    inputs, units = _units("chat.yaml")
    every = baselines(inputs, units, 10.0, 0.01)
    assert len(every) > 2
    assert baselines(inputs, units, 10.0, 0.01, stale=lambda: True) == []
    asked: list[int] = []

    def after_one() -> bool:
        asked.append(1)
        return len(asked) > 1

    assert [b.gpu for b in baselines(inputs, units, 10.0, 0.01, stale=after_one)] == [every[0].gpu]


def _solves_recorded(monkeypatch) -> list:
    """The events list, "plan solved" appended as each solve of the plan's pool ends."""
    import hetinfra.plan.planner as planner

    events, real_solve = [], planner._solve_pool

    def solve_pool(*a, **kw):
        out = real_solve(*a, **kw)
        events.append("plan solved")
        return out

    monkeypatch.setattr(planner, "_solve_pool", solve_pool)
    return events


def test_unverified_baselines_of_a_spec_solved_through_pyomo_start_after_the_plans_solve(tmp_path, monkeypatch):
    """--no-verify with LoRA adapters: every solve goes through Pyomo, one at a time
    (solver.highs_quiet.FD_CAPTURE), so the baselines start after the plan's solve (pipeline.takes_turns).
    Beside it they took the lock first and the plan's solve waited for them: a spec with 30 adapters
    solved for 594 s against planning.time_limit_s 300."""
    import hetinfra.plan.planner as planner
    from hetinfra.plan.pipeline import plan_document
    from tests.plan.test_adapter_plan import SPEC

    events = _solves_recorded(monkeypatch)
    real_baselines = planner.baselines
    monkeypatch.setattr(planner, "baselines", lambda *a, **kw: events.append("baselines") or real_baselines(*a, **kw))
    spec = tmp_path / "lora.yaml"
    spec.write_text(SPEC)
    _, plan = plan_document(spec, verify=False, template_cache=False)
    assert plan.to_dict()["baselines"] and events[-1] == "baselines" and set(events[:-1]) == {"plan solved"}, events


def test_baselines_past_their_deadline_build_no_further_model(monkeypatch):
    """Once the baselines' time limit has passed (fake clock: the first GPU type's solve spends it),
    no further GPU type's model is built and given a solve's floor: each is listed with no plan, cut,
    which single_gpu_baselines records in the work budget."""
    import hetinfra.plan.planner as planner
    from hetinfra.solver import clock
    from tests.plan.test_prune import _units

    inputs, units = _units("chat.yaml")
    now = [0.0]
    monkeypatch.setattr(clock, "now", lambda: now[0])
    solved, real = [], planner._solved

    def spends_it(sub, gpu, *a):
        solved.append(gpu)
        out = real(sub, gpu, *a)
        now[0] += 10.0
        return out

    monkeypatch.setattr(planner, "_solved", spends_it)
    found = planner.baselines(inputs, units, 10.0, 0.01)
    assert len(found) > 2 and solved == [found[0].gpu]
    assert all(b.safety_stop and not b.feasible and b.reason == planner.CUT_BASELINE for b in found[1:])


def test_verified_baselines_of_a_spec_solved_through_pyomo_run_after_verification(tmp_path, monkeypatch):
    """Verified, with LoRA adapters: the baselines run after verification's last solve (a re-solve
    after a veto, the all-adapters candidate), not on the side thread beside them, where they held
    Pyomo's lock and the clock of the solves waiting for it ran on (pipeline.takes_turns)."""
    import threading

    import hetinfra.plan.planner as planner
    from hetinfra.plan.pipeline import plan_document
    from tests.plan.test_adapter_plan import SPEC

    events = _solves_recorded(monkeypatch)
    real_baselines = planner.baselines

    def baselines(*a, **kw):
        events.append(("baselines", threading.current_thread() is threading.main_thread()))
        return real_baselines(*a, **kw)

    monkeypatch.setattr(planner, "baselines", baselines)
    spec = tmp_path / "lora.yaml"
    doc = yaml.safe_load(SPEC)
    # the order of the solves, not the plan, is the subject: one round, short runs
    doc["planning"] = {"verify": {"requests": 1000, "max_rounds": 1, "settle_rounds": 0}}
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    _, plan = plan_document(spec, template_cache=False)
    assert plan.to_dict()["baselines"] and events[-1] == ("baselines", True), events
    assert events.count("plan solved") == len(events) - 1, events
