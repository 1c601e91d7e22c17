"""Feasibility-first heuristic (AGH's GH/AGH adapted to the allocation ILP): a greedy that never
breaks an availability cap, the budget, a spot fraction or locality, improved by local search.

Capacity is booked in a ledger that is a *sufficient* condition for a feasible routing: each model's
classes form one group served in their declared mix by units that serve all of them (or, when no
unit serves every class of a model, one group per class). One instance of unit u carries
R[u] = (1 - headroom) / sum_w (share_w / h[u, w]) req/s of its group's mix. A group is covered
when sum_u n[G, u] R[u] >= its demand, and locality holds when the units in each origin region
cover epsilon x that region's share. Any counts the ledger accepts therefore have a routing that
meets every constraint; the exact routing comes from an LP with the counts fixed
(``DirectModel.with_counts``). Caps, the budget and spot fractions are not restated here: the ledger
books instances against the count rows that ``solver.rows`` compiles for every solver
(``count_rows``).

GH: per group, first each origin region's local need from that region's units, then the rest, always
the unit with the lowest $/h per req/s first, as many instances as caps, spot fraction, budget and
the need allow. AGH: several deterministic model orders (caps are shared, so the order matters),
each followed by relocate passes (drop one instance; swap one instance for enough of another unit;
swap all of a unit for enough of another), keeping the cheapest. No randomness: same input, same
counts.
"""

from __future__ import annotations

import math

from hetinfra.solver.problem import AllocationProblem
from hetinfra.solver.rows import allows_unmet, count_rows, instance_upper_bound

EPS = 1e-9


class _Ledger:
    def __init__(self, p: AllocationProblem, ub: dict[str, int]):
        self.p = p
        self.ub = ub
        self.units = {u.id: u for u in p.units}
        self.unmet_ok = allows_unmet(p)
        # the count rows of solver.rows (caps, budget, spot fraction): unit -> [(row, coefficient)]
        limits = count_rows(p)
        self.row_ub = [ub for _, ub, _, _ in limits.rows]
        self.terms: dict[str, list[tuple[int, float]]] = {uid: [] for uid in self.units}
        col_unit = {c: uid for uid, c in limits.n.items()}
        for i, (_, _, idx, val) in enumerate(limits.rows):
            for c, a in zip(idx, val):
                self.terms[col_unit[c]].append((i, a))
        self.groups: list[dict] = []  # {"model", "demand", "cand": [(uid, R)], "R": {uid: R}, "local": {region: need}}
        for model in sorted({m for m, _ in p.demand}):
            keys = sorted(w for m, w in p.demand if m == model)
            total = sum(p.demand[(model, w)] for w in keys)
            mine = [u for u in p.units if u.model == model]
            full = [u for u in mine if all(w in u.rates and u.rates[w] > 0 for w in keys)]
            parts = [keys] if full or len(keys) == 1 else [[w] for w in keys]
            for part in parts:
                d = sum(p.demand[(model, w)] for w in part)
                if d <= 0:
                    continue
                rate = {}
                for u in mine:
                    if all(w in u.rates and u.rates[w] > 0 for w in part):
                        rate[u.id] = (1.0 - p.headroom) / sum(p.demand[(model, w)] / d / u.rates[w] for w in part)
                local = {}
                if p.locality > 0:
                    for (m, r), lam in p.local_demand.items():
                        if m == model and lam > 0:
                            local[r] = p.locality * lam * d / total
                cand = sorted(rate, key=lambda uid: (self.units[uid].cost / rate[uid], uid))
                self.groups.append({"model": model, "demand": d, "R": rate, "cand": cand, "local": local})
        self.reset()

    def reset(self) -> None:
        self.alloc: list[dict[str, int]] = [{} for _ in self.groups]
        self.n: dict[str, int] = {}
        self.activity = [0.0] * len(self.row_ub)  # sum_u a[row, u] n[u] per count row
        self.spent = 0.0

    # -- limits -----------------------------------------------------------------------------------
    def room(self, uid: str) -> int:
        """Most further instances of uid its bound and the count rows (caps, budget, spot
        fraction) allow."""
        k = self.ub.get(uid, 10**9) - self.n.get(uid, 0)
        for i, a in self.terms[uid]:
            if a > 0:
                k = min(k, int(math.floor((self.row_ub[i] - self.activity[i]) / a + 1e-9)))
        return max(0, k)

    def add(self, gi: int, uid: str, k: int) -> None:
        if k == 0:
            return
        u = self.units[uid]
        a = self.alloc[gi]
        a[uid] = a.get(uid, 0) + k
        if a[uid] == 0:
            del a[uid]
        self.n[uid] = self.n.get(uid, 0) + k
        if self.n[uid] == 0:
            del self.n[uid]
        for i, a in self.terms[uid]:
            self.activity[i] += a * k
        self.spent += u.cost * k

    # -- feasibility and objective ----------------------------------------------------------------
    def covered(self, gi: int, region: str | None = None) -> float:
        g = self.groups[gi]
        return sum(k * g["R"][uid] for uid, k in self.alloc[gi].items()
                   if region is None or self.units[uid].region == region)

    def shortfall(self, gi: int) -> float:
        return max(0.0, self.groups[gi]["demand"] - self.covered(gi))

    def feasible(self, gis=None) -> bool:
        for act, ub in zip(self.activity, self.row_ub):
            if act > ub + 1e-9 * max(1.0, abs(ub)):
                return False
        for uid, k in self.n.items():
            if k < 0 or k > self.ub.get(uid, 10**9):
                return False
        for gi in (range(len(self.groups)) if gis is None else gis):
            g = self.groups[gi]
            if any(k < 0 for k in self.alloc[gi].values()):
                return False
            for r, need in g["local"].items():
                if self.covered(gi, r) < need * (1 - 1e-9) - EPS:
                    return False
            if not self.unmet_ok and self.shortfall(gi) > g["demand"] * 1e-9 + EPS:
                return False
        return True

    def objective(self) -> float:
        p = self.p
        obj = self.spent
        if p.running and p.churn_hours > 0:
            obj += p.churn_hours * sum(self.units[u].cost * max(0, k - p.running.get(u, 0)) for u, k in self.n.items())
        if self.unmet_ok:
            obj += p.unmet_penalty * sum(self.shortfall(gi) for gi in range(len(self.groups)))
        return obj

    # -- GH ---------------------------------------------------------------------------------------
    def fill(self, gi: int, need: float, cand: list[str]) -> float:
        g = self.groups[gi]
        for uid in cand:
            if need <= EPS:
                break
            rate = g["R"][uid]
            if self.unmet_ok and self.units[uid].cost / rate > self.p.unmet_penalty:
                continue
            k = min(int(math.ceil(need / rate - 1e-9)), self.room(uid))
            if k > 0:
                self.add(gi, uid, k)
                need -= k * rate
        return need

    def greedy(self, order: list[int]) -> None:
        for gi in order:
            g = self.groups[gi]
            for r in sorted(g["local"]):
                need = g["local"][r] - self.covered(gi, r)
                if need > EPS:
                    self.fill(gi, need, [u for u in g["cand"] if self.units[u].region == r])
            need = g["demand"] - self.covered(gi)
            if need > EPS:
                self.fill(gi, need, g["cand"])

    # -- local search -----------------------------------------------------------------------------
    def _try(self, gi: int, changes: list[tuple[str, int]], before: float) -> bool:
        for uid, k in changes:
            self.add(gi, uid, k)
        if self.feasible([gi]) and self.objective() < before - 1e-9:
            return True
        for uid, k in reversed(changes):
            self.add(gi, uid, -k)
        return False

    def _needed(self, gi: int, b: str) -> int:
        """Instances of b that restore gi's coverage (total and b's region); 0 when nothing is missing."""
        g = self.groups[gi]
        miss = g["demand"] - self.covered(gi)
        for r, need in g["local"].items():
            short = need - self.covered(gi, r)
            if short > EPS:
                if self.units[b].region != r:
                    return -1
                miss = max(miss, short)
        return max(0, int(math.ceil(miss / g["R"][b] - 1e-9))) if miss > EPS else 0

    def improve(self, passes: int = 6) -> None:
        for _ in range(passes):
            improved = False
            for gi, g in enumerate(self.groups):
                for a in sorted(self.alloc[gi]):
                    # drop one
                    while self.alloc[gi].get(a, 0) > 0 and self._try(gi, [(a, -1)], self.objective()):
                        improved = True
                    for take in ("one", "all"):
                        for b in g["cand"]:
                            have = self.alloc[gi].get(a, 0)
                            if have == 0:
                                break
                            if b == a:
                                continue
                            before = self.objective()
                            k_a = 1 if take == "one" else have
                            self.add(gi, a, -k_a)
                            k_b = self._needed(gi, b)
                            self.add(gi, a, k_a)
                            if k_b <= 0 and take == "one":
                                continue
                            if k_b < 0:
                                continue
                            if self._try(gi, [(a, -k_a), (b, k_b)], before):
                                improved = True
            if not improved:
                break

    def counts(self) -> dict[str, int]:
        return {u: k for u, k in sorted(self.n.items()) if k > 0}


def orders(ledger: _Ledger) -> list[list[int]]:
    """AGH's deterministic multi-start: model orders that matter when models share caps."""
    gs = ledger.groups
    idx = list(range(len(gs)))
    out = [idx,
           sorted(idx, key=lambda i: (-gs[i]["demand"] * _unit_cost(ledger, i), i)),
           sorted(idx, key=lambda i: (gs[i]["demand"] * _unit_cost(ledger, i), i)),
           sorted(idx, key=lambda i: (len(gs[i]["cand"]), i))]
    seen, uniq = set(), []
    for o in out:
        if tuple(o) not in seen:
            seen.add(tuple(o))
            uniq.append(o)
    return uniq


def _unit_cost(ledger: _Ledger, gi: int) -> float:
    g = ledger.groups[gi]
    return min((ledger.units[u].cost / g["R"][u] for u in g["cand"]), default=0.0)


def feasible_start(problem: AllocationProblem, ub: dict[str, int] | None = None,
                   passes: int = 6) -> tuple[dict[str, int], float] | None:
    """Counts of the best GH + local-search plan over the model orders, and the ledger's objective
    (an upper bound: the exact routing can only be cheaper with unmet demand); None when the greedy
    finds no plan that keeps every constraint."""
    if problem.objective != "min_cost":
        return None
    if problem.tied:  # committed bases (solver.periods) are left out: an all on-demand/spot start
        tied = {u for g in problem.tied for u in g}
        problem = problem.replace(units=tuple(u for u in problem.units if u.id not in tied), tied=())
    ub = ub or {u.id: instance_upper_bound(problem, u) for u in problem.units}
    ledger = _Ledger(problem, ub)
    if not ledger.groups:
        return None
    best = None
    for order in orders(ledger):
        ledger.reset()
        ledger.greedy(order)
        if not ledger.feasible():
            continue
        ledger.improve(passes)
        obj = ledger.objective()
        if best is None or obj < best[1] - 1e-9:
            best = (ledger.counts(), obj)
    return best
