"""`hetinfra plan --out` writes SkyPilot tasks that SkyPilot itself loads, validates and prices
as the plan did (offline, on the shared catalog extract)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SERVICES = sorted((REPO / "services").glob("*.yaml"))


@pytest.fixture(scope="module")
def planned(example_plans):
    """The README's plans of the examples in services/ (tests/conftest.py example_plans: made once per run)."""
    return {spec.stem: example_plans[spec.stem][:2] for spec in SERVICES}


def test_one_task_per_allocation(planned):
    for name, (d, plan) in planned.items():
        files = sorted(p.name for p in (d / "skypilot").iterdir() if not p.name.endswith("-gateway.yaml"))
        assert files == sorted(Path(a["skypilot_task"]).name for a in plan["allocations"] if not a["experimental"]), name
        # mixed-GPU pipelines (services/mixed-pipeline.yaml) are Pulumi-only: no task
        assert all(a["skypilot_task"] is None for a in plan["allocations"] if a["experimental"]), name


def test_tasks_load_validate_and_price_as_planned(planned, sky_offline):
    sky, private_home = sky_offline
    from sky.serve import serve_utils

    from sky import catalog

    checked = 0
    for name, (d, plan) in planned.items():
        for a in (a for a in plan["allocations"] if not a["experimental"]):
            # The shared extract is partial (no g4dn, for one; GCP and Azure US regions only): units
            # outside it cannot be priced by SkyPilot here.
            if not catalog.instance_type_exists(a["instance_type"], clouds=a["cloud"]):
                continue
            if a["region"] not in {r.name for r in catalog.get_region_zones_for_instance_type(
                    a["instance_type"], a["spot"], clouds=a["cloud"])}:
                continue
            checked += 1
            task = sky.Task.from_yaml(str(d / a["skypilot_task"]))
            serve_utils.validate_service_task(task, pool=False)
            # the planned offer first, then its alternates in the plan's order (`ordered`: tried in turn)
            places = [(str(r.cloud).lower(), r.region, r.instance_type) for r in task.resources]
            assert places == [(a["cloud"], a["region"], a["instance_type"])] + [
                (x["cloud"], x["region"], x["instance_type"]) for x in a["alternates"]], a["unit"]
            assert isinstance(task.resources, list) or not a["alternates"]
            for res in task.resources:  # same GPUs, purchase option, engine, disk and port everywhere
                assert res.accelerators == {a["gpu"]: a["gpus_per_instance"]} and res.use_spot is a["spot"]
                assert set(res.image_id.values()) == {f"docker:vllm/vllm-openai:v{plan['deploy']['vllm_version']}"}
                assert res.disk_size >= 100 and res.ports == [str(plan["deploy"]["port"])]
            assert task.service.use_ondemand_fallback is bool(a["ondemand_fallback"]) and (
                task.service.dynamic_ondemand_fallback is (True if a["ondemand_fallback"] else None))
            assert task.service.min_replicas == a["count"]
            assert f"--tensor-parallel-size {a['tp']}" in task.run
            if not private_home:
                continue
            from sky import check as sky_check
            from sky import dag as dag_lib
            from sky import global_user_state, optimizer
            from sky.clouds import cloud as cloud_lib

            global_user_state.set_allowed_clouds(sky_check._get_workspace_allowed_clouds("default"), "default")
            global_user_state.set_enabled_clouds(["AWS", "GCP", "Azure"], cloud_lib.CloudCapability.COMPUTE, "default")
            with dag_lib.Dag() as dag:
                dag.add(task)
            optimizer.Optimizer.optimize(dag, quiet=True)
            best = task.best_resources
            assert (best.instance_type, best.region) == (a["instance_type"], a["region"]), f"{name}: {a['unit']}"
            # a committed allocation runs an on-demand VM (the commitment is a billing discount)
            price = a.get("on_demand_price_per_instance_usd_per_hour", a["price_per_instance_usd_per_hour"])
            assert best.get_cost(3600) * task.num_nodes == pytest.approx(
                price * a["nodes_per_replica"], rel=0.01), a["unit"]
    assert checked >= len(SERVICES) + 2
