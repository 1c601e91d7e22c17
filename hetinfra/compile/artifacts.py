"""Write a plan's artifacts atomically: ``plan.json``, ``skypilot/<unit>.yaml`` (and
``skypilot/<service>-gateway.yaml`` when ``deploy.gateway.enabled``),
``pulumi/<cloud>/`` projects and ``router/weights.json``.

The whole out dir is written whole or not at all: a copy of it (hard links) is built beside it,
the artifacts are written into the copy, and the copy is swapped in (``hetinfra.fileio.staged_dir``;
state.json, which `apply` owns, is taken fresh at the swap). A failure part-way (a read-only file,
a full disk, a clashing name) leaves the old out dir as it was, and a reader never sees a
half-written plan.
"""

from __future__ import annotations

from pathlib import Path

from hetinfra.catalog.gpus import serving_precision
from hetinfra.compile.checkpoint import served_checkpoint
from hetinfra.errors import InvalidInputError
from hetinfra.facts import VLLM_PORT
from hetinfra.fileio import atomic_write_text, dumps_strict, replace_dir, staged_dir


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

    An unwritable ``out`` (or one under a file) is an InvalidInputError (exit 2), out unchanged.
    """
    if out.exists() and not out.is_dir():
        raise InvalidInputError(f"--out {out} exists and is not a directory", hint="choose another --out")
    # the document's model holds for what every later stage reads (imported here: building the
    # models costs ~0.1 s, which `plan` without --out need not pay)
    from hetinfra.document import Plan

    Plan.parse(plan, out / "plan.json")
    try:
        with staged_dir(out) as stage:
            written = _write_artifacts(stage, plan)
    except OSError as exc:
        where = Path(exc.filename).name if exc.filename else out
        raise InvalidInputError(f"cannot write the plan to --out {out} ({where}: {exc.strerror or exc}); nothing "
                                "was changed there", hint="choose a writable folder that is not under a file") from None
    return {kind: [out / p.relative_to(stage) for p in paths] for kind, paths in written.items()}


def _write_artifacts(out: Path, plan: dict) -> dict[str, list[Path]]:
    from hetinfra.compile.pulumi_project import write_projects
    from hetinfra.compile.router import litellm_config, router_weights
    from hetinfra.compile.skypilot import render_all
    from hetinfra.compile.skypilot_gateway import gateway_task_name, render_gateway_task

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
    atomic_write_text(out / "router" / "weights.json", dumps_strict(weights, indent=2) + "\n")
    atomic_write_text(out / "router" / "litellm.yaml",
                      litellm_config(weights).replace("{port}", str((plan.get("deploy") or {}).get("port", VLLM_PORT))))
    written = {}
    if (plan.get("deploy") or {}).get("target") == "kubernetes":  # only then: other plans' trees stay as they were
        from hetinfra.compile.kubernetes import write_kubernetes

        written["kubernetes"] = write_kubernetes(out, plan, sky_units(plan, include_mixed=True))
    atomic_write_text(out / "plan.json", dumps_strict(plan, indent=2) + "\n")
    return {**written, "plan": [out / "plan.json"], "skypilot": [out / "skypilot" / n for n in sorted(sky)],
            "pulumi": projects, "router": [out / "router" / "weights.json", out / "router" / "litellm.yaml"]}
