"""``hetinfra destroy`` and ``hetinfra status``: the mirror of apply, driven by ``OUT/state.json``.

Destroy runs ``pulumi destroy`` on every cloud's stack the state lists and ``sky.serve.down``
on every SkyPilot unit, one step at a time with the state rewritten after each; the same
resume rule as apply holds. A plain ``cd OUT/pulumi/<cloud> && pulumi destroy`` does the
Pulumi part as well (then run ``hetinfra status`` to see what the state still lists).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from hetinfra.deploy import preflight, preview, pulumi_driver, sky_driver
from hetinfra.deploy.apply import TARGETS, confirm, changes, render_preview, serve_down, target_paths
from hetinfra.deploy.steps import PulumiDestroy, SkyDown, Step, run_steps
from hetinfra.deploy.state import DeployState, plan_sha
from hetinfra.document import load_plan
from hetinfra.errors import InvalidInputError
from hetinfra.fileio import json_value, present
from hetinfra.httpget import get

KUBE_PROJECT = "kubernetes"  # hetinfra.deploy.kube.PROJECT (not imported here: it loads the kubernetes client)


@sky_driver.in_session
def destroy(out: Path, *, target: str = "all", yes: bool = False, echo: Callable[[str], None] = print,
            ask: Callable[[str], bool] | None = None, pulumi_command=None, env: dict | None = None,
            report: dict | None = None) -> DeployState:
    """Tear down what the state lists for ``target``; ``report``, when given, is filled with what
    ``destroy --json`` prints (``changes``, then the results)."""
    if target not in TARGETS:
        raise InvalidInputError(f"--target {target!r}: choose one of {', '.join(TARGETS)}")
    env = dict(os.environ) if env is None else env
    if not present(out / "state.json"):
        raise InvalidInputError(f"no state.json in {out}: nothing was deployed from here",
                                hint="resources made by hand with `pulumi up` are removed with `pulumi destroy`")
    state, report = DeployState.load(out), {} if report is None else report
    if target in ("kubernetes", "all") and _kubernetes_part(out, state, target=target, yes=yes, echo=echo, ask=ask,
                                                            pulumi_command=pulumi_command, env=env, report=report):
        return state
    paths, now = target_paths(target), state.model
    gone = [a for a in now.allocations if a.path in paths]
    rows = changes(now.allocations, [a for a in now.allocations if a.path not in paths])
    pulumi_clouds = sorted((set(now.pulumi) - {KUBE_PROJECT})
                           | {a.cloud for a in gone if a.path == "pulumi"}) if "pulumi" in paths else []
    sky_units = sorted({a.deployment_unit for a in gone if a.path == "skypilot"})
    steps: list[Step] = [PulumiDestroy(c) for c in pulumi_clouds] + ([SkyDown(tuple(sky_units))] if sky_units else [])
    sky_rows = preview.sky_changes(state.running, [], sky_units)
    report.update(command="destroy", out=str(out), target=target, destroyed=False,
                  changes=preview.changes_json(rows, [], sky_rows))
    if not steps:
        echo("Nothing to destroy: the state lists nothing for this target.")
        report.update(preview.result_json(state, out))
        return state
    text = render_preview(rows, f"hetinfra destroy {out} (target: {target})")
    confirm("\n".join(t for t in (text, preview.render_changes([], sky_rows)) if t), yes, echo, ask)
    _run_destroy(out, state, steps, pulumi_clouds, sky_units, pulumi_command=pulumi_command, env=env, echo=echo)
    report.update(preview.result_json(state, out), destroyed=True)
    echo(f"Destroyed; {len(state.running)} unit(s) still listed in {state.path}")
    return state


def _run_destroy(out: Path, state: DeployState, steps: list[Step], pulumi_clouds: list[str], sky_units: list[str], *,
                 pulumi_command, env: dict, echo: Callable[[str], None]) -> None:
    """The confirmed steps: the tools first, then each step recorded in state.json (steps.run_steps)."""
    if pulumi_clouds:
        plan = _plan_dict(out)
        pulumi_driver.check_ready(pulumi_clouds, pulumi_driver.backend_urls(plan, pulumi_clouds), env)
        command = pulumi_command or pulumi_driver.pulumi_command()
    if sky_units:
        sky_driver.sky_module()
    ids = [step.id for step in steps]
    state.begin("destroy", plan_sha({"destroy": ids}), ids)

    def perform(step: Step) -> None:
        if isinstance(step, PulumiDestroy):
            cloud = step.project
            stack = _stack(state, cloud)
            pulumi_driver.PulumiProject(out / "pulumi" / cloud, stack, command, on_output=echo,
                                        plan=plan).destroy()
            state.replace_running(lambda a: not (a.path == "pulumi" and a.cloud == cloud), [])
            state.forget_stack(cloud)
        else:
            serve_down(state, list(step.units))

    run_steps(out, state, steps, perform, echo)
    state.finish()


def _stack(state: DeployState, project: str) -> str:
    """The Pulumi stack state.json records for ``project`` (a cloud or the kubernetes project)."""
    last = state.model.pulumi.get(project)
    return last.stack if last else "prod"


def _kubernetes_part(out: Path, state: DeployState, *, target: str, yes: bool, echo, ask, pulumi_command, env: dict,
                     report: dict) -> bool:
    """destroy's part on deploy.target kubernetes (--target kubernetes or all): True when nothing is
    left for the other paths."""
    now = state.model
    if now.kubernetes and KUBE_PROJECT not in now.pulumi:
        raise InvalidInputError(f"{out}/state.json lists Kubernetes objects that an earlier hetinfra applied without "
                                "Pulumi", hint=f"run `hetinfra apply {out} --target kubernetes` once (its Pulumi "
                                               "project adopts them by server-side apply), then destroy")
    if KUBE_PROJECT not in now.pulumi:
        return False
    _destroy_kubernetes(out, state, target=target, yes=yes, echo=echo, ask=ask, pulumi_command=pulumi_command,
                        env=env, report=report)
    left = state.model
    return target == "kubernetes" or not (left.allocations or left.pulumi)


def _destroy_kubernetes(out: Path, state: DeployState, *, target: str, yes: bool, echo, ask, pulumi_command,
                        env: dict, report: dict) -> None:
    """``pulumi destroy`` of OUT/pulumi/kubernetes/ (deploy.target kubernetes), one step as for a VM
    stack; the namespace stays (the program retains it)."""
    from hetinfra.deploy import kube

    rows = changes(state.running, [a for a in state.running if a.path != KUBE_PROJECT])
    report.update(command="destroy", out=str(out), target=target, destroyed=False,
                  changes=preview.changes_json(rows, [], []))
    confirm(render_preview(rows, f"hetinfra destroy {out} (target: {target})"), yes, echo, ask)
    plan = _plan_dict(out)
    # the kubeconfig is the project's credential (the contexts recorded by apply); the rest as for a VM stack
    command = preflight.gather([
        ("binaries", lambda: pulumi_command or pulumi_driver.pulumi_command()),
        ("settings", lambda: pulumi_driver.check_passphrase(
            [KUBE_PROJECT], pulumi_driver.backend_urls(plan, [KUBE_PROJECT]), env))])[0]
    stack = _stack(state, KUBE_PROJECT)
    steps = [PulumiDestroy(KUBE_PROJECT)]
    ids = [step.id for step in steps]
    state.begin("destroy", plan_sha({"destroy": ids}), ids)

    def perform(_step: Step) -> None:
        pulumi_driver.PulumiProject(out / "pulumi" / KUBE_PROJECT, stack, command, on_output=echo, plan=plan).destroy()
        kube.forget(state)

    run_steps(out, state, steps, perform, echo)
    state.finish()
    report.update(preview.result_json(state, out), destroyed=True)
    echo(f"Destroyed; {len(state.running)} unit(s) still listed in {state.path}")


def render_status(out: Path, *, env: dict | None = None, timeout_s: float = 2.0) -> str:
    """What runs (from state.json), its live replicas and cost as last read from the clouds
    (state.json ``live``, hetinfra.deploy.drift; read by hetinfra.deploy.live_read), and, for every gateway recorded, its units' health
    and live weights (its ``/admin/weights``, sent the first key of ``HETINFRA_API_KEY``)."""
    from hetinfra.deploy.live_read import live_lines

    if not present(out / "state.json"):
        return f"{out}: nothing deployed (no state.json)"
    state = DeployState.load(out).model
    running = state.allocations
    lines = [f"service {state.service}: {len(running)} unit(s) running, "
             f"${sum(a.cost_usd_per_hour for a in running):,.2f}/h (state updated {state.updated_at})"]
    for a in sorted(running, key=lambda a: (a.path, a.cloud, a.region, a.deployment_unit)):
        urls = state.endpoints.get(a.deployment_unit, [])
        # per group of identical instances: a heterogeneous bundle's roles (or a mixed pipeline's stages) apart
        what = " + ".join(f"{g.instances:>3} x {g.instance_type} ({g.gpu})" for g in a.instance_groups())
        lines.append(f"  {a.path:<8} {a.deployment_unit:<52} {what} {', '.join(urls) or 'no endpoint yet'}")
    if running:
        lines += live_lines(state.live)
    op = state.operation
    if op:
        lines.append(f"last operation: {op.kind} {op.status} (started {op.started_at})"
                     + (f": {op.error}" if op.error else ""))
        for s in op.steps:
            lines.append(f"  [{s.status:<7}] {s.id}" + (f": {s.error}" if s.error else ""))
        if op.status != "done":
            lines.append(f"run `hetinfra {op.kind} {out}` again to resume")
    for fleet, url in sorted(state.gateways.items()):
        lines += gateway_status(fleet, url, env=os.environ if env is None else env, timeout_s=timeout_s)
    return "\n".join(lines)


def _plan_dict(out: Path) -> dict | None:
    """OUT/plan.json, parsed and checked, as the dict the Pulumi driver takes (None: there is none)."""
    return load_plan(out).to_dict() if present(out / "plan.json") else None


def _weights_answer(doc: object) -> tuple[dict | None, dict]:
    """(units, models) of a gateway's /admin/weights answer: unit -> its backends (mappings with a
    boolean ``healthy`` and a count ``outstanding``), model -> class -> unit -> weight; (None, {})
    where the answer is not that shape (a server at that URL answering other JSON was an
    AttributeError, a weight '0.5' a ValueError)."""
    def backend(b: object) -> bool:
        return isinstance(b, dict) and isinstance(b.get("healthy", False), bool) and isinstance(
            b.get("outstanding", 0), int)

    def weights(w: object) -> bool:
        return isinstance(w, dict) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in w.values())

    units = doc.get("units", {}) if isinstance(doc, dict) else None
    models = doc.get("models", {}) if isinstance(doc, dict) else None
    if not (isinstance(units, dict) and all(isinstance(bs, list) and all(map(backend, bs)) for bs in units.values())
            and isinstance(models, dict) and all(isinstance(c, dict) and all(map(weights, c.values()))
                                                 for c in models.values())):
        return None, {}
    return units, models


def gateway_status(fleet: str, url: str, *, env: dict, timeout_s: float = 2.0) -> list[str]:
    """Lines for one gateway: per-unit health (healthy/replicas, in flight) and per-class live weights;
    one clear line when it cannot be reached or refuses the key."""
    import urllib.error
    import urllib.request

    from hetinfra.clientkeys import first_client_key

    base = url.rstrip("/").removesuffix("/v1")
    try:  # a key the gateway itself would refuse: this gateway's line says so, the rest of status goes on
        key = first_client_key(env.get("HETINFRA_API_KEY"))
    except InvalidInputError as exc:
        return [f"gateway {fleet} {url}: not asked ({exc.message}; {exc.hint})"]
    req = urllib.request.Request(base + "/admin/weights", headers={"authorization": f"Bearer {key}"} if key else {})
    try:  # an answer that is not HTTP is an OSError (hetinfra.httpget), as no answer is
        doc = json_value(get(req, timeout=timeout_s)[1])
    except urllib.error.HTTPError as exc:
        hint = " (set HETINFRA_API_KEY to a client key)" if exc.code == 401 else ""
        return [f"gateway {fleet} {url}: answered {exc.code}{hint}"]
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        return [f"gateway {fleet} {url}: unreachable ({reason})"]
    units, models = _weights_answer(doc)
    if units is None:
        return [f"gateway {fleet} {url}: answered /admin/weights with something else than a gateway's weights"]
    up = sum(1 for bs in units.values() if any(b.get("healthy") for b in bs))
    lines = [f"gateway {fleet} {url}: {up} of {len(units)} unit(s) healthy"]
    for unit, backends in sorted(units.items()):
        healthy = sum(1 for b in backends if b.get("healthy"))
        inflight = sum(int(b.get("outstanding") or 0) for b in backends)
        lines.append(f"  {'up  ' if healthy else 'DOWN'} {unit:<52} {healthy}/{len(backends)} replica(s) healthy, "
                     f"{inflight} in flight")
    for model, classes in sorted(models.items()):
        lines.append(f"  live weights of {model}:")
        for cls, weights in classes.items():
            shown = ", ".join(f"{u} {w:.2f}" for u, w in sorted(weights.items(), key=lambda kv: -kv[1]))
            lines.append(f"    {cls:<24} {shown or 'no unit'}")
    return lines
