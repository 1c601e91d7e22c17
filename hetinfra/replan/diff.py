"""What a re-plan would change, why, and whether it is worth it.

Inputs: what runs (``state.json`` allocations, or the last plan.json when nothing was applied
with hetinfra), the new plan (solved with the churn penalty against what runs), and the new
offers and caps. The decision:

- **forced** when what runs is no longer possible: instances of a running unit are gone and only
  ``pulumi up`` brings them back (a group resized or deleted outside Pulumi: live counts from
  hetinfra.deploy.drift) or its groups have found no capacity for them for a while (stalled:
  planned elsewhere, the GPU capped at what runs there), an instance type of a running unit left the
  offers (availability lost), its GPUs exceed a new availability cap, or the solver, which
  prefers what runs (new instances pay ``churn_penalty_hours``), still moved to a plan that
  costs more, which only happens when the running fleet no longer meets demand or caps;
- **worth it** when savings = (running fleet at the new prices) - (new plan) reach both
  ``--min-savings-pct`` and ``--min-savings-usd-h``;
- otherwise **hold** (hysteresis: small moves are not made; the churn penalty already keeps
  the solver from proposing moves that only break even after start-up and model-load time).

A unit that keeps its instances but holds other LoRA adapters (``allocations[].adapters.held``: an
adapter added, dropped, or at another source or rank) is a change too (:func:`held_changes`): its
engines restart with the new ``--lora-modules``, and the gateway routes each adapter only to its
holders, so a plan whose only change is where adapters live is applied (**worth**, or forced), not
left as "nothing differs" with the engines serving the old list.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hetinfra.deploy.apply import Change, changes
from hetinfra.document import Allocation, Plan

NONE, HOLD, WORTH, FORCED = "none", "hold", "worth", "forced"


@dataclass(frozen=True)
class HeldChange:
    """A unit that runs on and holds other LoRA adapters: its engines restart with the new list."""

    unit: str  # plan.json allocations[].unit
    deployment_unit: str
    instances: int
    added: tuple[str, ...]  # adapter names it did not hold
    removed: tuple[str, ...]  # adapter names it no longer holds
    changed: tuple[str, ...]  # held before and after, at another source or rank


def _held(a: Allocation) -> dict[str, tuple[str, int]]:
    """Adapter name -> (source, rank) of what ``a``'s engines hold (empty: a base unit)."""
    return {h.name: (h.source, h.lora_rank) for h in a.adapters.held} if a.adapters else {}


def held_changes(running: list[Allocation], allocations: list[Allocation]) -> list[HeldChange]:
    """The units of ``allocations`` that run now (same unit id, at least one replica) whose held
    adapters differ from what runs; a unit new to the fleet is an instance change already."""
    before = {a.unit: _held(a) for a in running if a.count > 0}
    out = []
    for a in allocations:
        if a.unit not in before or a.count <= 0 or before[a.unit] == (now := _held(a)):
            continue
        was = before[a.unit]
        out.append(HeldChange(a.unit, a.deployment_unit, a.instances, tuple(sorted(set(now) - set(was))),
                              tuple(sorted(set(was) - set(now))),
                              tuple(sorted(n for n in set(now) & set(was) if now[n] != was[n]))))
    return sorted(out, key=lambda h: h.unit)


@dataclass
class Decision:
    kind: str  # none | hold | worth | forced
    rows: list[Change]
    running_cost_old: float  # $/h at the prices it was planned with
    running_cost_new: float  # $/h at today's prices (unavailable units at their old price)
    new_cost: float
    triggers: list[str] = field(default_factory=list)
    held: list[HeldChange] = field(default_factory=list)  # units that re-hold adapters (their engines restart)
    moves: tuple[int, int] = (0, 0)  # instances launched and removed by the whole change (:func:`unit_moves`)
    #: forced by the new plan's cost alone (no capacity lost, no cap, no offer gone): the case
    #: hetinfra.plan.still_meets checks against a simulation of what runs
    costlier: bool = False
    #: why a move the cost alone forced is held after all (the running fleet still meets): said in the outcome
    note: str | None = None

    @property
    def savings(self) -> float:
        return self.running_cost_new - self.new_cost

    @property
    def savings_pct(self) -> float:
        return 100.0 * self.savings / self.running_cost_new if self.running_cost_new else 0.0

    @property
    def added(self) -> int:
        """Instances the whole change launches (not the net per instance type: :func:`unit_moves`)."""
        return self.moves[0]

    @property
    def removed(self) -> int:
        """Instances the whole change removes."""
        return self.moves[1]


def unit_moves(before: list[Allocation], after: list[Allocation]) -> tuple[int, int]:
    """(instances launched, instances removed) from ``before`` to ``after``, unit by unit
    (``allocations[].unit``: model, instance type, parallelism, region, purchase): a model renamed, or
    a unit replaced by another on the same instance type, launches the new unit's instances and
    removes the old one's, which a count per instance type (the diff's rows) nets out as nothing."""
    was: dict[str, int] = {}
    now: dict[str, int] = {}
    for side, allocs in ((was, before), (now, after)):
        for a in allocs:
            side[a.unit] = side.get(a.unit, 0) + a.instances
    units = set(was) | set(now)
    return (sum(max(0, now.get(u, 0) - was.get(u, 0)) for u in units),
            sum(max(0, was.get(u, 0) - now.get(u, 0)) for u in units))


def gpus_in_use(allocations: list[Allocation]) -> dict[tuple[str, str, str], int]:
    """GPUs the allocations run per (cloud, region, GPU), a mixed pipeline's per stage."""
    used: dict[tuple[str, str, str], int] = {}
    for a in allocations:
        for g in a.instance_groups():
            k = (a.cloud, a.region, g.gpu)
            used[k] = used.get(k, 0) + g.gpus_per_instance * g.instances
    return used


def decide(running: list[Allocation], plan: Plan, offers, caps: dict, *, min_savings_pct: float,
           min_savings_usd_h: float, demand_notes: list[str] = (), forced_notes: list[str] = ()) -> Decision:
    """Compare what runs with the new ``plan``; ``offers`` are today's, ``caps`` today's GPU caps;
    ``forced_notes`` (capacity lost from what runs: hetinfra.deploy.drift) force the move."""
    running_new, triggers, forced = _reprice(running, offers)
    for k, n in sorted(gpus_in_use(running).items()):
        if k in caps and n > caps[k]:
            forced = True
            triggers.append(f"{k[2]} in {k[0]}/{k[1]}: {n} GPUs run but only {caps[k]} are available now")
    triggers.extend(demand_notes)
    triggers.extend(forced_notes)
    forced = forced or bool(forced_notes)

    # One path label for both sides: the diff compares instances, not how they were deployed.
    rows = [c for c in changes(running, plan.allocations, label=lambda _a: "plan") if c.before != c.after]
    d = Decision(NONE, rows, sum(a.cost_usd_per_hour for a in running), running_new,
                 float(plan.cost_usd_per_hour), triggers, held_changes(running, plan.allocations),
                 unit_moves(running, plan.allocations))
    if not rows and d.moves == (0, 0):  # adapters that move alone are applied: the new routing sends them
        # only to their new holders (a unit replaced on the same instance types is a move: no row, but moves)
        d.kind = FORCED if forced else WORTH if d.held else NONE
        return d
    if forced or d.savings < -1e-9:
        if not forced:
            d.triggers.append("the running fleet no longer meets the demand or caps; the new plan costs more")
            d.costlier = True
        d.kind = FORCED
    elif d.savings_pct >= min_savings_pct and d.savings >= min_savings_usd_h:
        d.kind = WORTH
    else:
        d.kind = HOLD
    return d


def held_as_met(d: Decision, why: str) -> Decision:
    """``d``, forced by the new plan's cost alone, held: the running fleet still meets (``why``,
    hetinfra.plan.still_meets), so the dearer plan is not needed."""
    triggers = [t for t in d.triggers if not t.startswith("the running fleet no longer meets")]
    return replace(d, kind=HOLD, triggers=triggers, costlier=False, note=why)


def dropped_units(running: list[Allocation], result) -> list[str]:
    """A forcing trigger per running unit the spec the re-plan was made from (``result``: its
    hetinfra.plan.planner.PlanResult) no longer allows: its GPU, cloud, region, purchase option or
    variant dropped. Such a unit must move whatever the fleet's latency (a spec that dropped the fleet's
    region read "under the thresholds" at an equal cost)."""
    return [f"{a.unit}: the spec no longer allows it (its GPU, cloud, region, purchase option or variant); its "
            f"{a.instances} instance(s) must move"
            for a in running if a.count > 0 and not still_allowed(a.unit, result)]


def still_allowed(unit: str, result) -> bool:
    """Whether the spec the re-plan was made from still allows running ``unit``: one of its templates'
    units (``all_units``), or the solver's. A LoRA tier unit (``<template>+lora<k>[r<rank>]|...``,
    hetinfra.plan.adapters) is made for each solve and pruned there; its base unit is the template's."""
    from hetinfra.plan.adapters import base_unit_id

    ids = {u.id for u in result.all_units} | {u.id for u in result.problem.units}
    return unit in ids or base_unit_id(unit) in ids


def spec_demand_changes(old: Plan | None, new_plan: Plan) -> list[str]:
    """A trigger line per model whose planned rate differs between the running plan ``old`` and
    ``new_plan``: the spec was edited since (a forced move after an edit named only "the running fleet
    no longer meets the demand"). None where OUT has no plan.json (a state.json alone)."""
    # the declared rates (models[].rate_rps), not x demand_scale: a max_throughput plan's scale moves with
    # its budget and prices, which are not a demand edit
    was = {m.name: m.rate_rps for m in old.models} if old else {}
    return [f"demand of {m.name}: {was[m.name]:.3g} -> {m.rate_rps:.3g} req/s (the spec, since the running plan)"
            for m in new_plan.models if m.name in was and abs(was[m.name] - m.rate_rps) > 1e-9]


def _reprice(running: list[Allocation], offers) -> tuple[float, list[str], bool]:
    """$/h of what runs at today's ``offers`` (a bought commitment keeps its price; a type no longer
    offered stays at its old price), a line per price that changed or offer that is gone, and whether
    one is gone (its instances must move)."""
    prices = {}
    for o in offers:
        for spot in (False, True):
            p = o.price(spot)
            if p is not None:
                prices[(o.cloud, o.region, o.instance_type, spot)] = p
    total, lines, gone = 0.0, [], False
    for a in running:
        for g in a.instance_groups():
            old = g.price_per_instance_usd_per_hour
            now = prices.get((a.cloud, a.region, g.instance_type, bool(a.spot)))
            if (a.purchase or "").startswith("committed") and now is not None:
                now = old  # a bought commitment keeps its price for its term
            what = f"{g.instance_type} {'spot ' if a.spot else ''}in {a.cloud}/{a.region}"
            if now is None:
                lines.append(f"{what} is no longer offered (availability lost); its {g.instances} instance(s) must move")
                total += old * g.instances
                gone = True
                continue
            total += now * g.instances
            if round(now, 4) != round(old, 4):  # plan.json rounds prices to 4 decimals: compare like for like
                lines.append(f"{what}: ${old:.4g}/h -> ${now:.4g}/h ({100 * (now - old) / old:+.1f}%)")
    # two units on one instance type saw the same price move: one line (replan audit Q3)
    return total, list(dict.fromkeys(lines)), gone


def render(d: Decision) -> str:
    lines = []
    for c in d.rows:
        mark = "+" if c.after > c.before else "-"
        what = f"{c.instance_type} ({c.gpu})" + (" spot" if c.spot else "")
        roles = ", ".join(f"{r} {b} -> {a}" for r, (b, a) in c.roles.items())
        lines.append(f"  {mark} {c.cloud}/{c.region:<14} {what:<36} {c.before:>3} -> {c.after:<3} instance(s)"
                     + (f" ({roles} engines)" if roles else ""))
    for h in d.held:
        moves = [f"+{n}" for n in h.added] + [f"-{n}" for n in h.removed] + [f"~{n}" for n in h.changed]
        lines.append(f"  ~ {h.deployment_unit}: adapters {' '.join(moves)} "
                     f"({h.instances} instance(s) restart their engines)")
    lines.append(f"cost: ${d.running_cost_new:,.2f}/h now (${d.running_cost_old:,.2f}/h when planned) -> "
                 f"${d.new_cost:,.2f}/h; savings ${d.savings:,.2f}/h ({d.savings_pct:.1f}%)")
    if d.triggers:
        lines.append("triggered by:")
        lines += [f"  - {t}" for t in d.triggers]
    return "\n".join(lines)


def decision_json(d: Decision) -> dict:
    """The decision as ``replan --json`` prints it."""
    return {"kind": d.kind,
            "changes": [{"cloud": c.cloud, "region": c.region, "instance_type": c.instance_type, "gpu": c.gpu,
                         "spot": c.spot, "before": c.before, "after": c.after,
                         "roles": {r: {"before": b, "after": a} for r, (b, a) in c.roles.items()}} for c in d.rows],
            "instances_added": d.added, "instances_removed": d.removed,
            "adapters_changed": [{"unit": h.unit, "deployment_unit": h.deployment_unit, "instances": h.instances,
                                  "added": list(h.added), "removed": list(h.removed), "changed": list(h.changed)}
                                 for h in d.held],
            "cost_usd_per_hour": {"running_when_planned": round(d.running_cost_old, 4),
                                  "running_now": round(d.running_cost_new, 4), "new": round(d.new_cost, 4)},
            "savings_usd_per_hour": round(d.savings, 4), "savings_pct": round(d.savings_pct, 2),
            "triggers": list(d.triggers)}
