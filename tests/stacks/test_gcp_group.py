"""GCP self-healing groups under Pulumi mocks: instance templates and managed instance groups of
the plan's sizes, autohealers on vLLM's /health, spot scheduling, pipeline nodes grouped in one
zone, a passthrough load balancer per unit, Google's probers admitted to the vLLM port only."""

from __future__ import annotations

import pytest

pulumi = pytest.importorskip("pulumi")

from hetinfra.document import Plan
from hetinfra.compile.artifacts import sky_units  # noqa: E402
from hetinfra.compile.engine import vllm_serve_command  # noqa: E402
from tests.plan.golden_plans import totals_added_up  # noqa: E402
from tests.stacks.conftest import _alloc  # noqa: E402
from tests.stacks.test_program import API_KEY, by_name, run_program, unwrap  # noqa: E402

PIPE = "big-70b-gcp-us-central1-a2-highgpu-4g"
SPOT = "chat-8b-gcp-us-central1-g2-standard-8-spot"
PROBERS = ["35.191.0.0/16", "130.211.0.0/22"]


@pytest.fixture
def gcp_plan(three_cloud_plan):
    """three_cloud_plan's 2-node pipeline plus 3 single-node spot L4 VMs, with the models' sizes."""
    three_cloud_plan["allocations"].append(
        _alloc("chat-8b", "gcp", "us-central1", "g2-standard-8", "L4", 1, tp=1, count=3, spot=True, price=0.3))
    for m, params in zip(three_cloud_plan["models"], (8.0e9, 70.6e9)):
        m["params"] = params
    return totals_added_up(three_cloud_plan)  # the appended unit's cost in its model's and the plan's


def test_groups_equal_the_plan_and_heal(mocks, gcp_plan):
    endpoints = run_program(gcp_plan, clouds=("gcp",))
    assert [n for n in by_name(mocks, "gcp:compute/instance:Instance")] == []  # every GPU VM is in a group
    migs = by_name(mocks, "gcp:compute/instanceGroupManager:InstanceGroupManager")
    assert sorted(migs) == [f"{PIPE}-r0-n0-mig", f"{PIPE}-r0-n1-mig", f"{SPOT}-mig"]
    head, worker, spot = migs[f"{PIPE}-r0-n0-mig"], migs[f"{PIPE}-r0-n1-mig"], migs[f"{SPOT}-mig"]
    assert (head["targetSize"], worker["targetSize"], spot["targetSize"]) == (1, 1, 3)  # the planned counts
    assert {m["zone"] for m in migs.values()} == {"us-central1-a"}  # one zone: the replica's nodes together
    assert worker["baseInstanceName"] == f"{PIPE}-r0-n1" and spot["baseInstanceName"] == SPOT
    # autohealers on the heads, with the model's download in the initial delay (70.6B bf16: 141 GB)
    assert head["autoHealingPolicies"] == {"healthCheck": "demo-gcp-us-central1-hc-id", "initialDelaySec": 1920}
    assert spot["autoHealingPolicies"]["initialDelaySec"] == 1800  # the 30-minute floor
    assert "autoHealingPolicies" not in worker  # no /health on a worker: its group recreates it when it stops
    for m in migs.values():
        assert m["updatePolicy"]["type"] == "OPPORTUNISTIC" and m["updatePolicy"]["maxSurgeFixed"] == 0
        assert m["instanceLifecyclePolicy"] == {"defaultActionOnFailure": "REPAIR", "forceUpdateOnRepair": "YES"}
        assert m["versions"][0]["instanceTemplate"].startswith("projects/demo-project/global/instanceTemplates/")
    [hc] = by_name(mocks, "gcp:compute/healthCheck:HealthCheck").values()
    assert hc["httpHealthCheck"] == {"port": 8000, "requestPath": "/health"}
    assert hc["checkIntervalSec"] * hc["unhealthyThreshold"] == 300  # 5 minutes failing before a repair

    templates = by_name(mocks, "gcp:compute/instanceTemplate:InstanceTemplate")
    t_head, t_worker, t_spot = (templates[f"{n}-it"] for n in (f"{PIPE}-r0-n0", f"{PIPE}-r0-n1", SPOT))
    assert t_head["machineType"] == "a2-highgpu-4g" and t_spot["machineType"] == "g2-standard-8"
    assert t_head["guestAccelerators"] == [{"type": "nvidia-tesla-a100", "count": 4}]
    assert t_spot["guestAccelerators"] == [{"type": "nvidia-l4", "count": 1}]
    assert t_head["scheduling"] == {"onHostMaintenance": "TERMINATE", "automaticRestart": True, "preemptible": False,
                                    "provisioningModel": "STANDARD"}
    assert t_spot["scheduling"] == {"onHostMaintenance": "TERMINATE", "automaticRestart": False, "preemptible": True,
                                    "provisioningModel": "SPOT", "instanceTerminationAction": "DELETE"}
    assert t_head["disks"][0]["diskSizeGb"] == 200 and t_head["disks"][0]["boot"] is True
    assert t_head["serviceAccount"]["email"].startswith("hi-demo-") and t_head["labels"]["hetinfra-unit"] == PIPE
    units = {u.name: u for u in sky_units(Plan.parse(gcp_plan))}
    head_script, worker_script = unwrap(t_head["metadataStartupScript"]), unwrap(t_worker["metadataStartupScript"])
    assert vllm_serve_command(units[PIPE]) in head_script and "VLLM_PP_LAYER_PARTITION=42,38" in head_script
    assert vllm_serve_command(units[SPOT]) in unwrap(t_spot["metadataStartupScript"])
    assert "NODE_RANK=0" in head_script and "find-head.sh <<" not in head_script
    # the worker finds its head's group by name at every start, with the VMs' service account
    assert "NODE_RANK=1" in worker_script and "ExecStartPre=/opt/hetinfra/find-head.sh" in worker_script
    assert f'--filter="name~^{PIPE}-r0-n0- AND status=RUNNING"' in worker_script
    assert API_KEY not in head_script + worker_script
    [viewer] = by_name(mocks, "gcp:projects/iAMMember:IAMMember").values()
    assert viewer["role"] == "roles/compute.viewer" and viewer["member"].startswith("serviceAccount:hi-demo-")

    # one load balancer per unit over its heads only; external: clients are declared and there is no gateway
    services = by_name(mocks, "gcp:compute/regionBackendService:RegionBackendService")
    assert [b["group"] for b in services[f"{PIPE}-bes"]["backends"]] == [f"zones/us-central1-a/instanceGroups/{PIPE}-r0-n0"]
    assert [b["group"] for b in services[f"{SPOT}-bes"]["backends"]] == [f"zones/us-central1-a/instanceGroups/{SPOT}"]
    for bes in services.values():
        assert bes["loadBalancingScheme"] == "EXTERNAL" and bes["healthChecks"] == "demo-gcp-us-central1-lb-hc-id"
    rules = by_name(mocks, "gcp:compute/forwardingRule:ForwardingRule")
    assert rules[f"{PIPE}-fr"]["portRange"] == "8000" and rules[f"{PIPE}-fr"]["backendService"] == f"{PIPE}-bes-id"
    assert sorted(endpoints) == [PIPE, SPOT] and all(len(v) == 1 for v in endpoints.values())
    assert endpoints[PIPE][0].startswith("http://198.51.100.") and endpoints[PIPE][0].endswith(":8000/v1")

    fws = by_name(mocks, "gcp:compute/firewall:Firewall")
    health = fws["demo-gcp-us-central1-fw-health"]
    assert health["sourceRanges"] == PROBERS + ["209.85.152.0/22", "209.85.204.0/22"]
    assert health["allows"] == [{"protocol": "tcp", "ports": ["8000"]}]  # the vLLM port only
    assert fws["demo-gcp-us-central1-fw-vllm"]["sourceRanges"] == ["10.0.0.0/8"]
    assert "demo-gcp-us-central1-fw-ssh" not in fws
    for fw in fws.values():
        assert "0.0.0.0/0" not in (fw.get("sourceRanges") or [])


def test_internal_load_balancer_without_client_cidrs(mocks, gcp_plan):
    gcp_plan["deploy"]["ingress_cidrs"] = []
    gcp_plan["allocations"] = [a for a in gcp_plan["allocations"] if a["deployment_unit"] == SPOT]
    endpoints = run_program(gcp_plan, clouds=("gcp",))
    [rule] = by_name(mocks, "gcp:compute/forwardingRule:ForwardingRule").values()
    assert rule["loadBalancingScheme"] == "INTERNAL" and rule["ports"] == ["8000"]
    assert rule["subnetwork"] == "demo-gcp-us-central1-subnet-id" and "portRange" not in rule
    assert endpoints[SPOT][0].startswith("http://10.")
    fws = by_name(mocks, "gcp:compute/firewall:Firewall")
    assert fws["demo-gcp-us-central1-fw-health"]["sourceRanges"] == PROBERS
    assert "demo-gcp-us-central1-fw-vllm" not in fws
    assert by_name(mocks, "gcp:projects/iAMMember:IAMMember") == {}  # no pipeline: no instance listing


def test_initial_delay_is_capped_at_gces_limit(mocks, gcp_plan):
    gcp_plan["models"][1]["params"] = 405e9  # 810 GB of weights: 1200 + 4050 s wanted
    run_program(gcp_plan, clouds=("gcp",))
    head = by_name(mocks, "gcp:compute/instanceGroupManager:InstanceGroupManager")[f"{PIPE}-r0-n0-mig"]
    assert head["autoHealingPolicies"]["initialDelaySec"] == 3600


def test_gpu_without_a_gce_accelerator_is_a_clear_error(mocks, gcp_plan):
    gcp_plan["allocations"][-1].update(gpu="MI300X", custom_gpu=True)  # a GPU of the user's offers
    with pytest.raises(ValueError, match="no GCE accelerator type known for MI300X"):
        run_program(gcp_plan, clouds=("gcp",))
