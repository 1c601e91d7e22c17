"""preflight.catalog_problem: every node type a plan deploys (the allocation's, a heterogeneous
bundle's other role's, a mixed pipeline's stages) is an instance type the catalog sells, with the GPU
and GPU count the plan gives it. A hand-edited role naming an unknown type, or a known type with
another GPU (which the simulator and the rates would read), is refused naming that field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hetinfra.deploy.preflight import catalog_problem, catalog_types
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
