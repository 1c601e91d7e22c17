"""models[].disaggregation.reason says its rates are verification's only where a factor moved a
compared rate: a re-plan against an unverified state (every template's derate 1.0, verify off) said
'(rates as verified by simulation)' though nothing was simulated."""

from __future__ import annotations

from hetinfra.plan.planner import prepare
from hetinfra.plan.templates_pd import split_decision

HETERO = "benchmarks/specs/llama70-hetero-pd.yaml"


def test_the_reason_names_verification_only_where_a_factor_moved_a_rate():
    staged = prepare(HETERO, template_cache=False)
    pm, units = staged.inputs.models[0], staged.units
    every = {u.template.id: 1.0 for u in units}
    assert "verified" not in split_decision(pm, units, [], every)["reason"]
    moved = dict(every, **{u.template.id: 0.8 for u in units if u.template.bundle is None})
    assert "(rates as verified by simulation)" in split_decision(pm, units, [], moved)["reason"]


def test_the_reason_names_the_planned_bundle_where_it_is_not_the_compared_best():
    """The comparison is per req/s of the largest class; the allocation serves every class at whole
    replicas and may deploy another bundle. The reason then names what is planned, and says nothing
    more where the compared best is deployed."""
    staged = prepare(HETERO, template_cache=False)
    pm, units = staged.inputs.models[0], staged.units
    mine = [u for u in units if u.model == pm.spec.name]
    base = split_decision(pm, units, [])["reason"]
    bundles = [u for u in mine if u.template.bundle is not None]
    best = next(u for u in bundles if u.template.id in base)
    other = next(u for u in bundles if u.template.id != best.template.id and u.template.id not in base)
    assert split_decision(pm, units, [best])["reason"] == base
    assert split_decision(pm, units, [other])["reason"] == base + (
        f"; planned: {other.template.id} (the allocation serves every class at whole replicas; the comparison is "
        "per req/s of the largest class)")
