"""Preflight refuses a prefill/decode bundle across nodes of an instance type without RDMA
(hetinfra.deploy.preflight.split_problem, hetinfra.catalog.interconnect)."""

from __future__ import annotations

from hetinfra.deploy.preflight import split_problem
from hetinfra.document import Plan
from hetinfra.document.allocation import Disaggregation
from tests.plan.golden_plans import filled_golden

SPLIT = {"xpyd": "2P4D", "link": "efa", "link_gbytes_s": 95.0, "kv_bytes_per_token": 262144,
         "roles": [{"role": "prefill", "engines": 2, "tp": 4, "nodes": 1},
                   {"role": "decode", "engines": 4, "tp": 4, "nodes": 2}],
         "classes": [{"name": "c", "transfer_ms": 13.0}]}


def _alloc(cloud: str, instance_type: str, gpu: str, nodes: int):
    a = Plan.parse(filled_golden("chat")).allocations[0]
    split = Disaggregation.model_validate({**SPLIT, "link": {"aws": "efa", "azure": "infiniband", "gcp": "roce"}[cloud]})
    return a.model_copy(update={"cloud": cloud, "instance_type": instance_type, "gpu": gpu,
                                "nodes_per_replica": nodes, "disaggregation": split})


def test_rdma_types_pass_and_tcp_types_are_refused_across_nodes():
    assert split_problem(_alloc("aws", "p5en.48xlarge", "H200", 3)) is None
    assert split_problem(_alloc("azure", "Standard_ND96isr_H100_v5", "H100", 2)) is None
    why = split_problem(_alloc("gcp", "a3-highgpu-8g", "H100", 2))
    assert why and "tcp" in why and "RDMA" in why
    assert split_problem(_alloc("aws", "g6e.12xlarge", "L40S", 2))
    # one node: NVLink or PCIe inside it carries the KV, whatever the network
    assert split_problem(_alloc("gcp", "a3-highgpu-8g", "H100", 1)) is None


def test_status_counts_each_roles_engines_at_the_planned_ratio():
    """A bundle's replica is one node running every engine of both roles: status reads replicas and
    says per role how many engines that is (hetinfra.deploy.drift.UnitLive.roles)."""
    from hetinfra.deploy.drift import UnitLive, _unit, drift_line
    from hetinfra.document.state import RunningAllocation
    from tests.compile.split_plan import split_plan

    a = Plan.parse(split_plan("2P1D")).allocations[0]
    u = _unit(RunningAllocation.model_validate({**a.to_dict(), "path": "skypilot"}))
    assert u.roles == (("prefill", 2, 0, a.instance_type), ("decode", 1, 0, a.instance_type))
    u.live = u.desired - 3
    counts = u.doc()["roles"]
    assert counts == {"prefill": {"engines_per_replica": 2, "planned": 2 * u.desired, "live": 2 * u.live},
                      "decode": {"engines_per_replica": 1, "planned": u.desired, "live": u.live}}
    assert f"({2 * u.live} of {2 * u.desired} prefill engines, {u.live} of {u.desired} decode engines)" in drift_line(u)
    assert "roles" not in UnitLive("x", "skypilot", "aws", "r", "t", "g", False, 1, 2, 1.0, live=2).doc()


def _hetero(decode_type: str, decode_gpu: str, link: str = "efa"):
    """A bundle across two nodes: prefill on p5en.48xlarge (EFA), decode on ``decode_type``."""
    split = {**SPLIT, "link": link, "roles": [{"role": "prefill", "engines": 2, "tp": 4, "nodes": 1},
                                              {"role": "decode", "engines": 2, "tp": 4, "nodes": 1,
                                               "instance_type": decode_type, "gpu": decode_gpu}]}
    a = Plan.parse(filled_golden("chat")).allocations[0]
    return a.model_copy(update={"cloud": "aws", "instance_type": "p5en.48xlarge", "gpu": "H200",
                                "nodes_per_replica": 2, "disaggregation": Disaggregation.model_validate(split)})


def test_every_role_of_a_heterogeneous_bundle_needs_the_same_rdma_network_the_plan_priced():
    assert split_problem(_hetero("p4de.24xlarge", "A100-80GB")) is None
    why = split_problem(_hetero("g6e.12xlarge", "L40S"))  # the decode role's type has no EFA
    assert why and "g6e.12xlarge" in why and "tcp" in why
    assert "priced over roce" in split_problem(_hetero("p4de.24xlarge", "A100-80GB", link="roce"))


def test_status_and_replan_count_a_bundle_across_nodes_per_role_node_and_instance_type():
    """A heterogeneous bundle's replica is one unit of two nodes: status says each role's nodes and
    instance type, and replan's rows (and the GPUs it counts against caps) hold each role's type."""
    from hetinfra.deploy.apply import changes
    from hetinfra.deploy.drift import _unit, drift_line
    from hetinfra.document.state import RunningAllocation
    from hetinfra.replan.diff import gpus_in_use
    from tests.compile.split_plan import split_plan

    a = Plan.parse(split_plan("hetero")).allocations[0]
    u = _unit(RunningAllocation.model_validate({**a.to_dict(), "path": "pulumi"}))
    u.live = u.desired - 1
    decode = u.doc()["roles"]["decode"]
    assert decode == {"engines_per_replica": 2, "planned": 2 * u.desired, "live": 2 * u.live,
                      "instance_type": "p4de.24xlarge", "nodes_per_replica": 1, "nodes_planned": u.desired,
                      "nodes_live": u.live}
    assert f"{u.live} of {u.desired} p4de.24xlarge nodes" in drift_line(u)
    rows = changes([], [a], label=lambda _a: "plan")
    assert [(c.instance_type, c.after) for c in rows] == [("p4de.24xlarge", a.count), ("p5en.48xlarge", a.count)]
    assert [c.roles for c in rows] == [{"decode": [0, 2 * a.count]}, {"prefill": [0, 2 * a.count]}]
    assert abs(sum(c.after_cost for c in rows) - a.cost_usd_per_hour) < 1e-6  # the groups add up to the unit
    assert gpus_in_use([a]) == {("aws", "us-east-1", "A100-80GB"): 8 * a.count, ("aws", "us-east-1", "H200"): 8 * a.count}
