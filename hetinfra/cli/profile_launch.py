"""``hetinfra profile OUT --launch``: measure a plan's unmeasured units on the clouds before running it.

For each unit of plan.json whose rates are extrapolated (or every unit with ``--all``) one SkyPilot
task YAML is written to ``OUT/profile/<unit>.yaml``: the planned instance (cloud, region, instance
type, nodes), the pinned vLLM image (``docker:vllm/vllm-openai:v<deploy.vllm_version>``), ``vllm
serve`` with the planned layout (-tp, -pp, the unit's --max-model-len) and ``--load-format dummy``
(random weights of the right shapes: no gated download, the same step times), then ``vllm bench
serve`` over the plan's classes (random data of each class's input and output tokens) at a sweep of
request rates around the unit's planned per-replica rate, saving each run's result JSON at the
objective's statistic (``--metric-percentiles 99`` for p99).

``OUT/profile/collect.sh`` copies the results back (rsync over SkyPilot's SSH config), turns them
into ``OUT/profile/profiles.csv`` with ``hetinfra profile-import`` (rows carry their statistic and
vLLM version), and takes the clusters down; add that CSV to the spec's ``profiles:`` and the next
``plan`` uses those rates as measured. The launch itself runs the ``sky`` command (``sky launch
--yes``); SkyPilot's library is never imported here.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hetinfra.errors import InvalidInputError, ProviderError
from hetinfra.facts import fit_label

if TYPE_CHECKING:
    from hetinfra.document import Allocation, Plan
    from hetinfra.document.sections import ModelEntry, RequestClass

__all__ = ["BenchTask", "bench_tasks", "render_task", "write_tasks", "launch"]

#: request rates of each class's sweep, as multiples of the unit's planned per-replica rate
RATE_STEPS = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0)
NUM_PROMPTS = 200
#: hours a task takes besides the benchmark runs: instance start, image pull, engine load
SETUP_HOURS = 0.25


@dataclass(frozen=True)
class BenchTask:
    unit: str  # deployment unit name
    cluster: str
    alloc: "Allocation"
    model: "ModelEntry"
    classes: tuple["RequestClass", ...]
    rates: dict[str, tuple[float, ...]]  # class name -> request rates of its sweep
    hours: float
    cost_usd: float | None  # on demand, as launched; None: the on-demand price is not known


def bench_tasks(doc: "Plan", all_units: bool = False,
                on_demand: dict[tuple[str, str, str], float] | None = None) -> list[BenchTask]:
    """One task per unit to measure: the extrapolated ones (``all_units``: every unit). ``on_demand``:
    on-demand $/h by (cloud, region, instance type), for spot units (see :func:`launch_price`)."""
    out = []
    for a in doc.allocations:
        if a.custom_cloud or (not all_units and a.confidence != "extrapolated"):
            continue
        m = doc.model(a.model)
        routed = {c for c, es in (doc.routing.get(a.model) or {}).items()
                  if any(e.unit == a.unit and float(e.rps) > 0 for e in es)}
        classes = tuple(c for c in m.classes if c.name in routed) or tuple(m.classes)
        per_replica = a.target_qps_per_replica or (a.routed_rps or 1.0) / max(a.count, 1)
        rates = {c.name: tuple(round(max(per_replica, 0.05) * k, 3) for k in RATE_STEPS) for c in classes}
        seconds = sum(NUM_PROMPTS / r + 30 for rs in rates.values() for r in rs)
        hours = SETUP_HOURS + seconds / 3600
        price = launch_price(a, on_demand)
        out.append(BenchTask(a.deployment_unit, fit_label(f"hetinfra-profile-{a.deployment_unit}"), a, m,
                             classes, rates, round(hours, 3),
                             None if price is None else round(price * a.nodes_per_replica * hours, 2)))
    return out


def launch_price(a: "Allocation", on_demand: dict[tuple[str, str, str], float] | None = None) -> float | None:
    """$/h of one instance of what the benchmark task launches: ON DEMAND (``use_spot: false``: a
    measurement must not be preempted half-way), whatever the unit's purchase option. A spot unit's
    on-demand price comes from the plan (its on-demand fallback, or a committed unit's on-demand
    price), else from ``on_demand`` ((cloud, region, instance type) -> $/h of the offers); None when
    neither knows it (the caller says so rather than quoting the spot price)."""
    if a.on_demand_price_per_instance_usd_per_hour is not None:
        return float(a.on_demand_price_per_instance_usd_per_hour)
    if not a.spot:
        return float(a.price_per_instance_usd_per_hour)
    if a.ondemand_fallback is not None:
        return float(a.ondemand_fallback.price_per_hour)
    return (on_demand or {}).get((a.cloud, a.region, a.instance_type))


def _statistic(model: "ModelEntry") -> str:
    return model.slo.percentile or "p99"


def _lora_flags(a: "Allocation", model: str, source: str) -> tuple[list[str], list[str]]:
    """(the engine's LoRA flags, the benchmark's ``--lora-modules`` picking one held adapter at random per
    request) of a unit with adapters, from the one engine module; ([], []) for a base unit."""
    from hetinfra.compile.router_adapters import unit_adapters

    held = unit_adapters(a)
    if held is None:
        return [], []
    from hetinfra.compile.engine import adapter_flags
    from hetinfra.compile.unit import Serves

    adapters, slots = held
    return adapter_flags(Serves(model, source, adapters, "colocated", slots)), ["--lora-modules", *(x.name for x in adapters)]


def _run_script(t: BenchTask, plan: "Plan") -> str:
    a, m = t.alloc, t.model
    source = m.source
    stat = _statistic(m)
    pct = stat[1:] if stat.startswith("p") else "50"
    serve = ["vllm", "serve", source, "--tensor-parallel-size", str(a.tp), "--pipeline-parallel-size", str(a.pp),
             "--max-model-len", str(plan.max_model_len(a)), "--load-format", "dummy", "--port", "8000"]
    lora = _lora_flags(a, m.name, source)  # issue 38: measure the LoRA engine the plan runs
    serve += lora[0]
    lines = ["set -euo pipefail", "mkdir -p ~/hetinfra-profile", shlex.join(serve) + " > ~/hetinfra-profile/serve.log 2>&1 &",
             "for i in $(seq 1 180); do curl -sf localhost:8000/health && break; sleep 10; done"]
    for k, c in enumerate(t.classes):
        for r in t.rates[c.name]:
            bench = ["vllm", "bench", "serve", "--backend", "vllm", "--model", source, "--base-url", "http://localhost:8000",
                     "--dataset-name", "random", "--random-input-len", str(c.input_tokens),
                     "--random-output-len", str(c.output_tokens), "--ignore-eos", "--request-rate", str(r),
                     "--num-prompts", str(NUM_PROMPTS), "--percentile-metrics", "ttft,tpot,itl,e2el",
                     "--metric-percentiles", pct, "--save-result", "--result-dir", "hetinfra-profile",
                     "--result-filename", f"class{k}-{r}.json", *lora[1]]
            lines.append("cd ~ && " + shlex.join(bench))
    return "\n".join(lines) + "\n"


def render_task(t: BenchTask, plan: "Plan") -> str:
    """The SkyPilot task YAML of ``t`` (text; the CLI never imports SkyPilot)."""
    import yaml

    from hetinfra.compile.engine import vllm_image

    a = t.alloc
    resources = {"infra": f"{a.cloud}/{a.region}", "instance_type": a.instance_type,
                 "accelerators": f"{a.gpu}:{a.gpus_per_instance}", "use_spot": False,
                 "image_id": f"docker:{vllm_image(plan.deploy.vllm_version)}"}
    doc = {"name": t.cluster, "resources": resources, "num_nodes": a.nodes_per_replica,
           "envs": {"HETINFRA_UNIT": t.unit, "HETINFRA_STATISTIC": _statistic(t.model)},
           "run": _run_script(t, plan)}
    return yaml.safe_dump(doc, sort_keys=False)


def _collect_script(tasks: list[BenchTask], plan: "Plan", out: Path) -> str:
    version = plan.deploy.vllm_version or ""
    lines = ["#!/bin/sh", "# copy the benchmark results back, make profiles.csv, take the clusters down", "set -eu",
             f"cd {shlex.quote(str(out))}"]
    for t in tasks:
        a, slo = t.alloc, t.model.slo
        lines += [f"mkdir -p results/{t.unit}",
                  f"rsync -a {t.cluster}:hetinfra-profile/ results/{t.unit}/",
                  shlex.join(["hetinfra", "profile-import", "--gpu", a.gpu, "--tp", str(a.tp), "--pp", str(a.pp),
                              "--ttft-ms", str(slo.ttft_ms), "--tpot-ms", str(slo.tpot_ms),
                              "--statistic", _statistic(t.model), "--model", t.model.name,
                              "--vllm-version", version, "--merge", "--out", "profiles.csv"])
                  + f" results/{t.unit}/*.json",
                  shlex.join(["sky", "down", "--yes", t.cluster])]
    return "\n".join(lines) + "\n"


def snapshot_on_demand() -> dict[tuple[str, str, str], float]:
    """On-demand $/h by (cloud, region, instance type) in the embedded snapshot (no network)."""
    from hetinfra.price_feeds.load import load_offers

    snap, _ = load_offers("snapshot")
    return {(o.cloud, o.region, o.instance_type): float(o.price(False)) for o in snap.offers
            if o.price(False) is not None}


def write_tasks(doc: "Plan", out: Path, all_units: bool = False,
                on_demand: dict[tuple[str, str, str], float] | None = None) -> tuple[list[BenchTask], list[Path]]:
    """Write OUT/profile/<unit>.yaml for each task and OUT/profile/collect.sh, all or none
    (fileio.atomic_write_texts): they were written one by one, so a collect.sh that could not be
    written left the tasks before it, and an OUT/profile that is a file was a FileExistsError
    traceback. A write that fails is exit 2 naming the folder."""
    from hetinfra.fileio import atomic_write_texts

    if on_demand is None and any(a.spot for a in doc.allocations):
        on_demand = snapshot_on_demand()
    tasks = bench_tasks(doc, all_units, on_demand)
    folder = out / "profile"
    paths = [folder / f"{t.unit}.yaml" for t in tasks]
    if not tasks:
        return tasks, paths
    collect = folder / "collect.sh"
    try:
        atomic_write_texts({**{p: render_task(t, doc) for t, p in zip(tasks, paths)},
                            collect: _collect_script(tasks, doc, folder)})
        collect.chmod(0o755)
    except OSError as exc:
        raise InvalidInputError(f"cannot write the benchmark tasks into {folder}: {exc.strerror or exc}",
                                hint=f"make {folder} a folder you can write (move aside what is there)") from None
    return tasks, paths


def launch(tasks: list[BenchTask], paths: list[Path], sky: str = "sky") -> None:
    """``sky launch --yes -c <cluster> <task.yaml>`` for each task (ProviderError, exit 4, on failure)."""
    import shutil
    import subprocess

    from hetinfra.procs import run_group

    exe = shutil.which(sky)
    if exe is None:
        raise ProviderError(f"the `{sky}` command is not on PATH", hint="pip install 'skypilot[aws,gcp,azure]' and "
                                                                          "run `sky check`")
    from hetinfra import facts

    for t, p in zip(tasks, paths):
        try:
            res = run_group([exe, "launch", "--yes", "-c", t.cluster, str(p)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, timeout=facts.SKY_LAUNCH_TIMEOUT_S)
        except subprocess.TimeoutExpired:  # run_group stopped the launch's whole process group first
            raise ProviderError(f"sky launch of {p.name} did not finish within {facts.SKY_LAUNCH_TIMEOUT_S:g} s; it "
                                "was stopped", hint=f"see `sky status {t.cluster}` (the cluster may be up: `sky down "
                                                    f"{t.cluster}` if it is), then run `hetinfra profile OUT "
                                                    "--launch` again") from None
        if res.returncode != 0:
            tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or [""]
            raise ProviderError(f"sky launch of {p.name} failed (exit {res.returncode}): {tail[0]}",
                                hint="see `sky status`; fix the cause and run `hetinfra profile OUT --launch` again")


def require_plan(out: Path) -> "Plan":
    from hetinfra.document import load_plan

    if not out.exists():
        raise InvalidInputError(f"{out}: no such plan directory", hint="pass the --out directory of `hetinfra plan`")
    return load_plan(out)
