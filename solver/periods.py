r"""Multi-period allocation with a committed base (SageServe's long-term scaler, priced).

SageServe keeps a captive base of VMs and scales model instances per time window to the forecast
load. In cost terms, for rented clouds: a *committed base* bought for a 1- or 3-year term (paid for
every hour, used or not) plus *on-demand / spot top-ups* per period.

Sets and data
    L          demand levels l of the spec's profiles (equal periods with the same multipliers
               merged), weight w_l = share of the horizon's hours at level l (sum_l w_l = 1)
    mu[m, l]   demand multiplier of model m at level l (its profile value; 1 without a profile)
    U = U_c + U_f   committed units (one term) and flexible units (on-demand or spot)
    c[u]       $/h of one instance; for u in U_c its committed price amortized over the horizon
               (whole terms covering the horizon / the horizon's hours)
Variables
    b[u]       in Z>=0  committed base of u in U_c: instances paid for every hour
    n[u, l]    in Z>=0  top-up of u in U_f in period l
    y[u, k, l] >= 0     req/s of class k routed to u in period l
Constraints: the single-period rows of ``solver.model`` once per level l, with demand
mu[m(k), l] lambda[k] and x[u, l] = b[u] for committed units, n[u, l] otherwise
    demand        sum_u y[u,k,l] = mu[m(k),l] lambda[k]
    capacity      sum_k y[u,k,l] / h[u,k] <= (1 - headroom) x[u,l]
    availability  sum_u gpus[u,g] x[u,l] <= A[g]
    spot fraction, locality and cover rows per (model, level); the budget on the horizon average
    scale-out     n[u,l] <= n[u,l'] for u in U_f when mu[m(u),l] < mu[m(u),l'] (equal when equal): a
                  top-up grows and shrinks with its model's demand, so every period runs a subset of
                  the peak period's fleet, never another instance type for the same load
Objective
    min  sum_{u in U_c} c[u] b[u]  +  sum_l w_l sum_{u in U_f} c[u] n[u,l]      (+ churn)
    the horizon-average $/h: with P equal profile periods, w_l = (periods at level l) / P, i.e. the
    committed cost plus the sum over periods of the top-up cost / P.

How: ``expand`` writes this as one single-period AllocationProblem that every solver path reads:
a copy of each unit, model and availability group per level (``<name> #l``; served names and unit
ids cannot contain a space), demand and local demand scaled by mu, costs weighted by w_l, and the
committed base as one constraint family: the copies of a committed unit have equal counts
(``AllocationProblem.tied``; ``add_committed_base`` in ``solver.model``, rows in ``solver.direct``):
b[u] = x[u, l] for every l; the scale-out rows likewise (``AllocationProblem.nested``,
``add_scale_out``). Per-level spot fractions, locality and cover rows follow from the per-model
rows. LoRA adapters are placed once per level (each level's copy of the adapter on that level's copies
of the units) and a unit's holds are tied across the levels (``AllocationProblem.tied_holds``,
``add_adapter_tied`` in ``solver.rows_adapters``): the deployed unit holds the same adapters in
every period. ``fold`` maps the answer back: a unit's count is its committed base or its largest top-up
(its peak period's: the fleet deployed), the routing each model's at its peak level, and
``SolveResult.periods`` keeps every level's counts and loads.

Solver paths: each level's copy of a model is a "model" of the expanded problem, and the committed
ties and scale-out rows link them, so ``solver.decompose`` solves all levels of a model (and models sharing caps) as one
joint block from the per-level bounds, never by Lagrangian relaxation (it relaxes caps, not ties);
the greedy start (``solver.heuristic``) leaves committed units out (an all on-demand/spot start);
the rounded LP start keeps the ties. The size grows with the number of distinct levels.
"""

from __future__ import annotations

import dataclasses

from hetinfra.solver.problem import AdapterHold, AllocationProblem
from hetinfra.solver.result import SolveResult

SEP = " #"


def copy_name(name: str, level: int) -> str:
    return f"{name}{SEP}{level}"


def split_name(name: str) -> tuple[str, int]:
    base, level = name.rsplit(SEP, 1)
    return base, int(level)


def expand(p: AllocationProblem) -> AllocationProblem:
    """The multi-period problem ``p`` as one single-period problem (see the module docstring)."""
    if p.unmet_penalty is not None:
        raise ValueError("unmet demand is not weighted per period; plan it without periods")
    levels = range(len(p.periods))
    units, tied, nested = [], [], []
    for u in p.units:
        copies = tuple(copy_name(u.id, lv) for lv in levels)
        for lv, per in enumerate(p.periods):
            units.append(dataclasses.replace(
                u, id=copies[lv], model=copy_name(u.model, lv), cost=per.weight * u.cost,
                gpu_use=tuple(((c, r, copy_name(g, lv)), n) for (c, r, g), n in u.gpu_use)))
        if u.committed and len(copies) > 1:
            tied.append(copies)
        elif not u.committed:  # a chain up the model's demand; both ways between equal demands
            mu = [per.multiplier(u.model) for per in p.periods]
            chain = sorted(levels, key=lambda lv: (mu[lv], lv))
            for a, b in zip(chain, chain[1:]):
                nested.append((copies[a], copies[b]))
                if mu[a] == mu[b]:
                    nested.append((copies[b], copies[a]))
    adapters, tied_holds = _adapter_copies(p)
    return p.replace(
        units=tuple(units), adapters=adapters, tied_holds=tied_holds,
        demand={(copy_name(m, lv), w): per.multiplier(m) * lam
                for lv, per in enumerate(p.periods) for (m, w), lam in p.demand.items()},
        caps={(c, r, copy_name(g, lv)): cap for lv in levels for (c, r, g), cap in p.caps.items()},
        max_spot_fraction={copy_name(m, lv): f for lv in levels for m, f in p.max_spot_fraction.items()},
        local_demand={(copy_name(m, lv), r): per.multiplier(m) * lam
                      for lv, per in enumerate(p.periods) for (m, r), lam in p.local_demand.items()},
        running={copy_name(u, lv): c for lv in levels for u, c in p.running.items()},
        # no routing tie-break across levels: its weights on every level's flows made a 4-level plan of
        # services/multi-region.yaml's fleet solve in 23 s instead of 13 (the same plan); each level's
        # routing is still the cheapest, and plan.json routes by the peak level's
        network_ms={},
        periods=(), tied=tuple(tied), nested=tuple(nested))


def _adapter_copies(p: AllocationProblem) -> tuple[tuple[AdapterHold, ...], tuple]:
    """Each LoRA adapter once per level (its model's copy, its keys' copies, held now by the running
    units' copies), and each (unit, adapter) hold tied across the levels: the deployed unit holds the
    same adapters in every period (``AllocationProblem.tied_holds``)."""
    levels = range(len(p.periods))
    adapters = tuple(dataclasses.replace(
        a, name=copy_name(a.name, lv), model=copy_name(a.model, lv),
        keys=tuple((copy_name(m, lv), w) for m, w in a.keys),
        held_now=tuple(copy_name(u, lv) for u in a.held_now)) for a in p.adapters for lv in levels)
    if len(levels) < 2:  # one level: nothing to tie
        return adapters, ()
    return adapters, tuple(tuple((copy_name(u.id, lv), copy_name(a.name, lv)) for lv in levels)
                           for a in p.adapters for u in p.units if a.may_hold(u))


def peak_level(p: AllocationProblem, model: str) -> int:
    """The level of the model's largest demand (the first of equals): its plan.json routing."""
    mults = [per.multiplier(model) for per in p.periods]
    return mults.index(max(mults))


def fold(p: AllocationProblem, r: SolveResult) -> SolveResult:
    """The answer ``r`` to ``expand(p)`` in ``p``'s names (see the module docstring)."""
    out = dataclasses.replace(r, n={}, flow={}, unmet={}, extra_gpus={}, periods=[], holds={},
                              blocks=[{**b, "models": sorted({split_name(m)[0] for m in b["models"]})}
                                      for b in r.blocks])
    if not r.feasible:
        return out
    rates = {u.id: u.rates for u in p.units}
    counts: list[dict[str, int]] = [{} for _ in p.periods]
    loads: list[dict[str, float]] = [{} for _ in p.periods]
    for cid, c in r.n.items():
        uid, lv = split_name(cid)
        counts[lv][uid] = c
    peaks = {m: peak_level(p, m) for m, _ in p.demand}
    for (cid, cm, w), v in r.flow.items():
        (uid, lv), model = split_name(cid), split_name(cm)[0]
        loads[lv][uid] = loads[lv].get(uid, 0.0) + v / rates[uid][w]
        if lv == peaks[model]:
            out.flow[(uid, model, w)] = v
    for (cm, w), v in r.unmet.items():
        model, lv = split_name(cm)
        if lv == peaks[model]:
            out.unmet[(model, w)] = v
    for (c, reg, g), v in r.extra_gpus.items():
        key = (c, reg, split_name(g)[0])
        out.extra_gpus[key] = max(out.extra_gpus.get(key, 0.0), v)
    model_of = {u.id: u.model for u in p.units}
    for (cid, ca), held in r.holds.items():  # tied across the levels: the peak level's is the unit's
        (uid, lv), adapter = split_name(cid), split_name(ca)[0]
        if lv == peaks[model_of[uid]]:
            out.holds[(uid, adapter)] = held
    for uid in sorted({u for per in counts for u in per}):
        out.n[uid] = max(per.get(uid, 0) for per in counts)
    out.periods = [{"counts": counts[lv], "load": loads[lv]} for lv in range(len(p.periods))]
    return out
