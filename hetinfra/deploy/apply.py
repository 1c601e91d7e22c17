"""``hetinfra apply``/``destroy``/``status``: turn a plan into running fleets, step by step.

Every unit is deployed by exactly one path:

- ``--target pulumi``: all units through the per-cloud Pulumi stacks (one ``pulumi up`` per
  cloud; within one update Pulumi creates new resources before it deletes removed ones);
- ``--target skypilot``: all units as SkyServe services (``sky.serve.up``/``update``, then
  ``sky.serve.down`` of units that left the plan, after the new ones are up);
- ``--target all`` (default): units on ``deploy.skypilot_clouds`` through SkyPilot, the rest
  through Pulumi.

A unit running through one path is never re-deployed through the other (that would run it
twice): destroy it first. Before anything starts, the preview is shown, confirmation asked
(unless ``--yes``), and every tool and credential the steps need is checked. ``OUT/state.json``
is rewritten after each step; a failed run is resumed by the next ``apply`` of the same plan.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from hetinfra.compile.bundle_nodes import across_nodes_refusal
from hetinfra.compile.skypilot import skypilot_refusal
from hetinfra.deploy import images, preflight, preview, pulumi_driver, sky_driver
from hetinfra.deploy.endpoints import endpoint_lines, gateway_secrets
from hetinfra.deploy.state import DeployState, plan_sha
from hetinfra.deploy.steps import PulumiUp, SkyDown, SkyUp, Step, run_steps
from hetinfra.document import Allocation, Plan
from hetinfra.document.bundle_shape import role_node
from hetinfra.document.state import RunningAllocation
from hetinfra.errors import InvalidInputError
from hetinfra.price_feeds.offers import KNOWN_CLOUDS as IAC_CLOUDS

TARGETS = ("pulumi", "skypilot", "all", "kubernetes")


def target_paths(target: str) -> set[str]:
    """The deploy paths a --target owns ("all" owns both)."""
    return {"pulumi", "skypilot"} if target == "all" else {target}


def load_plan(out: Path) -> Plan:
    """OUT/plan.json as its model (hetinfra.document): InvalidInputError (exit 2) naming the file and
    the first wrong field."""
    from hetinfra.document.load import read_json

    path = out / "plan.json"
    return Plan.parse(read_json(path, what="plan", hint=f"run `hetinfra plan SPEC --out {out}` first"), path)


def sha_of(plan: Plan) -> str:
    """state.json's ``plan_sha256`` of ``plan``: the hash of plan.json's dict (its dump)."""
    return plan_sha(plan.to_dict())


def path_of(alloc: Allocation, target: str, plan: Plan) -> str | None:
    """Which path deploys ``alloc`` under ``target`` (None: not deployable by it)."""
    if alloc.custom_cloud or alloc.cloud not in IAC_CLOUDS:
        return None  # custom clouds: planned, no IaC
    if target == "kubernetes" or (target == "all" and plan.deploy.target == "kubernetes"):
        return "kubernetes"  # OUT/pulumi/kubernetes (which leaves out mixed pipelines no LeaderWorkerSet fits)
    if alloc.stages:  # mixed-GPU pipeline: a SkyPilot task has one accelerator type
        if target == "skypilot":
            raise InvalidInputError(
                f"{alloc.deployment_unit} is a mixed-GPU pipeline, which only the Pulumi stacks deploy",
                hint="run `hetinfra apply OUT --target pulumi` (or all), or plan with allow_mixed_pipelines: false")
        return "pulumi"
    refusal = skypilot_refusal(alloc)
    if refusal:  # a bundle across nodes: the stacks place it, where their own placement and RDMA can
        stacks = across_nodes_refusal(alloc.deployment_unit, alloc.nodes_per_replica, alloc.disaggregation.link,
                                      alloc.cloud, "pulumi")
        if stacks:
            raise stacks
        if target == "skypilot":
            raise InvalidInputError(refusal, hint="run `hetinfra apply OUT --target pulumi` (the stacks place its "
                                                  "nodes in one placement group), or deploy.target: kubernetes "
                                                  "(a LeaderWorkerSet)")
        return "pulumi"
    if target in ("pulumi", "skypilot"):
        return target
    return "skypilot" if alloc.cloud in plan.deploy.skypilot_clouds else "pulumi"


@dataclass
class Change:
    path: str
    cloud: str
    region: str
    instance_type: str
    gpu: str
    spot: bool
    before: int  # instances
    after: int
    before_cost: float
    after_cost: float
    #: a prefill/decode bundle's engines per role, before and after (replan's diff shows them: a
    #: bundle's instances run both roles, so its instance count alone hides what each role gets)
    roles: dict[str, list[int]] = field(default_factory=dict)


def desired(plan: Plan, state: DeployState, target: str) -> list[RunningAllocation]:
    """Allocations that should run after this apply, each tagged with its path."""
    # "all" owns both paths: a unit that left the plan goes, whichever path deployed it.
    paths = target_paths(target)
    new = [RunningAllocation.of(a, p) for a in plan.allocations if (p := path_of(a, target, plan)) in paths]
    return [a for a in state.running if a.path not in paths] + new


def changes(before: list[Allocation], after: list[Allocation],
            label: Callable[[Allocation], str] = lambda a: a.path) -> list[Change]:
    """Instances and $/h per (``label``: the deploy path, cloud, region, type, GPU, spot), before and after."""
    rows: dict[tuple, Change] = {}
    for side, allocs in (("before", before), ("after", after)):
        for a in allocs:
            for g in a.instance_groups():
                key = (label(a), a.cloud, a.region, g.instance_type, g.gpu, a.spot)
                c = rows.setdefault(key, Change(*key, 0, 0, 0.0, 0.0))
                setattr(c, side, getattr(c, side) + g.instances)
                setattr(c, f"{side}_cost", getattr(c, f"{side}_cost") + g.cost_usd_per_hour)
                # a bundle's roles on this group's instances (a heterogeneous bundle's each on its own type)
                for r in a.disaggregation.roles if a.disaggregation is not None else ():
                    if role_node(r, a).instance_type == g.instance_type:
                        c.roles.setdefault(r.role, [0, 0])[side == "after"] += a.count * r.engines
    return [rows[k] for k in sorted(rows)]


def render_preview(rows: list[Change], title: str) -> str:
    lines = [title]
    add = sum(max(0, c.after - c.before) for c in rows)
    rm = sum(max(0, c.before - c.after) for c in rows)
    for c in rows:
        mark = "+" if c.after > c.before else "-" if c.after < c.before else " "
        what = f"{c.instance_type} ({c.gpu})" + (" spot" if c.spot else "")
        lines.append(f"  {mark} {c.path:<8} {c.cloud}/{c.region:<14} {what:<36} {c.before:>3} -> {c.after:<3} "
                     f"${c.before_cost:,.2f}/h -> ${c.after_cost:,.2f}/h")
    before = sum(c.before_cost for c in rows)
    after = sum(c.after_cost for c in rows)
    lines.append(f"Plan: {add} instance(s) to add, {rm} to remove; ${before:,.2f}/h -> ${after:,.2f}/h")
    return "\n".join(lines)


def _unit_conflicts(plan: Plan, state: DeployState, target: str) -> None:
    running = {a.deployment_unit: a.path for a in state.running}
    for a in plan.allocations:
        p = path_of(a, target, plan)
        other = running.get(a.deployment_unit)
        if p and other and other != p:
            raise InvalidInputError(
                f"unit {a.deployment_unit} runs through {other}; deploying it through {p} would run it twice",
                hint=f"hetinfra destroy {state.path.parent} --target {other}  (or apply with --target {other})")


def confirm(preview: str, yes: bool, echo: Callable[[str], None], ask: Callable[[str], bool] | None) -> None:
    echo(preview)
    if yes:
        return
    if ask is None:
        raise InvalidInputError("not asking for confirmation without a terminal", hint="pass --yes to proceed")
    if not ask("Proceed?"):
        raise InvalidInputError("cancelled; nothing was changed")


@dataclass
class Work:
    """What one apply changes: the units running after it and before it, and its steps."""

    after: list[RunningAllocation]
    running: list[RunningAllocation]

    @property
    def new(self) -> list[RunningAllocation]:
        return [a for a in self.after if a not in self.running]

    @property
    def pulumi_clouds(self) -> list[str]:
        return sorted({a.cloud for a in self.after + self.running if a.path == "pulumi"})

    @property
    def sky_new(self) -> list[RunningAllocation]:
        return [a for a in self.new if a.path == "skypilot"]

    @property
    def sky_gone(self) -> list[str]:
        return sorted({a.deployment_unit for a in self.running if a.path == "skypilot"}
                      - {a.deployment_unit for a in self.after})

    @property
    def steps(self) -> list[Step]:
        """Each cloud's stack up, then each new or changed SkyServe unit up, then the gone ones down."""
        return ([PulumiUp(c) for c in self.pulumi_clouds] + [SkyUp(a.deployment_unit) for a in self.sky_new]
                + ([SkyDown(tuple(self.sky_gone))] if self.sky_gone else []))


@dataclass
class Ready:
    """What the steps run with, once preflight passed and the change was confirmed."""

    command: object  # the pulumi CLI
    secrets: dict[str, str]
    stack: str
    pins: dict[str, dict]  # cloud -> the images its up pins
    image_notes: dict[str, list[str]]


@sky_driver.in_session
def apply_plan(out: Path, plan: Plan, *, target: str = "all", yes: bool = False,
               echo: Callable[[str], None] = print, ask: Callable[[str], bool] | None = None, pulumi_command=None,
               env: dict | None = None, force: bool = False, quota_caps=None, update_images: bool = False,
               report: dict | None = None, on_steps: Callable[[], None] | None = None) -> DeployState:
    """Deploy ``plan`` (written under ``out``); returns the final state. See the module docstring.
    ``report``, when given, is filled with what ``apply --json`` prints (``changes``, then the results).
    ``on_steps`` is called once every check passed and the change was confirmed, just before the first
    step is recorded: a failure raised before it changed nothing (replan keeps OUT as it was then)."""
    from hetinfra.deploy.kube import wants_kubernetes

    if target not in TARGETS:
        raise InvalidInputError(f"--target {target!r}: choose one of {', '.join(TARGETS)}")
    env = dict(os.environ) if env is None else env
    report = {} if report is None else report
    # Preflight, part 1: plan.json against its model and the catalog, and the out dir's owner (nothing asked yet).
    preflight.validate_plan(plan, out / "plan.json")
    kubernetes = wants_kubernetes(plan, target)  # deploy.target kubernetes: the clusters, not VMs
    state = _owned_state(out, plan, force)
    if kubernetes:
        return _apply_kubernetes(out, plan, state, yes=yes, echo=echo, ask=ask, env=env, report=report,
                                 pulumi_command=pulumi_command, on_steps=on_steps)
    _unit_conflicts(plan, state, target)
    work = Work(desired(plan, state, target), state.running)
    rows = changes(work.running, work.after)
    report.update(command="apply", out=str(out), target=target, applied=False,
                  changes=preview.changes_json(rows, [], []))
    if not work.steps:
        echo(render_preview(rows, f"hetinfra apply {out} (target: {target})"))
        said = nothing_to_do(plan, state)
        echo(said)
        report.update(preview.result_json(state, out), notes=[said])
        return state
    ready = _preview_and_confirm(out, plan, state, work, rows, target=target, env=env, echo=echo, ask=ask, yes=yes,
                                 pulumi_command=pulumi_command, quota_caps=quota_caps, update_images=update_images,
                                 report=report)
    if on_steps:
        on_steps()
    _run_apply(out, plan, state, work, ready, echo)
    _applied(out, state, report, echo)
    for line in endpoint_lines(out, plan, state):
        echo(line)
    return state


def nothing_to_do(plan: Plan, state: DeployState) -> str:
    """What apply says when it has no step to run: a plan with no allocations (planning.allow_unmet left
    all demand unmet) deploys nothing, which it says rather than pass for a fleet in place."""
    if not plan.allocations and not state.running:
        unmet = sum(plan.unmet_rps.values())
        return (f"Nothing to deploy: the plan has no allocations (it leaves {unmet:,.6g} req/s unmet: unmet_rps), "
                "and nothing runs; no state.json written.")
    return "Nothing to do: what runs is what the plan says."


def _owned_state(out: Path, plan: Plan, force: bool) -> DeployState:
    """OUT/state.json (a new one when nothing was deployed), once the plan's service may change it."""
    state = DeployState.load(out, plan.service)
    preflight.check_owner(plan, state.model, out, force=force)
    return state


def _applied(out: Path, state: DeployState, report: dict, echo) -> None:
    report.update(preview.result_json(state, out), applied=True)
    echo(f"Applied: {len(state.running)} unit(s) running; state in {state.path}")


def _preview_and_confirm(out: Path, plan: Plan, state: DeployState, work: Work, rows: list[Change], *,
                         target: str, env: dict, echo, ask, yes: bool, pulumi_command, quota_caps, update_images: bool,
                         report: dict) -> Ready:
    """Preflight part 2, the Pulumi and SkyServe previews, and the confirmation: nothing has changed
    when this raises."""
    from hetinfra.compile.pulumi_project import write_projects

    # every cloud's settings, disks, secrets, tools, credentials and readable quotas, before the
    # confirmation and the first step, so a failed check changes nothing
    command, secrets, notes = _prerequisites(plan, out, env, work, pulumi_command, quota_caps)
    notes += preflight.check_health_paths(plan, [(a, a.path) for a in work.new], refuse=False)
    notes += images.preview_lines(state.model, work.pulumi_clouds, update_images)
    # Pulumi's own preview of each stack, on the projects as this apply will run them (with the
    # images the up will pin, so --update-images shows its replacements; a failed preview stops
    # here: exit 4, no resource touched), and SkyServe's changes per unit.
    write_projects(out, plan.to_dict(), gcp_project=preflight.gcp_project(plan, out, env))
    ready = Ready(command, secrets, plan.deploy.stack, {}, {c: [] for c in work.pulumi_clouds})
    ready.pins = {c: images.pins_for_up(state.model, plan, c, update=update_images, env=env, notes=ready.image_notes[c])
                  for c in work.pulumi_clouds}
    stacks = [preview.parse_preview(c, ready.stack, pulumi_driver.PulumiProject(
        out / "pulumi" / c, ready.stack, command, on_output=echo, plan=plan.to_dict()).preview(secrets, ready.pins[c]))
        for c in work.pulumi_clouds]
    sky_rows = preview.sky_changes(state.running, work.sky_new, work.sky_gone)
    report.update(changes=preview.changes_json(rows, stacks, sky_rows), notes=notes)
    text = "\n".join(t for t in (render_preview(rows, f"hetinfra apply {out} (target: {target})"),
                                   preview.render_changes(stacks, sky_rows)) if t)
    confirm(text + "".join(f"\n  ({n})" for n in notes), yes, echo, ask)
    return ready


def _run_apply(out: Path, plan: Plan, state: DeployState, work: Work, ready: Ready, echo) -> None:
    """The confirmed steps, each recorded in state.json (see :func:`run_steps`)."""
    state.set_service(plan.service, plan.service_id)
    state.begin("apply", sha_of(plan), [step.id for step in work.steps])
    secrets = ready.secrets
    sky_secrets = {"VLLM_API_KEY": secrets["hetinfra:apiKey"], "HF_TOKEN": secrets.get("hetinfra:hfToken", "")}

    def perform(step: Step) -> None:
        if isinstance(step, PulumiUp):
            cloud = step.project
            project = pulumi_driver.PulumiProject(out / "pulumi" / cloud, ready.stack, ready.command,
                                                  on_output=echo, plan=plan.to_dict())
            outputs = project.up(secrets, ready.pins[cloud])
            for line in ready.image_notes[cloud] + images.record(state, cloud, outputs):
                echo(f"note: {line}")
            mine = [a for a in work.after if a.path == "pulumi" and a.cloud == cloud]
            state.replace_running(lambda a: not (a.path == "pulumi" and a.cloud == cloud), mine)
            state.record_stack(plan.service, cloud, ready.stack, outputs)
        elif isinstance(step, SkyUp):
            a = next(x for x in work.sky_new if x.deployment_unit == step.unit)
            update = any(x.deployment_unit == step.unit for x in state.running)
            endpoint = sky_driver.serve_up(out / a.skypilot_task, step.unit, sky_secrets, update=update)
            state.replace_running(lambda x: x.deployment_unit != step.unit, [a])
            state.record_service(step.unit, endpoint)
        else:
            serve_down(state, list(step.units))

    run_steps(out, state, work.steps, perform, echo)
    state.finish(plan_sha256=sha_of(plan))


def _prerequisites(plan: Plan, out: Path, env: dict, work: Work, pulumi_command, quota_caps) -> tuple:
    """Preflight part 2, every check in one run (preflight.gather): (pulumi command, secrets, notes)."""
    pulumi_clouds, sky_new = work.pulumi_clouds, work.sky_new
    backends = pulumi_driver.backend_urls(plan.to_dict(), pulumi_clouds)
    caps = preflight.env_quota_caps(env) if quota_caps is None else quota_caps
    checks: list = [
        ("settings", lambda: {**pulumi_driver.secrets_from_env(env), **gateway_secrets(plan, env)}),
        ("quotas", lambda: preflight.check_quotas(work.new, caps)),
        ("binaries", lambda: (pulumi_command or pulumi_driver.pulumi_command()) if pulumi_clouds else None),
        ("settings", lambda: preflight.check_disks(plan, work.new))]
    checks += [("settings", lambda c=c: preflight.check_cloud_settings(plan, out, [c], env)) for c in pulumi_clouds]
    checks.append(("settings", lambda: pulumi_driver.check_passphrase(pulumi_clouds, backends, env)))
    checks += [("credentials", lambda c=c: pulumi_driver.check_credentials(c, env)) for c in pulumi_clouds]
    if sky_new or work.sky_gone:
        checks += [("binaries", sky_driver.sky_module),
                   ("credentials", lambda: sky_driver.check_ready(sorted({a.cloud for a in sky_new})))]
    secrets, notes, command = preflight.gather(checks)[:3]
    return command, secrets, notes


def _apply_kubernetes(out: Path, plan: Plan, state: DeployState, *, yes: bool, echo, ask, env: dict,
                      report: dict, pulumi_command, on_steps=None) -> DeployState:
    """apply_plan for deploy.target kubernetes: the Pulumi project OUT/pulumi/kubernetes/ (program
    hetinfra.stacks.kubernetes) through the VM stacks' driver: the same preflight, Pulumi preview,
    confirmation, ``up --refresh`` step, state and ``--json`` document (its stack under ``kubernetes``)."""
    from hetinfra.compile.kubernetes.project import write_kube_project
    from hetinfra.deploy import kube

    after = kube.desired(plan, state)
    rows = changes(state.running, after)
    report.update(command="apply", out=str(out), target="kubernetes", applied=False,
                  changes=preview.changes_json(rows, [], []))
    # every prerequisite in one run (preflight.gather), before anything is asked or changed
    backends = pulumi_driver.backend_urls(plan.to_dict(), [kube.PROJECT])
    secrets, command = preflight.gather([
        ("settings", lambda: kube.secrets_from_env(env)),
        ("binaries", lambda: pulumi_command or pulumi_driver.pulumi_command()),
        ("settings", lambda: kube.check_clusters(plan, state)),
        ("settings", lambda: pulumi_driver.check_passphrase([kube.PROJECT], backends, env))])[:2]
    stack = plan.deploy.stack
    # the project as this apply runs it (a replan stage applies a plan of its own)
    project = pulumi_driver.PulumiProject(write_kube_project(out, plan.to_dict()), stack, command, on_output=echo,
                                          plan=plan.to_dict())
    stacks = [preview.parse_preview(kube.PROJECT, stack, project.preview(secrets))]
    report.update(changes=preview.changes_json(rows, stacks, []), notes=[])
    confirm(render_preview(rows, f"hetinfra apply {out} (target: kubernetes)") + "\n"
            + preview.render_changes(stacks, []), yes, echo, ask)
    steps = [PulumiUp(kube.PROJECT)]
    if on_steps:
        on_steps()
    state.begin("apply", sha_of(plan), [step.id for step in steps])
    run_steps(out, state, steps, lambda _step: kube.record_up(state, plan, after, stack, project.up(secrets)), echo)
    state.finish(plan_sha256=sha_of(plan))
    _applied(out, state, report, echo)
    return state


def serve_down(state: DeployState, units: list[str]) -> None:
    """Take SkyServe services down and forget them in the state."""
    sky_driver.serve_down(units)
    state.replace_running(lambda a: a.deployment_unit not in units, [])
    for unit in units:
        state.forget_service(unit)
