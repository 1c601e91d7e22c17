"""Replan only the service that runs: SPEC must be the spec of what ``--state`` runs (exit 2 otherwise).

A re-plan of another service's spec against a deployment would plan every running unit away as a
forced move and, applied, replace one service with another; ``hetinfra apply`` refuses the same over
a state.json (hetinfra.deploy.preflight.check_owner), and so does replan, before anything is read
from the clouds or solved.
"""

from __future__ import annotations

import os
from pathlib import Path

from hetinfra.errors import HetinfraError, InvalidInputError
from hetinfra.fileio import present


def check_service(spec_path: Path, out: Path) -> None:
    """Exit 2 when SPEC's service is not the one OUT runs: state.json's ``service`` (and, where both
    have one, ``service_id``, which ties a deployment to its spec file), else the running plan.json's."""
    from hetinfra.deploy.preflight import other_service
    from hetinfra.plan.plan_json import service_id
    from hetinfra.spec.load import load_spec

    spec = load_spec(spec_path)[0]
    have, have_id, plan = _running_service(out)
    if not have:
        return
    where = _applied_spec(out, plan)
    fix = (f"replan the spec of {have!r}" + (f" ({where})" if where else "")
           + f" with --state {out}, or plan {spec.name!r} into its own out dir")
    want_id = service_id(spec.name, spec_path)
    differs = other_service(have, have_id, spec.name, want_id)
    if differs == "service":
        raise InvalidInputError(f"{out} runs service {have!r}, but {spec_path} is service {spec.name!r}: re-planning "
                                "it there would replace the running service's instances", hint=fix)
    if differs == "id":
        moved = where is not None and os.path.realpath(where) == os.path.realpath(spec_path)
        if moved:  # SPEC is the very file OUT's plan names: the deployment was applied from another path
            fix = (f"{out}'s deployment was applied from this spec at another path (moved or copied since); if {out} "
                   f"really runs that deployment, `hetinfra plan {spec_path} --state {out} --out {out}` then "
                   f"`hetinfra apply {out} --force` records this path")
        else:
            fix += " (`hetinfra apply --force` takes the deployment over)"
        raise InvalidInputError(f"{out} runs service {have!r} id {have_id}, planned from another spec file than "
                                f"{spec_path} (service id {want_id})", hint=fix)


def _running_service(out: Path):
    """(service, service id, OUT/plan.json or None) of what OUT runs: state.json's, else plan.json's
    service (no id: a plan nothing was applied from is not tied to its spec file). plan.json is read
    once; beside a state.json it only names the spec in the hint, so a broken one is left to what
    reads it."""
    from hetinfra.deploy.preflight import runs_anything
    from hetinfra.deploy.state import DeployState
    from hetinfra.document.plan import RUNNING_HINT, load_plan

    has_plan = present(out / "plan.json")
    if present(out / "state.json"):
        state = DeployState.load(out).model
        if not runs_anything(state):  # as apply: an empty state runs nothing
            return None, None, None
        try:
            return state.service, state.service_id, load_plan(out) if has_plan else None
        except HetinfraError:
            return state.service, state.service_id, None
    if has_plan:
        plan = load_plan(out, hint=RUNNING_HINT)
        return plan.service, None, plan
    return None, None, None


def _applied_spec(out: Path, plan) -> str | None:
    """The spec file OUT/plan.json was planned from (found as every reader finds ``inputs.spec_path``:
    hetinfra.document.spec_location), if it is there."""
    from hetinfra.document.spec_location import spec_file

    if plan is None:
        return None
    found, _ = spec_file(out / "plan.json", plan.inputs.spec_path, plan.inputs.spec_sha256)
    return os.path.normpath(found) if found else None
