"""Replan only the service that runs: SPEC must be the spec of what ``--state`` runs (exit 2 otherwise).

A re-plan of another service's spec against a deployment would plan every running unit away as a
forced move and, applied, replace one service with another; ``hetinfra apply`` refuses the same over
a state.json (hetinfra.deploy.preflight.check_owner), and so does replan, before anything is read
from the clouds or solved.
"""

from __future__ import annotations

import os
from pathlib import Path

from hetinfra.errors import InvalidInputError


def check_service(spec_path: Path, out: Path) -> None:
    """Exit 2 when SPEC's service is not the one OUT runs: state.json's ``service`` (and, where both
    have one, ``service_id``, which ties a deployment to its spec file), else the running plan.json's."""
    from hetinfra.deploy.preflight import other_service
    from hetinfra.plan.plan_json import service_id
    from hetinfra.spec.load import load_spec

    spec = load_spec(spec_path)[0]
    have, have_id = _running_service(out)
    if not have:
        return
    where = _applied_spec(out)
    fix = (f"replan the spec of {have!r}" + (f" ({where})" if where else "")
           + f" with --state {out}, or plan {spec.name!r} into its own out dir")
    want_id = service_id(spec.name, spec_path)
    differs = other_service(have, have_id, spec.name, want_id)
    if differs == "service":
        raise InvalidInputError(f"{out} runs service {have!r}, but {spec_path} is service {spec.name!r}: re-planning "
                                "it there would replace the running service's instances", hint=fix)
    if differs == "id":
        raise InvalidInputError(f"{out} runs service {have!r} id {have_id}, planned from another spec file than "
                                f"{spec_path} (service id {want_id})",
                                hint=fix + " (`hetinfra apply --force` takes the deployment over)")


def _running_service(out: Path) -> tuple[str | None, str | None]:
    """(service, service id) of what OUT runs: state.json's, else plan.json's service (no id: a plan
    nothing was applied from is not tied to its spec file)."""
    from hetinfra.deploy.preflight import runs_anything
    from hetinfra.deploy.state import DeployState
    from hetinfra.document import load_plan

    if (out / "state.json").exists():
        state = DeployState.load(out).model
        if runs_anything(state):  # as apply: an empty state runs nothing
            return state.service, state.service_id
        return None, None
    if (out / "plan.json").exists():
        return load_plan(out / "plan.json").service, None
    return None, None


def _applied_spec(out: Path) -> str | None:
    """The spec file OUT/plan.json was planned from (its ``inputs.spec_path``, relative to OUT), if any."""
    from hetinfra.document import load_plan

    try:
        stored = load_plan(out / "plan.json").inputs.spec_path if (out / "plan.json").exists() else None
    except Exception:  # noqa: BLE001 - only a hint: a broken plan.json is reported by what reads it
        return None
    return os.path.normpath(out / stored) if stored else None
