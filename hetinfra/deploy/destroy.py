"""``hetinfra destroy`` and ``hetinfra status``: the mirror of apply, driven by ``OUT/state.json``.

Destroy runs ``pulumi destroy`` on every cloud's stack the state lists and ``sky.serve.down``
on every SkyPilot unit, one step at a time with the state rewritten after each; the same
resume rule as apply holds. A plain ``cd OUT/pulumi/<cloud> && pulumi destroy`` does the
Pulumi part as well (then run ``hetinfra status`` to see what the state still lists).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

from hetinfra.deploy import pulumi_driver, sky_driver
from hetinfra.deploy.apply import TARGETS, confirm, changes, render_preview, run_steps, serve_down, target_paths
from hetinfra.deploy.state import DeployState, plan_sha
from hetinfra.errors import InvalidInputError

def destroy(out: Path, *, target: str = "all", yes: bool = False, echo: Callable[[str], None] = print,
            ask: Callable[[str], bool] | None = None, pulumi_command=None, env: dict | None = None) -> DeployState:
    if target not in TARGETS:
        raise InvalidInputError(f"--target {target!r}: choose one of {', '.join(TARGETS)}")
    env = dict(os.environ) if env is None else env
    if not (out / "state.json").exists():
        raise InvalidInputError(f"no state.json in {out}: nothing was deployed from here",
                                hint="resources made by hand with `pulumi up` are removed with `pulumi destroy`")
    state = DeployState.load(out)
    paths = target_paths(target)
    gone = [a for a in state.allocations if a["path"] in paths]
    rows = changes(state.allocations, [a for a in state.allocations if a["path"] not in paths])
    pulumi_clouds = sorted(set(state.doc["pulumi"]) | {a["cloud"] for a in gone if a["path"] == "pulumi"}) \
        if "pulumi" in paths else []
    sky_units = sorted({a["deployment_unit"] for a in gone if a["path"] == "skypilot"})
    steps = [f"pulumi:{c}" for c in pulumi_clouds] + ([f"skypilot:down:{','.join(sky_units)}"] if sky_units else [])
    if not steps:
        echo("Nothing to destroy: the state lists nothing for this target.")
        return state
    confirm(render_preview(rows, f"hetinfra destroy {out} (target: {target})"), yes, echo, ask)
    if pulumi_clouds:
        plan = json.loads((out / "plan.json").read_text()) if (out / "plan.json").exists() else None
        pulumi_driver.check_ready(pulumi_clouds, pulumi_driver.backend_urls(plan, pulumi_clouds), env)
        command = pulumi_command or pulumi_driver.pulumi_command()
    if sky_units:
        sky_driver.sky_module()

    state.begin("destroy", plan_sha({"destroy": steps}), steps)

    def do_step(step: str) -> None:
        if step.startswith("pulumi:"):
            cloud = step.split(":", 1)[1]
            stack = state.doc["pulumi"].get(cloud, {}).get("stack", "prod")
            pulumi_driver.PulumiProject(out / "pulumi" / cloud, stack, command, on_output=echo).destroy()
            state.replace_running(lambda a: not (a["path"] == "pulumi" and a["cloud"] == cloud), [])
            state.doc["pulumi"].pop(cloud, None)
        else:
            serve_down(state, sky_units)

    run_steps(out, state, steps, do_step, echo)
    state.finish()
    echo(f"Destroyed; {len(state.allocations)} unit(s) still listed in {state.path}")
    return state


def render_status(out: Path) -> str:
    if not (out / "state.json").exists():
        return f"{out}: nothing deployed (no state.json)"
    state = DeployState.load(out)
    lines = [f"service {state.doc.get('service')}: {len(state.allocations)} unit(s) running, "
             f"${sum(a['cost_usd_per_hour'] for a in state.allocations):,.2f}/h (state updated {state.doc.get('updated_at')})"]
    for a in sorted(state.allocations, key=lambda a: (a["path"], a["cloud"], a["region"], a["deployment_unit"])):
        urls = state.doc["endpoints"].get(a["deployment_unit"], [])
        lines.append(f"  {a['path']:<8} {a['deployment_unit']:<52} {a['instances']:>3} x {a['instance_type']} "
                     f"({a['gpu']}) {', '.join(urls) or 'no endpoint yet'}")
    op = state.operation
    if op:
        lines.append(f"last operation: {op['kind']} {op['status']} (started {op['started_at']})"
                     + (f": {op['error']}" if op.get("error") else ""))
        for s in op["steps"]:
            lines.append(f"  [{s['status']:<7}] {s['id']}" + (f": {s['error']}" if s.get("error") else ""))
        if op["status"] != "done":
            lines.append(f"run `hetinfra {op['kind']} {out}` again to resume")
    return "\n".join(lines)
