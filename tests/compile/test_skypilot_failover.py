"""SkyServe failover as SkyPilot 0.14.1 itself runs it, offline: the optimizer walks a unit's `ordered`
resources (the planned offer first, even where an alternate is cheaper in SkyPilot's catalog, then the
next one each time the previous is blocked, as a failed launch blocks it), and SkyServe's own
autoscaler launches on-demand stand-ins for spot replicas that are preempted or not yet ready."""

from __future__ import annotations

import dataclasses

import pytest

from hetinfra.compile.skypilot import render_task
from hetinfra.compile.unit import DeployedUnit

from .test_skypilot import A10G_DP4, H100_GCP_SPOT, L4_AWS


def _best(sky, text: str, blocked=(), override=None) -> tuple:
    from sky import dag as dag_lib
    from sky import optimizer

    task = sky.Task.from_yaml_str(text)
    if override:  # what SkyServe's replica manager does for an on-demand stand-in
        task.set_resources_override(override)
    with dag_lib.Dag() as dag:
        dag.add(task)
    optimizer.Optimizer.optimize(dag, quiet=True, blocked_resources=list(blocked))
    b = task.best_resources
    return str(b.cloud).lower(), b.region, b.instance_type, round(b.get_cost(3600), 4)


def test_optimizer_tries_the_planned_offer_then_the_alternates_in_order(sky_offline):
    sky, private_home = sky_offline
    if not private_home:
        pytest.skip("sky was imported with another HOME; not touching its state DB")
    from sky import check as sky_check
    from sky import global_user_state
    from sky.clouds import cloud as cloud_lib

    global_user_state.set_allowed_clouds(sky_check._get_workspace_allowed_clouds("default"), "default")
    global_user_state.set_enabled_clouds(["AWS", "GCP", "Azure"], cloud_lib.CloudCapability.COMPUTE, "default")
    text = render_task(L4_AWS)  # aws/us-east-1 g6.xlarge, then gcp/us-east4 g2-standard-4, then aws/us-west-2
    # catalog prices: g6.xlarge 0.8048 in both AWS regions; g2-standard-4 0.14631 + L4 0.55821 in us-east4
    assert _best(sky, text) == ("aws", "us-east-1", "g6.xlarge", 0.8048)
    # any_of would take the cheapest instead: why the tasks use `ordered`
    assert _best(sky, text.replace("  ordered:", "  any_of:")) == ("gcp", "us-east4", "g2-standard-4", 0.7045)
    planned = sky.Resources(cloud=sky.AWS(), region="us-east-1", instance_type="g6.xlarge")
    assert _best(sky, text, [planned]) == ("gcp", "us-east4", "g2-standard-4", 0.7045)
    second = sky.Resources(cloud=sky.GCP(), region="us-east4", instance_type="g2-standard-4")
    assert _best(sky, text, [planned, second]) == ("aws", "us-west-2", "g6.xlarge", 0.8048)
    # a spot unit: spot in the planned region; its on-demand stand-in there too, at the on-demand price
    # (a3-highgpu-8g us-central1: host 2.75246 + 8 x H100 22.8008 spot; 9.46006 + 33.60609 on demand)
    spot = render_task(H100_GCP_SPOT)
    assert _best(sky, spot) == ("gcp", "us-central1", "a3-highgpu-8g", 25.5533)
    assert _best(sky, spot, override={"use_spot": False}) == ("gcp", "us-central1", "a3-highgpu-8g", 43.0662)


def _replica(i: int, spot: bool, state: str):
    from sky.serve import replica_managers
    from sky.utils import common_utils

    r = replica_managers.ReplicaInfo(i, f"r-{i}", "8000", spot, None, 1, {"use_spot": spot})
    p = r.status_property
    p.sky_launch_status = common_utils.ProcessStatus.SUCCEEDED
    p.first_ready_time = 1.0
    if state == "ready":
        p.service_ready_now = True
    elif state == "preempted":
        p.sky_down_status, p.preempted = common_utils.ProcessStatus.SUCCEEDED, True
    return r


def _decisions(sky, unit: DeployedUnit, replicas: list) -> list:
    from sky.serve import autoscalers

    task = sky.Task.from_yaml_str(render_task(unit))
    scaler = autoscalers.Autoscaler.from_spec(unit.name, task.service)
    return sorted((d.operator.value, str(d.target)) for d in scaler.generate_scaling_decisions(replicas, [1]))


def test_skyserve_replaces_preempted_spot_with_on_demand(sky_offline):
    sky, _ = sky_offline
    up_spot, up_od = ("scale_up", "{'use_spot': True}"), ("scale_up", "{'use_spot': False}")
    # 2 planned spot replicas: at launch, 2 spot plus 2 on-demand stand-ins until the spot ones are READY
    assert _decisions(sky, H100_GCP_SPOT, []) == [up_od, up_od, up_spot, up_spot]
    # one spot replica preempted: a spot relaunch, and an on-demand replica meanwhile
    assert _decisions(sky, H100_GCP_SPOT, [_replica(1, True, "ready"), _replica(2, True, "preempted")]) == \
        [up_od, up_spot]
    # spot is back: the on-demand stand-in goes
    assert _decisions(sky, H100_GCP_SPOT, [_replica(1, True, "ready"), _replica(2, True, "ready"),
                                           _replica(3, False, "ready")]) == [("scale_down", "3")]
    # without the fallback (deploy.failover.ondemand_fallback: false) a preempted replica is relaunched as spot only
    plain = dataclasses.replace(H100_GCP_SPOT, ondemand_fallback=False)
    assert _decisions(sky, plain, [_replica(1, True, "ready"), _replica(2, True, "preempted")]) == \
        [("scale_up", "None")]


def test_fallback_only_for_spot_units():
    with pytest.raises(ValueError, match="ondemand_fallback is for spot units"):
        dataclasses.replace(A10G_DP4, ondemand_fallback=True)
    with pytest.raises(ValueError, match="alternate .* cloud must be one of"):
        dataclasses.replace(A10G_DP4, alternates=(("oci", "us-ashburn-1", "BM.GPU4.8", 1.0),))
    with pytest.raises(ValueError, match="runtime must be one of"):
        dataclasses.replace(A10G_DP4, runtime="conda")
