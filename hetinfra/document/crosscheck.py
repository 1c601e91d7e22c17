"""plan.json, router/weights.json and state.json checked against each other (each is checked for its
own shape where it is parsed; here, whether they describe the same fleet).

- **routes name the right model's units**: plan.json's ``routing`` and ``routing_by_origin`` (checked
  by :class:`hetinfra.document.plan.Plan` itself: :func:`plan_route_problems`) and weights.json's
  classes and endpoints (:func:`weights_route_problems`) send a model's requests only to units that
  serve that model. A schema-valid file that sends ``chat``'s requests to ``code``'s servers is
  refused with the file and the route, not followed silently.
- **a state describes this plan and target** (:func:`state_problems`): the same service (and
  service id, when both have one), the same model, cloud and region for every unit both name, and
  (the gateway) units that run by the path the plan's ``deploy.target`` uses. ``status`` and
  ``replan`` skip the target rule: between a re-plan that changes the target and its apply, the
  state runs by the old one by design.

Each returns messages (empty: consistent); :func:`check_against_plan` raises the first as an
InvalidInputError (exit 2) naming the file the mismatch is in.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetinfra.document.allocation import plan_route_problems
from hetinfra.errors import InvalidInputError

if TYPE_CHECKING:
    from hetinfra.document import Plan
    from hetinfra.document.state import State

__all__ = ["check_against_plan", "declared_regions", "plan_route_problems", "state_problems",
           "weights_route_problems"]

#: deploy.target -> the deploy paths (state.json allocations[].path) its units run by
TARGET_PATHS = {"vms": {"pulumi", "skypilot"}, "kubernetes": {"kubernetes"}}


def weights_route_problems(weights: "Any", plan: "Plan") -> list[str]:
    """``weights``: router/weights.json parsed (hetinfra.compile.router_doc.RouterWeights, which this
    layer may not import). Each weight or endpoint share of weights.json that names a model the plan does not serve, or a
    unit the plan does not have or that serves another model."""
    serves = {a.deployment_unit: a.model for a in plan.allocations}
    models = {m.name for m in plan.models}
    out = []
    for name, entry in sorted(weights.models.items()):
        if name not in models:
            out.append(f"models.{name}: plan.json serves no model {name!r} ({', '.join(sorted(models))})")
            continue
        named = [(f"models.{name}.classes.{c}.weights.{u}", u) for c, cw in sorted(entry.classes.items())
                 for u in sorted(cw.weights)]
        named += [(f"models.{name}.endpoints.{u}", u) for u in sorted(entry.endpoints)]
        for where, unit in named:
            if unit not in serves:
                out.append(f"{where}: plan.json has no deployment unit {unit!r}")
            elif serves[unit] != name:
                out.append(f"{where} sends model {name!r} to unit {unit!r}, which serves model {serves[unit]!r}")
    return out


def state_problems(state: "State", plan: "Plan", *, target: bool = True) -> list[str]:
    """What makes ``state`` (state.json) describe another service, another fleet or (``target``) another
    deploy target. Its ``plan_sha256`` is not compared: between a re-plan and its apply the plan
    differs from the one applied by design (the gateway's warnings name the units without endpoints)."""
    if state.service and state.service != plan.service:
        return [f"it runs service {state.service!r}, but plan.json is for service {plan.service!r}"]
    if state.service_id and plan.service_id and state.service_id != plan.service_id:
        return [f"it runs service {state.service!r} id {state.service_id}, but plan.json was planned from another "
                f"spec (service id {plan.service_id})"]
    planned = {a.deployment_unit: a for a in plan.allocations}
    paths = TARGET_PATHS.get(plan.deploy.target, set())
    out = []
    for i, a in enumerate(state.allocations):
        p = planned.get(a.deployment_unit)
        if p is None:
            continue  # a unit a newer plan dropped: the next apply removes it
        if (a.model, a.cloud, a.region) != (p.model, p.cloud, p.region):
            out.append(f"allocations[{i}] runs {a.deployment_unit!r} for model {a.model!r} in {a.cloud}/{a.region}, "
                       f"but plan.json has it for model {p.model!r} in {p.cloud}/{p.region}")
        elif target and paths and a.path not in paths:
            out.append(f"allocations[{i}] runs {a.deployment_unit!r} by {a.path!r}, but plan.json's deploy.target "
                       f"{plan.deploy.target!r} runs it by {' or '.join(sorted(paths))}")
    return out


def declared_regions(plan: "Plan | None") -> frozenset[str]:
    """The regions ``plan`` declares: its origins and its units' regions (empty without a plan): the
    gateway's ``--region`` and origin header, and replan's kept origins (docs/regions.md)."""
    if plan is None:
        return frozenset()
    return frozenset({o for per in (plan.origins or {}).values() for o in per} | {a.region for a in plan.allocations})


def check_against_plan(plan: "Plan", plan_path: Path | str, *, weights: "Any | None" = None,
                       weights_path: Path | str | None = None, state: "State | None" = None,
                       state_path: Path | str | None = None, target: bool = True) -> None:
    """InvalidInputError (exit 2) with the first mismatch of ``weights`` or ``state`` against ``plan``,
    naming the file it is in and how to mend it."""
    if weights is not None and (found := weights_route_problems(weights, plan)):
        raise InvalidInputError(f"{weights_path}: {found[0]}" + (f" (and {len(found) - 1} more)" if found[1:] else ""),
                                hint=f"router/weights.json must route each model to its own units in {plan_path}; "
                                     "delete it to route by plan.json, or re-plan")
    if state is not None and (found := state_problems(state, plan, target=target)):
        raise InvalidInputError(f"{state_path}: {found[0]}" + (f" (and {len(found) - 1} more)" if found[1:] else ""),
                                hint=f"{state_path} is not the state of {plan_path}: use the out dir that "
                                     "`hetinfra apply` wrote for this plan")
