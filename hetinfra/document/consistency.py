"""What makes a plan.json whole: the checks across its sections that every reader relies on, run by
:class:`hetinfra.document.plan.Plan` itself so that every command that reads a plan (simulate, replan,
apply, destroy, status, gateway, profile --launch) accepts and refuses the same files.

Before, some lived in one reader only (a route to a unit that is not allocated: simulate and the
gateway; a GPU outside the catalog: simulate), so ``replan`` re-planned from a plan ``simulate``
refused, and ``apply`` deployed nothing, silently, for a plan whose routes pointed at no allocation.

One exception: a cloud's Pulumi project holds a copy of the plan restricted to that cloud's
allocations (``hetinfra.compile.pulumi_project.cloud_plan``) that keeps every cloud's routes; it is
read with ``cloud_copy`` (:func:`hetinfra.document.plan.load_plan`), which skips only the route check.
"""

from __future__ import annotations

from hetinfra.catalog.custom import UNKNOWN_GPU_HINT, plan_gpu_problem
from hetinfra.document.allocation import routes_to_missing
from hetinfra.spec.adapters import base_class

__all__ = ["HintedError", "figure_problems", "plan_problems", "SHARE_TOL", "unit_cost", "unit_figure_problems"]

#: how far a model's class shares may sum from 1: the planner writes each to 6 digits (50 classes err
#: by at most 2.5e-5), so anything further is an edit, not a rounding
SHARE_TOL = 1e-3


def plan_problems(plan, *, cloud_copy: bool = False) -> list[str]:
    """Each way the sections of ``plan`` (a :class:`hetinfra.document.plan.Plan` being validated)
    disagree, as ``field.path why`` (empty: none)."""
    out = [HintedError(f"allocations[{i}].{why}", UNKNOWN_GPU_HINT)
           for i, a in enumerate(plan.allocations) if (why := plan_gpu_problem(a))]
    out += _routed_classes(plan) + _class_mixes(plan) + _period_lists(plan)
    if not cloud_copy:
        out += routes_to_missing({a.unit for a in plan.allocations}, plan.routing, plan.routing_by_origin)
    return out + figure_problems(plan, cloud_copy)  # the shape first: a figure's error names a whole plan


#: what a hand-edited figure is told to do instead
FIGURES_HINT = ("plan.json's figures are written together by `hetinfra plan`: change the spec and plan again "
                "(or edit every figure that depends on the one changed)")


def unit_cost(price: float, instances: int, nodes: int, counts_by_period: list[int] | None) -> float:
    """$/h of a unit as plan.json states it: its price per instance x its instances, or, with a demand
    profile's ``counts_by_period``, x its instances averaged over the periods (the horizon average)."""
    if counts_by_period:
        return price * nodes * sum(counts_by_period) / len(counts_by_period)
    return price * instances


def _off(stated: float, computed: float, terms: int) -> bool:
    """Whether ``stated`` is further from ``computed`` than the rounding of plan.json's figures explains:
    $/h and prices are written to 4 decimals (5e-5 each, ``terms`` of them), rates to 6."""
    return abs(float(stated) - computed) > 5e-5 * (terms + 1) + 1e-9 * abs(computed)  # float error only


def unit_figure_problems(allocations, hint: str) -> list[str]:
    """Each unit whose ``cost_usd_per_hour`` is not its price x instances (:func:`unit_cost`): plan.json's
    allocations and state.json's running ones (hetinfra.document.state.State), where a cost edited to
    $0.01/h was what `status` printed as the fleet's."""
    out = []
    for i, a in enumerate(allocations):
        want = unit_cost(float(a.price_per_instance_usd_per_hour), a.instances, a.nodes_per_replica,
                         a.counts_by_period)
        if _off(a.cost_usd_per_hour, want, a.instances):
            per = "instances averaged over counts_by_period" if a.counts_by_period else "instances"
            out.append(HintedError(f"allocations[{i}].cost_usd_per_hour is {float(a.cost_usd_per_hour):g}, where "
                                   f"price_per_instance_usd_per_hour x {per} is {want:.4f}", hint))
    return out


def figure_problems(plan, cloud_copy: bool = False) -> list[str]:
    """plan.json's figures that do not add up, each naming the one stated and what it should be: a unit's
    ``cost_usd_per_hour`` is its price x instances (:func:`unit_cost`), a model's and the plan's are the sums
    of their units', and a class's ``rate_rps`` is its share of its model's. An edited ``count`` left the
    cost every command prints (replan's summary, status, destroy, apply's preview) at the old fleet's, and
    an edited class rate disagreed with what simulate and the gateway's weights drew. A cloud's Pulumi
    copy (``cloud_copy``) holds one cloud's units under every cloud's totals: only its units are checked."""
    out = unit_figure_problems(plan.allocations, FIGURES_HINT)
    if cloud_copy:
        return out
    for i, m in enumerate(plan.models):
        mine = [a for a in plan.allocations if a.model == m.name]
        total = sum(float(a.cost_usd_per_hour) for a in mine)
        if _off(m.cost_usd_per_hour, total, len(mine)):
            out.append(HintedError(f"models[{i}].cost_usd_per_hour is {float(m.cost_usd_per_hour):g}, where its "
                                   f"{len(mine)} allocation(s) cost {total:.4f}", FIGURES_HINT))
        for j, c in enumerate(m.classes):
            rate = float(m.rate_rps or 0.0)
            want = float(c.share) * rate  # a share is written to 6 decimals: 5e-7 x the model's rate
            if abs(float(c.rate_rps) - want) > 1e-6 + 5e-7 * rate + 1e-4 * want:
                out.append(HintedError(f"models[{i}].classes[{j}].rate_rps is {float(c.rate_rps):g}, where its share "
                                       f"{float(c.share):g} of the model's rate_rps {float(m.rate_rps or 0):g} is "
                                       f"{want:.6g}", FIGURES_HINT))
    total = sum(float(a.cost_usd_per_hour) for a in plan.allocations)
    if plan.cost_usd_per_hour is not None and _off(plan.cost_usd_per_hour, total, len(plan.allocations)):
        out.append(HintedError(f"cost_usd_per_hour is {float(plan.cost_usd_per_hour):g}, where its "
                               f"{len(plan.allocations)} allocation(s) cost {total:.4f}", FIGURES_HINT))
    return out


class HintedError(str):
    """A problem with its own way to mend it (the reader's InvalidInputError hint)."""

    def __new__(cls, text: str, hint: str):
        out = super().__new__(cls, text)
        out.hint = hint
        return out


def _routed_classes(plan) -> list[str]:
    """Routes only for the plan's models and their classes (an adapter's ``<class>~<adapter>`` too),
    and every class with demand routed or left unmet (:func:`_unrouted_demand`)."""
    classes = {m.name: {c.name: c for c in m.classes} for m in plan.models}
    out = []
    for model, per in plan.routing.items():
        if model not in classes:
            out.append(f"routing.{model} routes a model the plan does not serve ({', '.join(sorted(classes))})")
            continue
        for name, rows in per.items():
            declared = classes[model].get(name) or classes[model].get(base_class(name))
            if declared is None:
                out.append(f"routing.{model}.{name} is not a class of model {model} "
                           f"({', '.join(sorted(classes[model]))})")
    return out + _unrouted_demand(plan)


def _unrouted_demand(plan) -> list[str]:
    """Under min_cost (the objective that lists what it leaves unmet, as the check above), every class
    with demand is routed (a row with a share > 0 under its own name: the planner keys routing by the
    classes it lists, an adapter's ``<class>~<adapter>`` too, and the simulator looks routes up so), in
    ``routing`` and, where clients' origins are routed, in some origin's rows, or is listed in
    ``unmet_rps``: a class left out (or routed at share 0) was simulated as 0 requests and the plan
    reported as meeting, while the gateway's weights still sent its requests (a class routed to no unit
    at all, the same: the gateway answers it with an error)."""
    if plan.objective != "min_cost":
        return []
    by_origin = plan.routing_by_origin or {}
    tables = [("routing", {m: [per] for m, per in plan.routing.items()}),
              ("routing_by_origin", {m: list(origins.values()) for m, origins in by_origin.items()})]
    for where, table in tables:
        served = {(m, c) for m, pers in table.items() for per in pers for c, rows in per.items()
                  if any(float(r.share) > 0 for r in rows)}
        for m in plan.models:
            if where == "routing_by_origin" and m.name not in table:
                continue  # a model without origins is routed in ``routing`` alone
            for c in m.classes if m.rate_rps else ():
                if c.rate_rps > 0 and (m.name, c.name) not in served and f"{m.name}/{c.name}" not in plan.unmet_rps:
                    return [f"{where}.{m.name}.{c.name}: the class has {float(c.rate_rps):g} req/s of demand and no "
                            f"route with a share > 0, and unmet_rps does not list '{m.name}/{c.name}' as left unserved"]
    return []


def _class_mixes(plan) -> list[str]:
    """A model's classes are its request mix: their shares sum to 1. Summing to 0 (every share edited to
    0) the simulator drew its requests from nothing it was told and reported a 1,823x miss."""
    return [f"models[{i}].classes shares sum to {total:g}: they are the model's request mix and sum to 1"
            for i, m in enumerate(plan.models) if m.classes
            and abs((total := sum(float(c.share) for c in m.classes)) - 1.0) > SHARE_TOL]


def _period_lists(plan) -> list[str]:
    """A demand profile's per-period lists have one entry per profile period: every model's
    multipliers as long as the longest, and each allocation's ``counts_by_period`` too, none above its
    ``count`` (the peak's fleet, deployed). An edited one sent `simulate --period` to an IndexError."""
    lengths = [len(m.demand_profile.multipliers) for m in plan.models if m.demand_profile]
    if not lengths:
        return []
    n = max(lengths)
    out = [f"models[{i}].demand_profile.multipliers has {len(m.demand_profile.multipliers)} entries: one per "
           f"profile period ({n})" for i, m in enumerate(plan.models)
           if m.demand_profile and len(m.demand_profile.multipliers) != n]
    for i, a in enumerate(plan.allocations):
        if a.counts_by_period is None:
            continue
        if len(a.counts_by_period) != n:
            out.append(f"allocations[{i}].counts_by_period has {len(a.counts_by_period)} entries: one per profile "
                       f"period ({n})")
        elif max(a.counts_by_period) > a.count:
            out.append(f"allocations[{i}].counts_by_period runs {max(a.counts_by_period)} instances in a period, "
                       f"more than its count {a.count} (the peak's fleet)")
    return out
