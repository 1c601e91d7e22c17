"""hetinfra.plan.pipeline: the baselines solve in a thread beside the trim's simulations, from the
rounds' plan; they must be those of the final plan, as solving them after the trim gives."""

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
