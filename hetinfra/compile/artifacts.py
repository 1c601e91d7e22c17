"""Write a plan's artifacts atomically: ``plan.json``, ``skypilot/<unit>.yaml`` (and
``skypilot/<service>-gateway.yaml`` when ``deploy.gateway.enabled``),
``pulumi/<cloud>/`` projects and ``router/weights.json``.

Each file is written to a temporary name and renamed into place; the ``skypilot/`` folder is
built beside the old one and swapped in (``hetinfra.fileio``), so a reader never sees a
half-written plan.
"""

from __future__ import annotations

import json
from pathlib import Path

from hetinfra.catalog.gpus import serving_precision
from hetinfra.compile.checkpoint import served_checkpoint
from hetinfra.errors import InvalidInputError
from hetinfra.fileio import atomic_write_text, replace_dir
from hetinfra.facts import VLLM_PORT


def expand_stages(allocations: list[dict]) -> list[dict]:
    """Allocations as groups of identical instances: a mixed-GPU pipeline becomes one group per
    stage (its instance type, GPU and price); others are returned as they are."""
    out = []
    for a in allocations:
        if not a.get("stages"):
            out.append(a)
            continue
        for s in a["stages"]:
            out.append(dict(a, instance_type=s["instance_type"], gpu=s["gpu"], gpus_per_instance=s["gpus"],
                            instances=a["count"], price_per_instance_usd_per_hour=s["price_usd_per_hour"],
                            cost_usd_per_hour=s["price_usd_per_hour"] * a["count"], stages=None))
    return out



def sky_units(plan: dict, *, include_mixed: bool = False) -> list:
    """Deployment units of the plan's allocations on IaC clouds; mixed-GPU pipelines (no SkyPilot
    task: a task has one accelerator type) only with ``include_mixed`` (the Pulumi stacks).

    A unit's boot disk is what :func:`hetinfra.compile.disk.disk_gb` gives the Pulumi path, on the
    largest OS image among the clouds it may fail over to."""
    from hetinfra.compile.disk import disk_gb
    from hetinfra.compile.skypilot import Alternate, SkyUnit

    models = {m["name"]: m for m in plan["models"]}
    deploy = plan.get("deploy") or {}
    units = []
    for a in plan["allocations"]:
        if a["skypilot_task"] is None and not (include_mixed and a.get("stages")):  # custom cloud, or mixed
            continue
        m = served_checkpoint(models[a["model"]], a)  # a variant's source and precision
        alternates = tuple(Alternate(x["cloud"], x["region"], x["instance_type"], x["price_per_hour"])
                           for x in a.get("alternates") or ())
        disk = max(disk_gb(plan, dict(a, cloud=c)) for c in {a["cloud"]} | {x.cloud for x in alternates})
        units.append(SkyUnit(
            name=a["deployment_unit"], service_model=a["model"], source=m["source"], cloud=a["cloud"],
            region=a["region"], instance_type=a["instance_type"], gpu=a["gpu"], gpus_per_instance=a["gpus_per_instance"],
            tp=a["tp"], pp=a["pp"], engines_per_instance=a["engines_per_instance"], replicas=a["count"],
            nodes=a.get("nodes_per_replica"),
            spot=a["spot"], precision=serving_precision(m["precision"], a["gpu"]), max_model_len=a.get("max_model_len") or m["max_model_len"],
            layer_partition=tuple(a["layer_partition"]) if a.get("layer_partition") else None,
            port=deploy.get("port", VLLM_PORT),
            stages=tuple((s["instance_type"], s["gpu"]) for s in a["stages"]) if a.get("stages") else None,
            target_qps_per_replica=a.get("target_qps_per_replica") if deploy.get("autoscale") else None,
            alternates=alternates, ondemand_fallback=bool(a.get("ondemand_fallback")) and a["spot"],
            runtime=deploy.get("runtime", "container"), vllm_version=deploy.get("vllm_version"), disk_size=disk))
    return units


def write_plan(out: Path, plan: dict) -> dict[str, list[Path]]:
    """Write every artifact under ``out``; returns what was written by kind.

    plan.json is written last, so a reader that sees a new plan.json also sees its tasks,
    projects and router weights.
    """
    from hetinfra.compile.pulumi_project import write_projects
    from hetinfra.compile.router import litellm_config, router_weights
    from hetinfra.compile.skypilot import render_all
    from hetinfra.compile.skypilot_gateway import gateway_task_name, render_gateway_task

    if out.exists() and not out.is_dir():
        raise InvalidInputError(f"--out {out} exists and is not a directory")
    # the document's model holds for what every later stage reads (imported here: building the
    # models costs ~0.1 s, which `plan` without --out need not pay)
    from hetinfra.document import Plan

    Plan.parse(plan, out / "plan.json")
    units = sky_units(plan)
    sky = render_all(units)
    if units and (((plan.get("deploy") or {}).get("gateway") or {}).get("enabled")):
        fname = f"{gateway_task_name(plan['service'])}.yaml"
        if fname in sky:
            raise InvalidInputError(f"a unit is named like the gateway task ({fname})")
        sky[fname] = render_gateway_task(plan, units)
    replace_dir(out / "skypilot", sky)
    projects = write_projects(out, plan)
    weights = router_weights(plan)
    atomic_write_text(out / "router" / "weights.json", json.dumps(weights, indent=2) + "\n")
    atomic_write_text(out / "router" / "litellm.yaml",
                      litellm_config(weights).replace("{port}", str((plan.get("deploy") or {}).get("port", VLLM_PORT))))
    written = {}
    if (plan.get("deploy") or {}).get("target") == "kubernetes":  # only then: other plans' trees stay as they were
        from hetinfra.compile.kubernetes import write_kubernetes

        written["kubernetes"] = write_kubernetes(out, plan, sky_units(plan, include_mixed=True))
    atomic_write_text(out / "plan.json", json.dumps(plan, indent=2) + "\n")
    return {**written, "plan": [out / "plan.json"], "skypilot": [out / "skypilot" / n for n in sorted(sky)],
            "pulumi": projects, "router": [out / "router" / "weights.json", out / "router" / "litellm.yaml"]}
