"""With routing by origin, `apply` prints one gateway launch line per SkyPilot fleet region, each
pinned to its region (--infra) and serving its row (HETINFRA_REGION -> gateway --region)."""

from __future__ import annotations


def test_one_regional_gateway_launch_line_per_fleet_region(tmp_path):
    from hetinfra.deploy.endpoints import endpoint_lines
    from hetinfra.document import Plan
    from hetinfra.deploy.state import DeployState
    from tests.plan.golden_plans import golden_allocation, golden_plan_with

    (tmp_path / "skypilot").mkdir()
    (tmp_path / "skypilot" / "chat-gateway.yaml").write_text("name: chat-gateway\n")
    running = [golden_allocation(deployment_unit="u1", path="skypilot", cloud="aws", region="us-east-1"),
               golden_allocation(deployment_unit="u2", path="skypilot", cloud="gcp", region="europe-west4")]
    plan = golden_plan_with(running, deploy={"gateway": {"enabled": True, "port": 8443}},
                            routing_by_origin={"chat": {"europe-west4": {}, "us-east-1": {}}})
    state = DeployState.of(tmp_path / "state.json", {"state_version": 1, "allocations": running, "endpoints": {
        "u1": ["http://1.2.3.4:30001"], "u2": ["http://1.2.3.5:30002"]}})
    lines = endpoint_lines(tmp_path, Plan.parse(plan), state)  # endpoint_lines takes the model
    launches = [x.strip() for x in lines if "sky launch" in x]
    assert len(launches) == 2
    assert launches[0].startswith("sky launch -c chat-gateway-us-east-1 --infra aws/us-east-1 ")
    assert launches[1].startswith("sky launch -c chat-gateway-europe-west4 --infra gcp/europe-west4 ")
    assert all('HETINFRA_ENDPOINTS="u1=http://1.2.3.4:30001 u2=http://1.2.3.5:30002"' in x for x in launches)
    assert launches[1].endswith("--env HETINFRA_REGION=europe-west4")
