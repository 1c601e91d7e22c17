"""The plan summary's fleet figures that need words beside them (plan.json ``allocations`` and
``baselines``): one replica's GPUs, what ``util`` over 100% means, and what the single-GPU-type
baselines are and are not (solved, never simulated) beside a plan that verification padded.
``hetinfra.plan.summary`` prints them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from hetinfra.tables import print_table

if TYPE_CHECKING:
    from hetinfra.document import Allocation, Plan

UTIL_DEFINITION = ("util: the req/s routed to a unit (routed_rps) over its replicas' rated capacity at "
                   "its class mix (templates[].capacity_rps: the estimate or profile x derate), before headroom")


def gpus_cell(a: "Allocation") -> str:
    """The GPUs column: one replica's GPUs per type (the ``n`` column counts replicas), and per node
    where a replica spans several nodes: a `g6e.xlarge x2 nodes` replica read `1xL40S`, its node's."""
    from hetinfra.document.bundle_shape import role_node

    if a.stages:  # a mixed pipeline: one node per stage
        nodes = [(s.gpu, s.gpus) for s in a.stages]
    elif a.heterogeneous_bundle:  # prefill nodes of one type, decode nodes of another
        nodes = [(role_node(r, a).gpu, role_node(r, a).gpus) for r in a.disaggregation.roles for _ in range(r.nodes)]
    else:
        nodes = [(a.gpu, a.gpus_per_instance)] * max(a.nodes_per_replica, 1)
    by_gpu: dict[str, list[int]] = {}
    for gpu, n in nodes:
        by_gpu.setdefault(gpu, []).append(n)
    cells = []
    for gpu, per in by_gpu.items():
        cell = f"{sum(per)}x{gpu}"
        if len(per) > 1:
            cell += f" ({per[0]} per node)" if len(set(per)) == 1 else f" ({'+'.join(map(str, per))} per node)"
        cells.append(cell)
    return " + ".join(cells)


def util_note(plan: "Plan") -> str | None:
    """A line under the allocations where a unit's util passes 100%, saying what util is and why:
    the solve sizes every unit below its rated capacity, so only verification's trim (replicas its
    simulation showed were not needed: fidelity.trim.removed) takes a unit past it."""
    over = [a for a in plan.allocations if a.utilization > 1.0]
    if not over:
        return None
    f = plan.fidelity
    trimmed = f.trim.replicas_by_unit(f.trim.removed) if f is not None and f.trim else {}
    why = []
    for a in over:
        cause = (f"the trim removed {trimmed[a.unit]} replica(s) the simulation showed it did not need"
                 if a.unit in trimmed else "the simulation met its objectives at this load")
        why.append(f"{a.deployment_unit} {100 * a.utilization:.0f}% ({cause})")
    return (f"{UTIL_DEFINITION}. Over 100%: the fleet carries more than those rates credit, as verified by "
            "simulation: " + "; ".join(why))


def usd(v: float) -> str:
    """Dollars per hour with the sign in front: "$1.86/h", "-$1.86/h"."""
    return f"{'-' if v < 0 else ''}${abs(v):.2f}/h"


def render_baselines(plan: "Plan", console: Console) -> None:
    """The single-GPU-type baselines (plan.json ``baselines``) and a line saying what they are."""
    if not plan.baselines:
        return
    b = Table(title="Single-GPU-type baselines (Mélange)", title_justify="left")
    for col in ("GPU only", "instances", "$/h", "this plan saves"):
        b.add_column(col, justify="left" if col in ("GPU only", "this plan saves") else "right")
    for x in plan.baselines:
        if x.feasible:
            b.add_row(x.gpu, str(x.instances), f"{x.cost_usd_per_hour:.2f}", saving_cell(plan, x))
        else:
            b.add_row(x.gpu, "-", "-", f"[dim]{x.reason}[/]")
    print_table(console, b)
    line = baseline_note(plan)
    if line:
        console.print(line, highlight=False)


def saving_cell(plan: "Plan", x) -> str:
    """The "this plan saves" cell of feasible baseline ``x``: the plan itself where it uses that GPU type
    only (plan_itself); a negative saving beside a verified plan says the baseline was never simulated
    (it may miss where the plan met: "-7.5% (-$0.60/h)" read as a saving the verified plan fails to make)."""
    if x.savings_pct is None:  # the plan leaves demand unserved: no like-for-like saving
        return "[dim]- (it serves all the demand)[/]"
    if x.plan_itself:
        return "0.0% (this plan)"
    cell = f"{x.savings_pct:.1f}% ({usd(x.savings_usd_per_hour)})"
    if x.verified:  # planned on its GPU type alone and verified (plan --verify-baselines)
        if x.met is None:  # its own plan was not simulated (too large): the note says why
            return cell + ", not verified: see below"
        return cell + (", verified" if x.met else ", missed in its own verification")
    if x.savings_usd_per_hour < -0.005 and plan.fidelity is not None and plan.fidelity.verified:
        cell += ", unverified: at the last solve's rates"
    return cell


def padding_cost(plan: "Plan") -> tuple[float, list[str]]:
    """$/h of the replicas verification added after the plan's solve (fidelity.confirmation.padded,
    priced at their allocations' $/h per replica) and, per model, how many."""
    f = plan.fidelity
    padded = [p for p in (f.confirmation.padded if f is not None and f.confirmation else ()) if p.replicas_added]
    per_replica = {a.unit: a.cost_usd_per_hour / a.count for a in plan.allocations if a.count}
    cost = sum(n * per_replica.get(u, 0.0) for p in padded for u, n in p.replicas_by_unit.items())
    return cost, [f"{p.replicas_added} to {p.model}" for p in padded]


def baseline_note(plan: "Plan") -> str | None:
    """What the baselines are beside this plan: solved (over the same pool, at the plan's factors, for
    the same load) but never simulated, so a plan that verification padded after its solve may cost
    more than a baseline ("L40S ... -16.7%" beside a $13.03/h plan whose solve was the L40S
    baseline's $11.17/h plus one replica the confirmation needed), and a plan it trimmed less; the
    plan's own row where it uses one GPU type; and why one still costs less."""
    estimated = [x for x in plan.baselines if not x.plan_itself and not x.verified]
    solved = [x for x in estimated if x.feasible]
    added, words = padding_cost(plan)
    cost = plan.cost_usd_per_hour - added
    below = [x.gpu for x in solved if x.cost_usd_per_hour < cost - 0.005]
    f = plan.fidelity if plan.fidelity and plan.fidelity.verified else None
    parts = (["solved over the same offers at the rates and load of the plan's last solve, not simulated "
              "(estimates: `plan --verify-baselines` plans and verifies each)"] if f is not None and estimated else [])
    parts += _verified_words(plan)
    parts += [f"{x.gpu} is this plan itself (it uses {x.gpu} only)" for x in plan.baselines if x.plan_itself]
    trimmed = sum(f.trim.replicas_by_unit(f.trim.removed).values()) if f is not None and f.trim else 0
    if trimmed and solved:
        parts.append(f"the plan's trim removed {trimmed} replica(s) its simulation showed were not needed; no "
                     "baseline is trimmed")
    if added > 0.005:
        parts.append(f"the plan's ${plan.cost_usd_per_hour:.2f}/h includes {usd(added)} of replicas verification "
                     f"added after simulating it ({', '.join(words)}), which no baseline carries: without them the "
                     f"plan costs ${cost:.2f}/h")
    if below:
        parts.append(f"{', '.join(below)} below the plan{' without them' if added > 0.005 else ''}: "
                     f"{_why_below(plan)}")
    return "baselines: " + "; ".join(parts) if parts else None


def _verified_words(plan: "Plan") -> list[str]:
    """The note's clauses on rows ``plan --verify-baselines`` planned and verified: what they are, and any
    below the plan itself (a fleet on one GPU type the plan's search did not reach)."""
    verified = [x for x in plan.baselines if x.verified]
    if not verified:
        return []
    out = ["verified rows: the spec planned on that GPU type alone and verified, as this plan is"]
    below = [x.gpu for x in verified if x.feasible and x.met and x.cost_usd_per_hour < plan.cost_usd_per_hour - 0.005]
    if below:
        out.append(f"{', '.join(below)} verified below this plan: a fleet its search did not reach")
    unsimulated = [x for x in verified if x.feasible and x.met is None]
    if unsimulated:
        out.append(f"{', '.join(x.gpu for x in unsimulated)} not verified: {unsimulated[0].reason}")
    return out


def _why_below(plan: "Plan") -> str:
    """Why a single-GPU baseline (a restriction of the plan's own problem) costs less than its solve."""
    if plan.churn is not None and plan.churn.running:
        return "the plan keeps running replicas (churn), which the baselines do not"
    off_peak = plan.fidelity.confirmation.off_peak if plan.fidelity and plan.fidelity.confirmation else []
    if any(f.replicas_added for f in off_peak):
        return ("the plan's off-peak fleets carry replicas verification gave back where they missed without "
                "them (fidelity.confirmation.off_peak), which no baseline carries")
    if plan.solver.status != "optimal":
        return f"the plan's solve stopped before optimal (gap {100 * (plan.solver.gap or 0):.2f}%)"
    return "the baselines drop the plan's budget and running fleet; report it if neither applies"
