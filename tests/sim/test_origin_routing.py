"""The simulator's router (hetinfra.sim.network.OriginRouting.route), all requests at once, against
its rule stated request by request: the origin is the first whose cumulative share exceeds
where x total; the unit is the first row of the class whose share exceeds what is left of the pick
after the rows before it; a pick beyond every row leaves the request unrouted."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.sim.network import OriginRouting
from hetinfra.sim.workload import below


def _one(routing: OriginRouting, k: int, where: float | None, x: float) -> tuple[int, int]:
    j = 0
    if len(routing.origins) > 1:
        u = where * routing.cum[-1]
        j = next((i for i, y in enumerate(routing.cum) if u < y), len(routing.cum) - 1)
    for ui, share in routing.routes[routing.origins[j][0]][k]:
        if x < share:
            return ui, j
        x -= share
    return -1, j


@st.composite
def routings(draw):
    classes, units, origins = draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(1, 3))
    shares = st.floats(0.0, 1.0, allow_nan=False)
    r = OriginRouting.__new__(OriginRouting)
    names = [f"o{j}" for j in range(origins)] if origins > 1 else ["any"]
    r.origins = [(o, draw(shares)) for o in names]
    if origins > 1 and not any(s for _, s in r.origins):
        r.origins[0] = (names[0], 1.0)
    r.cum = [math.fsum(s for _, s in r.origins[:k + 1]) for k in range(len(r.origins))]
    r.routes = {o: [[(u, draw(shares) / units) for u in draw(st.permutations(range(units)))[:draw(st.integers(0, units))]]
                    for _ in range(classes)] for o in names}
    return r, classes, draw(st.integers(0, 2**32 - 1))


@settings(max_examples=80, deadline=None)
@given(case=routings())
def test_routing_all_requests_is_the_rule_request_by_request(case):
    routing, classes, seed = case
    rng = random.Random(seed)
    n = 300
    cls = np.array([rng.randrange(classes) for _ in range(n)], dtype=np.int64)
    where = np.array([rng.random() for _ in range(n)]) if len(routing.origins) > 1 else None
    pick = np.array([rng.random() for _ in range(n)])
    unit, origin = routing.route(cls, where, pick)
    expected = [_one(routing, int(k), None if where is None else float(where[i]), float(pick[i]))
                for i, k in enumerate(cls)]
    assert list(zip(unit.tolist(), origin.tolist())) == expected


@given(st.integers(1, 10**12), st.integers(0, 2**32 - 1))
def test_below_is_randrange(n, seed):
    """The size sampler's draw equals random.randrange(n), and leaves the generator in the same state."""
    a, b = random.Random(seed), random.Random(seed)
    assert below(a, n) == b.randrange(n)
    assert a.random() == b.random()
