"""preflight.catalog_problem: every node type a plan deploys (the allocation's, a heterogeneous
bundle's other role's, a mixed pipeline's stages) is an instance type the catalog sells, with the GPU
and GPU count the plan gives it. A hand-edited role naming an unknown type, or a known type with
another GPU (which the simulator and the rates would read), or sold in another region, is refused
naming that field; a property over drawn catalogs and plans: accepted iff every node type is sold."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from hetinfra.deploy.preflight import catalog_problem, catalog_types, node_types
from hetinfra.document.allocation import Allocation
from tests.compile.split_plan import split_plan

GOLDEN = sorted((Path(__file__).parents[1] / "plan" / "golden").glob("*.json"))


@pytest.fixture(scope="module")
def known():
    return catalog_types()


def _allocations():
    for p in GOLDEN:
        yield from (a for a in json.loads(p.read_text())["allocations"] if not a["custom_cloud"])
    yield from split_plan("hetero")["allocations"]


def test_every_planned_node_type_is_sold_as_planned(known):
    allocs = [Allocation.model_validate(a) for a in _allocations()]
    assert any(a.heterogeneous_bundle for a in allocs) and any(a.stages for a in allocs)
    assert [catalog_problem(a, known) for a in allocs] == [None] * len(allocs)


def _role(a): return a["disaggregation"]["roles"][1]


@pytest.mark.parametrize("edit, message", [
    (lambda a: _role(a).update(instance_type="p9.96xlarge"), "disaggregation.roles[1].instance_type 'p9.96xlarge' is not"),
    (lambda a: _role(a).update(gpu="H200"), "disaggregation.roles[1].instance_type 'p4de.24xlarge' is sold with 8 x A100-80GB"),
    (lambda a: _role(a).update(gpus_per_node=16), "but the plan gives it 16 x A100-80GB"),
    (lambda a: a.update(gpu="A10G"), "instance_type 'p5en.48xlarge' is sold with 8 x H200, but the plan gives it 8 x A10G"),
])
def test_a_node_type_not_sold_as_planned_is_refused_on_its_field(known, edit, message):
    a = split_plan("hetero")["allocations"][0]
    edit(a)
    problem = catalog_problem(Allocation.model_validate(a), known)
    assert problem is not None and message in problem


def test_a_mixed_pipeline_stage_with_another_gpu_is_refused(known):
    a = next(a for a in _allocations() if a.get("stages"))
    a["stages"][-1]["gpu"] = "B200"
    assert f"stages[{len(a['stages']) - 1}].instance_type" in catalog_problem(Allocation.model_validate(a), known)


# ---- property: accepted iff every node type is sold as planned, in the unit's region ---------------
# Drawn (a seeded generator: hypothesis cost ~7 ms a draw here, this 400 cases in a few ms) over small
# catalogs of made-up rows (cloud, instance type, GPU, GPUs, region) and allocations of each shape
# node_types reads, half their nodes taken from the catalog, so that a node is as often sold as not.
# The oracle is the definition, written independently of preflight: one catalog row with the node's
# cloud, type, GPU, GPU count (a stage: any) and the unit's region.
CLOUDS, TYPES, GPUS, COUNTS, REGIONS = ("aws", "gcp"), ("t1", "t2", "t3"), ("A", "B"), (1, 8), ("r1", "r2")


@pytest.fixture(scope="module")
def shapes() -> list[Allocation]:
    """One allocation of each shape node_types reads: plain, a mixed pipeline's stages, a heterogeneous
    bundle's roles."""
    allocs = [Allocation.model_validate(a) for a in _allocations()]
    return [next(a for a in allocs if not a.stages and a.disaggregation is None),
            next(a for a in allocs if a.stages), next(a for a in allocs if a.heterogeneous_bundle)]


def _drawn_allocation(base: Allocation, cloud: str, region: str, nodes: list) -> tuple[Allocation, list]:
    """``base`` moved to ``cloud``/``region`` with ``nodes`` [(type, GPU, GPUs)] as its node types, and
    the oracle's view of them [(field prefix, type, GPU, GPUs or None)]."""
    update = {"cloud": cloud, "region": region}
    if base.stages:
        update["stages"] = [s.model_copy(update={"instance_type": t, "gpu": g}) for s, (t, g, _n) in zip(base.stages, nodes)]
        return base.model_copy(update=update), [(f"stages[{k}].", t, g, None) for k, (t, g, _n) in enumerate(nodes)]
    (t, g, n), rest = nodes[0], iter(nodes[1:])
    update.update(instance_type=t, gpu=g, gpus_per_instance=n)
    seen = [("", t, g, n)]
    if base.disaggregation is not None:
        roles = []
        for j, r in enumerate(base.disaggregation.roles):
            if r.instance_type:
                rt, rg, rn = next(rest)
                r = r.model_copy(update={"instance_type": rt, "gpu": rg, "gpus_per_node": rn})
                seen.append((f"disaggregation.roles[{j}].", rt, rg, rn))
            roles.append(r)
        update["disaggregation"] = base.disaggregation.model_copy(update={"roles": roles})
    return base.model_copy(update=update), seen


def _draw_case(rng: random.Random, shapes: list[Allocation]) -> tuple[list, Allocation, list]:
    """(catalog rows, an allocation, the oracle's view of its nodes)."""
    rows = [(rng.choice(CLOUDS), rng.choice(TYPES), rng.choice(GPUS), rng.choice(COUNTS), rng.choice(REGIONS))
            for _ in range(rng.randint(1, 8))]
    base = rng.choice(shapes)
    row = rng.choice(rows)
    cloud, region = (row[0], row[4]) if rng.random() < 0.5 else (rng.choice(CLOUDS), rng.choice(REGIONS))
    nodes = [rng.choice(rows)[1:4] if rng.random() < 0.5 else (rng.choice(TYPES), rng.choice(GPUS), rng.choice(COUNTS))
             for _ in node_types(base)]
    return rows, *_drawn_allocation(base, cloud, region, nodes)


def _known(rows: list) -> dict:
    """The catalog rows as preflight.catalog_types gives them: (cloud, type) -> {(GPU, GPUs, region)}."""
    known: dict = {}
    for c, t, g, n, r in rows:
        known.setdefault((c, t), set()).add((g, n, r))
    return known


def _sold(rows: list, cloud: str, region: str, node: tuple) -> bool:
    _field, t, g, n = node
    return any(row == (cloud, t, g, row[3] if n is None else n, region) for row in rows)


def test_property_a_plan_is_accepted_iff_each_node_type_is_sold_as_planned_in_its_region(shapes):
    rng, outcomes = random.Random(20261205), set()
    for _ in range(400):
        rows, alloc, nodes = _draw_case(rng, shapes)
        known = _known(rows)
        unsold = [x for x in nodes if not _sold(rows, alloc.cloud, alloc.region, x)]
        problem = catalog_problem(alloc, known)
        assert (problem is None) == (not unsold), (nodes, rows, alloc.region, problem)
        if unsold:  # it names the first node type that is not sold as planned
            assert problem.startswith(f"{unsold[0][0]}instance_type {unsold[0][1]!r} "), (problem, unsold)
        outcomes.add("accepted" if problem is None else "region" if "region" in problem else
                     "gpus" if "sold with" in problem else "type")
    assert outcomes == {"accepted", "type", "gpus", "region"}  # every way to pass and fail was drawn


def test_property_validate_plan_refuses_the_first_unsold_allocation_of_a_cloud_apply_deploys_to(shapes):
    # a drawn plan of 1-3 allocations (no bundle: split_problem reads the real interconnect table), some
    # from the user's own offers (custom_cloud, or a cloud apply does not know), never checked
    from types import SimpleNamespace

    from hetinfra.deploy.preflight import validate_plan
    from hetinfra.errors import InvalidInputError

    rng, outcomes = random.Random(1205), set()
    for _ in range(200):
        drawn = [_draw_case(rng, shapes[:2]) for _ in range(rng.randint(1, 3))]
        rows = [row for case in drawn for row in case[0]]
        known = _known(rows)
        allocs, wrong = [], None
        for i, (_rows, alloc, nodes) in enumerate(drawn):
            own = rng.random() < 0.25
            alloc = alloc.model_copy(update={"custom_cloud": True} if own else {})
            allocs.append(alloc)
            if wrong is None and not own and any(not _sold(rows, alloc.cloud, alloc.region, x) for x in nodes):
                wrong = i
        plan = SimpleNamespace(allocations=allocs)
        if wrong is None:
            assert validate_plan(plan, Path("plan.json"), catalog=lambda: known) is plan
        else:
            with pytest.raises(InvalidInputError, match=rf"^plan.json: allocations\[{wrong}\]\.\S*instance_type "):
                validate_plan(plan, Path("plan.json"), catalog=lambda: known)
        outcomes.add(wrong is None)
    assert outcomes == {True, False}
