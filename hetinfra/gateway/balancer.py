"""Choosing a backend: the plan's weights among units, least outstanding requests among a unit's replicas.

Among the units the plan routes a class to, the gateway uses smooth weighted round-robin (nginx's
algorithm): over any window of N requests each healthy unit gets its weight's share to within one
request, with no randomness to drift. Ejected (unhealthy) units are skipped and their weight is
shared by the others. If none of the class's units is healthy, the model's other healthy units
take the request (by their overall share); with none at all the gateway answers 503.

Backends are shared across routing-table reloads by URL, so in-flight counts and health carry over.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from hetinfra.gateway.table import ModelRoutes, RouteClass, RoutingTable


@dataclass(eq=False)
class Backend:
    unit: str
    url: str  # base URL, no /v1
    outstanding: int = 0
    healthy: bool = True
    fails: int = 0  # consecutive failed checks
    oks: int = 0  # consecutive good checks while ejected
    ejected_at: float | None = None
    ejections: int = 0

    def eject(self) -> None:
        if self.healthy:
            self.healthy, self.ejected_at, self.ejections = False, time.monotonic(), self.ejections + 1
        self.oks = 0

    def admit(self) -> None:
        self.healthy, self.ejected_at, self.fails, self.oks = True, None, 0, 0


@dataclass
class BackendGroup:
    """The gateway's backend group: the replicas of one deployed unit (plan.json's deployment_unit),
    which the gateway balances among by least outstanding requests."""

    name: str
    backends: list[Backend] = field(default_factory=list)
    _rr: int = 0

    def healthy(self) -> bool:
        return any(b.healthy for b in self.backends)

    def pick(self, exclude: set[Backend]) -> Backend | None:
        """Least outstanding requests among healthy replicas not tried yet (rotating among ties)."""
        best, n = None, len(self.backends)
        self._rr = (self._rr + 1) % n if n else 0
        for k in range(n):
            b = self.backends[(self._rr + k) % n]
            if b.healthy and b not in exclude and (best is None or b.outstanding < best.outstanding):
                best = b
        return best


class Balancer:
    """Units and backends of one routing table; :meth:`pick` is called once per attempt."""

    def __init__(self, table: RoutingTable, previous: "Balancer | None" = None):
        old = {b.url: b for b in previous.all_backends()} if previous else {}
        self.table = table
        self.units: dict[str, BackendGroup] = {}
        for name, urls in table.endpoints.items():
            unit = BackendGroup(name)
            for url in urls:
                b = old.get(url)
                if b is None or b.unit != name:
                    b = Backend(name, url)
                unit.backends.append(b)
            self.units[name] = unit
        self._current: dict[tuple[str, str], dict[str, float]] = {}

    def all_backends(self) -> list[Backend]:
        return [b for u in self.units.values() for b in u.backends]

    def _swrr(self, key: tuple[str, str], weights: list[tuple[str, float]]) -> list[str]:
        """Units in the order to try: the smooth-WRR choice first, then the rest by weight."""
        cur = self._current.setdefault(key, {})
        total = sum(w for _, w in weights)
        best, best_v = None, None
        for u, w in weights:
            v = cur.get(u, 0.0) + w
            cur[u] = v
            if best_v is None or v > best_v:
                best, best_v = u, v
        cur[best] -= total
        return [best] + [u for u, _ in sorted(weights, key=lambda x: -x[1]) if u != best]

    def pick(self, model: ModelRoutes, cls: RouteClass | None, exclude: set[Backend]) -> Backend | None:
        candidates = []
        if cls is not None:
            weights = [(u, w) for u, w in cls.weights
                       if u in self.units and self.units[u].healthy()
                       and any(b.healthy and b not in exclude for b in self.units[u].backends)]
            if weights:
                candidates = self._swrr((model.name, cls.name), weights)
        if not candidates:  # the class has no live unit: any live unit of the model, by overall share
            weights = [(u, max(w, 1e-9)) for u, w in model.shares if u in self.units and self.units[u].healthy()]
            if weights:
                candidates = self._swrr((model.name, "*"), weights)
        for u in candidates:
            b = self.units[u].pick(exclude)
            if b is not None:
                return b
        return None
