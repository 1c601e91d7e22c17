"""hetinfra.document.bundle_shape: every bundle shape the planner writes parses; a bundle with one
planted fault (roles swapped or missing, xPyD name, nodes that do not add up, engines on GPUs a node
does not have, a heterogeneous role half-named or mispriced) is refused where plan.json is parsed,
naming the field, whichever reader parses it (simulate, apply, status, replan, the hop)."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from hetinfra.document import Allocation
from tests.compile.split_plan import PLAN

BASE = json.loads(PLAN.read_text())["allocations"][0]
GPUS = BASE["gpus_per_instance"]  # 8 (p5en.48xlarge)


@st.composite
def bundles(draw) -> dict:
    """An allocation holding a bundle as the planner writes one: in one node (x a + y b <= the node's
    GPUs), or across nodes (each role's engines evenly over its nodes), maybe with its decode role on
    another instance type (both roles priced, the allocation's price their nodes' mean)."""
    a = copy.deepcopy(BASE)
    d = a["disaggregation"]
    across, hetero = draw(st.booleans()), draw(st.booleans())
    shapes = []
    for i in range(2):
        tp = draw(st.sampled_from([1, 2, 4, 8]))
        per_node = draw(st.integers(1, GPUS // tp))
        nodes = draw(st.integers(1, 3)) if across else 0
        shapes.append((tp, per_node * max(nodes, 1), nodes))
    if not across and sum(tp * e for tp, e, _ in shapes) > GPUS:
        shapes = [(1, 1, 0), (1, 1, 0)]
    for r, (tp, engines, nodes) in zip(d["roles"], shapes):
        r.update(tp=tp, engines=engines, nodes=nodes)
    d["xpyd"] = f"{shapes[0][1]}P{shapes[1][1]}D"
    nodes = max(1, sum(s[2] for s in shapes))
    price = a["price_per_instance_usd_per_hour"]
    if across and hetero:
        d["roles"][0]["price_per_node_usd_per_hour"] = price
        d["roles"][1].update(instance_type="p4de.24xlarge", gpu="A100-80GB", gpus_per_node=8,
                             price_per_node_usd_per_hour=27.44705)
        price = (price * shapes[0][2] + 27.44705 * shapes[1][2]) / nodes
    a.update(nodes_per_replica=nodes, instances=nodes * a["count"], price_per_instance_usd_per_hour=round(price, 4))
    a["cost_usd_per_hour"] = a["price_per_instance_usd_per_hour"] * a["instances"]
    return a


def _swap(a): a["disaggregation"]["roles"].reverse()
def _drop_decode(a): a["disaggregation"]["roles"].pop()
def _xpyd(a):
    pre, dec = a["disaggregation"]["roles"]
    a["disaggregation"]["xpyd"] = f"{pre['engines'] + 1}P{dec['engines']}D"
def _nodes(a): a["nodes_per_replica"] += 1; a["instances"] = a["nodes_per_replica"] * a["count"]  # noqa: E702
def _gpus(a): a["disaggregation"]["roles"][1]["tp"] = 16
def _half_hetero(a):  # a role whose GPU differs from the instance type deploy runs it on
    r = a["disaggregation"]["roles"][1]
    r.pop("instance_type", None) if "instance_type" in r else r.update(gpu="A100-80GB")


def _role_nodes(a):
    roles = a["disaggregation"]["roles"]
    roles[0]["nodes"] = 0 if roles[0]["nodes"] else 1  # one role on nodes of its own, the other not


#: a planted fault -> the field the refusal names
FAULTS = {_swap: "disaggregation", _drop_decode: "disaggregation", _xpyd: "disaggregation",
          _nodes: "nodes_per_replica", _gpus: "disaggregation", _half_hetero: "disaggregation",
          _role_nodes: "disaggregation"}


@settings(max_examples=60, deadline=None)
@given(bundles(), st.sampled_from(sorted(FAULTS, key=lambda f: f.__name__)))
def test_planner_shapes_parse_and_each_planted_fault_is_refused(alloc, fault):
    Allocation.model_validate(copy.deepcopy(alloc))
    fault(alloc)
    with pytest.raises(ValidationError) as exc:
        Allocation.model_validate(alloc)
    assert exc.value.errors()[0]["loc"][0] == FAULTS[fault]


@pytest.mark.parametrize("edit, field", [
    (lambda r, a: r[1].pop("price_per_node_usd_per_hour"), "disaggregation"),
    (lambda r, a: r[1].pop("gpus_per_node"), "disaggregation"),
    (lambda r, a: a.update(price_per_instance_usd_per_hour=a["price_per_instance_usd_per_hour"] + 5),
     "price_per_instance_usd_per_hour"),
])
def test_a_heterogeneous_role_half_named_or_mispriced_is_refused(edit, field):
    from tests.compile.split_plan import across
    a = across(copy.deepcopy(BASE), hetero=True)
    Allocation.model_validate(copy.deepcopy(a))
    edit(a["disaggregation"]["roles"], a)
    with pytest.raises(ValidationError) as exc:
        Allocation.model_validate(a)
    assert exc.value.errors()[0]["loc"][0] == field


def test_simulate_refuses_a_bundle_missing_a_role_with_exit_2(tmp_path):
    """The CLI path: the simulator takes roles[0] as its prefill pool and roles[1] as its decode pool,
    so a bundle with a role missing raised IndexError (a traceback), one swapped ran its pools
    exchanged."""
    from click.testing import CliRunner

    from hetinfra.cli.app import cli
    plan = json.loads(PLAN.read_text())
    plan["allocations"][0]["disaggregation"]["roles"].pop()
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    r = CliRunner().invoke(cli, ["simulate", str(tmp_path), "--requests", "100"])
    assert r.exit_code == 2, r.output
    assert "allocations[0].disaggregation has roles ['prefill']" in r.output


def test_every_reader_takes_a_roles_node_and_the_rdma_rule_from_here():
    """role_node is the one reading of a role's node (deploy's groups, the compilers' role_nodes,
    preflight's interconnect look-up); link_problem the one RDMA rule (the compilers, preflight)."""
    from hetinfra.compile.bundle import role_nodes_of
    from hetinfra.deploy.preflight import split_problem
    from hetinfra.document import Plan
    from hetinfra.compile.unit import link_problem
    from hetinfra.document.bundle_shape import role_node
    from hetinfra.errors import InvalidInputError
    from tests.compile.split_plan import split_plan

    a = Plan.parse(split_plan("hetero")).allocations[0]
    nodes = [role_node(r, a) for r in a.disaggregation.roles]
    assert nodes == [(a.instance_type, a.gpu, a.gpus_per_instance), ("p4de.24xlarge", "A100-80GB", 8)]
    assert [tuple(r[2:]) for r in role_nodes_of(a)] == nodes
    assert [(g.instance_type, g.gpu, g.gpus_per_instance) for g in a.instance_groups()] == nodes
    assert a.gpus_per_replica() == sum(n.gpus for n in nodes)
    tcp = a.model_copy(update={"disaggregation": a.disaggregation.model_copy(update={"link": "tcp"})})
    assert split_problem(tcp) == link_problem("tcp") and link_problem("efa") is None
    with pytest.raises(InvalidInputError) as err:
        role_nodes_of(tcp)
    assert err.value.message == f"{a.deployment_unit}: {link_problem('tcp')}"
