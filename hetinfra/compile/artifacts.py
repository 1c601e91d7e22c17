"""Write a plan's artifacts atomically: ``plan.json``, ``skypilot/<unit>.yaml`` (and
``skypilot/<service>-gateway.yaml`` when ``deploy.gateway.enabled``),
``pulumi/<cloud>/`` projects and ``router/weights.json``.

The whole out dir is written whole or not at all: a copy of it (hard links) is built beside it,
the artifacts are written into the copy, and the copy is swapped in (``hetinfra.outdir.staged_dir``;
state.json, which `apply` owns, is taken fresh at the swap). A failure part-way (a read-only file,
a full disk, a clashing name) leaves the old out dir as it was, and a reader never sees a
half-written plan.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hetinfra.catalog.gpus import serving_precision
from hetinfra.compile.checkpoint import served_checkpoint
from hetinfra.errors import InvalidInputError
from hetinfra.fileio import atomic_write_text, dumps_strict
from hetinfra.outdir import replace_dir, staged_dir

if TYPE_CHECKING:
    from hetinfra.document import Plan


def expand_stages(allocations: list) -> list:
    """Allocations as groups of identical instances (:meth:`hetinfra.document.Allocation.stage_groups`):
    a mixed-GPU pipeline becomes one group per stage (its instance type, GPU and price); others are
    returned as they are. Models give models; plan.json's or state.json's dicts give dicts."""
    from hetinfra.document.allocation import Stage

    out = []
    for a in allocations:
        if not isinstance(a, dict):
            out += a.stage_groups()
        else:
            out += [dict(a, **Stage.model_validate(s).group_fields(a["count"])) for s in a.get("stages") or ()] or [a]
    return out


def sky_units(doc: "Plan", *, include_mixed: bool = False) -> list:
    """Deployment units of the plan's allocations on IaC clouds; mixed-GPU pipelines (no SkyPilot
    task: a task has one accelerator type) and prefill/decode bundles across nodes (which SkyPilot
    cannot run as planned: compile.skypilot.skypilot_refusal) only with ``include_mixed`` (the Pulumi
    stacks, Kubernetes).

    A unit's boot disk is what :func:`hetinfra.compile.disk.disk_gb` gives the Pulumi path, on the
    largest OS image among the clouds it may fail over to."""
    from hetinfra.compile.bundle import bundle_of, hop_plan, role_nodes_of
    from hetinfra.compile.disk import disk_gb
    from hetinfra.compile.router_adapters import unit_adapter_fields
    from hetinfra.compile.skypilot import skypilot_refusal
    from hetinfra.compile.unit import Alternate, DeployedUnit
    deploy = doc.deploy
    units = []
    for a in doc.allocations:
        # no SkyPilot task: a custom cloud, or a mixed pipeline (which only the Pulumi stacks and Kubernetes
        # run, as they do the bundles across nodes that SkyPilot cannot run as planned)
        if include_mixed:
            skipped = a.skypilot_task is None and not a.stages
        else:
            skipped = a.skypilot_task is None or bool(a.stages) or skypilot_refusal(a) is not None
        if skipped:
            continue
        m = served_checkpoint(doc.model(a.model), a)  # a variant's source and precision
        alternates = tuple(Alternate(x.cloud, x.region, x.instance_type, x.price_per_hour) for x in a.alternates)
        disk = max(disk_gb(doc, a, c) for c in {a.cloud} | {x.cloud for x in alternates})
        # a prefill/decode bundle: its roles, and the trimmed plan its node's hop routes with
        # (across nodes: each role's nodes and instance type, and the RDMA network its KV moves over)
        split = {"nodes": a.nodes_per_replica}
        if a.disaggregation is not None:
            split.update(bundle=bundle_of(a), hop_plan=hop_plan(doc, a), hetinfra_package=deploy.gateway.package,
                         role_nodes=role_nodes_of(a))
            split["link"] = a.disaggregation.link if split["role_nodes"] else ""
        units.append(DeployedUnit(
            name=a.deployment_unit, service_model=a.model, source=m.source, cloud=a.cloud, region=a.region,
            instance_type=a.instance_type, gpu=a.gpu, gpus_per_instance=a.gpus_per_instance, tp=a.tp, pp=a.pp,
            engines_per_instance=a.engines_per_instance, replicas=a.count, spot=a.spot, **split,
            precision=serving_precision(m.precision, a.gpu), max_model_len=doc.max_model_len(a),
            layer_partition=tuple(a.layer_partition) if a.layer_partition else None, port=deploy.port,
            stages=tuple((s.instance_type, s.gpu) for s in a.stages) if a.stages else None,
            target_qps_per_replica=a.target_qps_per_replica if deploy.autoscale else None,
            alternates=alternates, ondemand_fallback=bool(a.ondemand_fallback) and a.spot,
            runtime=deploy.runtime, vllm_version=deploy.vllm_version, disk_size=disk,
            **unit_adapter_fields(a)))  # LoRA: --enable-lora ... on every target (compile.engine)
    return units


def write_plan(out: Path, plan: "Plan") -> dict[str, list[Path]]:
    """Write every artifact of ``plan`` under ``out`` (plan.json is its dump, :meth:`Plan.to_dict`);
    returns what was written by kind.

    An unwritable ``out`` (or one under a file) is an InvalidInputError (exit 2), out unchanged.
    """
    if out.exists() and not out.is_dir():
        raise InvalidInputError(f"--out {out} exists and is not a directory", hint="choose another --out")
    try:
        with staged_dir(out) as stage:
            written = _write_artifacts(stage, plan.to_dict(), plan)
    except OSError as exc:
        where = Path(exc.filename).name if exc.filename else out
        raise InvalidInputError(f"cannot write the plan to --out {out} ({where}: {exc.strerror or exc}); nothing "
                                "was changed there", hint="choose a writable folder that is not under a file") from None
    return {kind: [out / p.relative_to(stage) for p in paths] for kind, paths in written.items()}


def _write_artifacts(out: Path, plan: dict, doc: "Plan") -> dict[str, list[Path]]:
    """The artifacts of ``doc``; plan.json and the Pulumi projects' copies are written from ``plan``,
    its dump (the model declares plan.json's keys in the order the file has them)."""
    from hetinfra.compile.pulumi_project import write_projects
    from hetinfra.compile.router import litellm_config, router_weights
    from hetinfra.compile.skypilot import render_all
    from hetinfra.compile.skypilot_gateway import gateway_task_name, render_gateway_task

    units = sky_units(doc)
    sky = render_all(units)
    if units and doc.deploy.gateway.enabled:
        fname = f"{gateway_task_name(doc.service)}.yaml"
        if fname in sky:
            raise InvalidInputError(f"a unit is named like the gateway task ({fname})")
        sky[fname] = render_gateway_task(doc, units)
    replace_dir(out / "skypilot", sky)
    projects = write_projects(out, plan)
    weights = router_weights(doc)
    atomic_write_text(out / "router" / "weights.json", dumps_strict(weights, indent=2) + "\n")
    from hetinfra.compile.router_adapters import adapter_holders  # LoRA: each adapter on its holders

    atomic_write_text(out / "router" / "litellm.yaml", litellm_config(weights, adapters=adapter_holders(doc) or None)
                      .replace("{port}", str(doc.deploy.port)))
    written = {}
    if doc.deploy.target == "kubernetes":  # only then: other plans' trees stay as they were
        from hetinfra.compile.kubernetes import write_kubernetes

        written["kubernetes"] = write_kubernetes(out, plan, sky_units(doc, include_mixed=True))
    atomic_write_text(out / "plan.json", dumps_strict(plan, indent=2) + "\n")
    return {**written, "plan": [out / "plan.json"], "skypilot": [out / "skypilot" / n for n in sorted(sky)],
            "pulumi": projects, "router": [out / "router" / "weights.json", out / "router" / "litellm.yaml"]}
