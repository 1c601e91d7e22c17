"""Azure self-healing scale sets under Pulumi mocks: Uniform scale sets of the plan's capacities,
the Application Health extension and automatic repairs on the heads, spot eviction and restore,
pipeline replicas in a proximity placement group, a Standard load balancer per unit, Key Vault
reads through each scale set's identity."""

from __future__ import annotations

import base64

import pytest

pulumi = pytest.importorskip("pulumi")

from hetinfra.document import Plan
from hetinfra.compile.artifacts import sky_units  # noqa: E402
from hetinfra.compile.engine import vllm_serve_command  # noqa: E402
from tests.plan.golden_plans import totals_added_up  # noqa: E402
from tests.stacks.conftest import _alloc  # noqa: E402
from tests.stacks.test_program import API_KEY, by_name, run_program, unwrap  # noqa: E402

SPOT = "chat-8b-azure-eastus-standard-nc24ads-a100-v4-spot"
PIPE = "big-70b-azure-eastus-standard-nc48ads-a100-v4"
KV_USER = "4633458b-17de-408a-b874-0445c86b69e6"
READER = "acdd72a7-3385-48ef-bd42-f606fba81ae7"


@pytest.fixture
def azure_plan(three_cloud_plan):
    """three_cloud_plan's 3 spot VMs plus a 2-node on-demand pipeline, with the models' sizes."""
    three_cloud_plan["allocations"].append(
        _alloc("big-70b", "azure", "eastus", "Standard_NC48ads_A100_v4", "A100-80GB", 2, tp=2, pp=2, layers=[40, 40],
               price=7.3))
    for m, params in zip(three_cloud_plan["models"], (8.0e9, 70.6e9)):
        m["params"] = params
    return totals_added_up(three_cloud_plan)  # the appended unit's cost in its model's and the plan's


def _custom(vmss: dict) -> str:
    return base64.b64decode(unwrap(vmss["virtualMachineProfile"]["osProfile"]["customData"])).decode()


def test_scale_sets_equal_the_plan_and_heal(mocks, azure_plan):
    endpoints = run_program(azure_plan, clouds=("azure",))
    assert by_name(mocks, "azure-native:compute:VirtualMachine") == {}  # every GPU VM is in a scale set
    sets = by_name(mocks, "azure-native:compute:VirtualMachineScaleSet")
    assert sorted(sets) == [f"{PIPE}-r0-n0-vmss", f"{PIPE}-r0-n1-vmss", f"{SPOT}-vmss"]
    spot, head, worker = sets[f"{SPOT}-vmss"], sets[f"{PIPE}-r0-n0-vmss"], sets[f"{PIPE}-r0-n1-vmss"]
    assert spot["sku"] == {"name": "Standard_NC24ads_A100_v4", "tier": "Standard", "capacity": 3}  # the planned count
    assert head["sku"]["capacity"] == worker["sku"]["capacity"] == 1
    assert (spot["vmScaleSetName"], worker["vmScaleSetName"]) == (SPOT, f"{PIPE}-r0-n1")  # what find-head looks up
    for s in sets.values():
        assert s["orchestrationMode"] == "Uniform" and s["overprovision"] is False
        assert s["upgradePolicy"] == {"mode": "Manual"} and s["identity"] == {"type": "SystemAssigned"}
        assert s["virtualMachineProfile"]["storageProfile"]["osDisk"]["diskSizeGB"] == 200
        assert s["tags"]["hetinfra-service"] == "demo"
    # spot: evicted VMs are deleted (no disk left to pay for) and restored; never evicted for price
    vmp = spot["virtualMachineProfile"]
    assert (vmp["priority"], vmp["evictionPolicy"], vmp["billingProfile"]) == ("Spot", "Delete", {"maxPrice": -1})
    assert spot["spotRestorePolicy"] == {"enabled": True, "restoreTimeout": "PT1H"}
    assert "priority" not in head["virtualMachineProfile"] and "spotRestorePolicy" not in head
    # heads: the Application Health extension on /health (binary states) and automatic repairs
    for s, grace in ((spot, "PT30M"), (head, "PT32M")):  # 70.6B bf16: 141 GB to download
        [ext] = s["virtualMachineProfile"]["extensionProfile"]["extensions"]
        assert (ext["publisher"], ext["type"], ext["typeHandlerVersion"]) == (
            "Microsoft.ManagedServices", "ApplicationHealthLinux", "1.0")
        assert ext["settings"] == {"protocol": "http", "port": 8000, "requestPath": "/health",
                                   "intervalInSeconds": 30, "numberOfProbes": 3}
        assert s["automaticRepairsPolicy"] == {"enabled": True, "gracePeriod": grace, "repairAction": "Replace"}
    assert "extensionProfile" not in worker["virtualMachineProfile"] and "automaticRepairsPolicy" not in worker
    # the pipeline replica's nodes share one proximity placement group
    [ppg] = by_name(mocks, "azure-native:compute:ProximityPlacementGroup")
    assert head["proximityPlacementGroup"] == worker["proximityPlacementGroup"] == {"id": f"{ppg}-id"}
    assert "proximityPlacementGroup" not in spot

    units = {u.name: u for u in sky_units(Plan.parse(azure_plan))}
    assert vllm_serve_command(units[SPOT]) in _custom(spot) and "expected 1 x A100-80GB" in _custom(spot)
    assert "NODE_RANK=1" in _custom(worker) and f"virtualMachineScaleSets/{PIPE}-r0-n0/networkInterfaces" in _custom(worker)
    assert API_KEY not in _custom(spot) + _custom(head) + _custom(worker)
    os_profile = spot["virtualMachineProfile"]["osProfile"]
    assert os_profile["linuxConfiguration"]["disablePasswordAuthentication"] is True
    # identities: Key Vault Secrets User per scale set; the worker may read its head's scale set
    grants = {a.name: a.inputs for a in mocks.of("azure-native:authorization:RoleAssignment")}
    assert sorted(grants) == [f"{PIPE}-r0-n0-kv-reader", f"{PIPE}-r0-n1-head-reader", f"{PIPE}-r0-n1-kv-reader",
                              f"{SPOT}-kv-reader"]
    assert grants[f"{SPOT}-kv-reader"]["principalId"] == f"{SPOT}-vmss-principal"
    assert grants[f"{SPOT}-kv-reader"]["roleDefinitionId"].endswith(KV_USER)
    reader = grants[f"{PIPE}-r0-n1-head-reader"]
    assert reader["scope"] == f"{PIPE}-r0-n0-vmss-id" and reader["roleDefinitionId"].endswith(READER)
    assert reader["principalId"] == f"{PIPE}-r0-n1-vmss-principal"

    # one load balancer per unit over its heads only; public: clients are declared and there is no gateway
    lbs = by_name(mocks, "azure-native:network:LoadBalancer")
    assert sorted(lbs) == [f"{PIPE}-lb", f"{SPOT}-lb"]
    lb = lbs[f"{SPOT}-lb"]
    assert lb["sku"]["name"] == "Standard" and lb["frontendIPConfigurations"][0]["publicIPAddress"] == {
        "id": f"{SPOT}-lb-ip-id"}
    assert lb["probes"] == [{"name": "health", "protocol": "Http", "port": 8000, "requestPath": "/health",
                             "intervalInSeconds": 10, "probeThreshold": 3}]
    [rule] = lb["loadBalancingRules"]
    assert (rule["frontendPort"], rule["backendPort"], rule["protocol"]) == (8000, 8000, "Tcp")
    pool = rule["backendAddressPool"]["id"]
    assert pool.endswith(f"/loadBalancers/{SPOT}-lb/backendAddressPools/heads")

    def pools(s):
        return s["virtualMachineProfile"]["networkProfile"]["networkInterfaceConfigurations"][0][
            "ipConfigurations"][0].get("loadBalancerBackendAddressPools")

    assert pools(spot) == [{"id": pool}] and pools(head)[0]["id"].endswith(f"/{PIPE}-lb/backendAddressPools/heads")
    assert pools(worker) is None
    assert sorted(endpoints) == [PIPE, SPOT] and endpoints[SPOT][0].startswith("http://192.0.2.")
    # the NSG: the vLLM port from the declared clients only, no SSH
    [nsg] = by_name(mocks, "azure-native:network:NetworkSecurityGroup").values()
    assert [(r["destinationPortRange"], r["sourceAddressPrefixes"]) for r in nsg["securityRules"]] == [
        ("8000", ["10.0.0.0/8"])]


def test_internal_load_balancer_without_client_cidrs(mocks, azure_plan):
    azure_plan["deploy"]["ingress_cidrs"] = []
    endpoints = run_program(azure_plan, clouds=("azure",))
    lb = by_name(mocks, "azure-native:network:LoadBalancer")[f"{SPOT}-lb"]
    assert lb["frontendIPConfigurations"][0]["subnet"]["id"] == "demo-azure-eastus-subnet-id"
    assert "publicIPAddress" not in lb["frontendIPConfigurations"][0]
    assert by_name(mocks, "azure-native:network:PublicIPAddress") == {}
    assert endpoints[SPOT][0].startswith("http://10.")
    [nsg] = by_name(mocks, "azure-native:network:NetworkSecurityGroup").values()
    assert nsg["securityRules"] == []  # nothing reaches vLLM from outside the VNet


def test_repair_grace_stays_within_azures_bounds(mocks, azure_plan):
    from hetinfra.stacks.azure_group import repair_grace

    assert (repair_grace(60), repair_grace(1920), repair_grace(5250), repair_grace(9000)) == (
        "PT10M", "PT32M", "PT88M", "PT90M")
    azure_plan["models"][1]["params"] = 405e9  # 1200 + 4050 s wanted
    run_program(azure_plan, clouds=("azure",))
    head = by_name(mocks, "azure-native:compute:VirtualMachineScaleSet")[f"{PIPE}-r0-n0-vmss"]
    assert head["automaticRepairsPolicy"]["gracePeriod"] == "PT88M"
