"""hetinfra.plan.pipeline: the baselines solve in a thread beside the trim's simulations, from the
rounds' plan (with --no-verify, beside the plan's solve); they must be those of the final plan, as
solving them after it gives."""

from __future__ import annotations

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
