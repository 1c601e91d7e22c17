"""Latency floors (hetinfra.plan.rounds): a layout whose miss does not shrink as its load does.

The rounds derate a regime (a model's GPU and layout) that misses, and a missing model's layouts never simulated
by the same step: what its traffic does to one layout (queueing at a percentile, bursts) it does to the others.
That is wrong for a miss that is the layout's own floor: a latency it keeps at any load. Held-out h98 (qwen3-32b
fp8 on L40S, 5% of its requests 8k-token prompts, p99 TPOT 60 ms): its L40S TP1 layout read 1.057x its objective at
factor 0.41, 1.049 at 0.377 and 1.037 at 0.347 (the decode steps that carry an 8k prompt's chunks), and TP2, never
simulated, was derated in step for 12 rounds: TP1 stayed the cheapest per req/s, TP2 was never tried, and the plan
shipped missing at $67.00/h (benchmarks/results/promise_stop63.txt).

So a regime whose last FLOOR_ROUNDS misses in a row are near ones (worst ratio past 1 and at most FLOOR_NEAR) over
which its ratio fell by less than FLOOR_ELASTICITY of its factor's relative fall is at a floor: from then on its
misses pass no step to its model's untried layouts, and those are put back at their starting factors, once."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Floors", "at_floor", "FLOOR_ROUNDS", "FLOOR_NEAR", "FLOOR_ELASTICITY"]

#: the misses in a row that show a floor: two points show a slope, the third that it stays flat
FLOOR_ROUNDS = 3
#: a near miss: a worst ratio past 1 and at most this (a collapse or a queue that grows is a load's miss)
FLOOR_NEAR = 1.1
#: a floor's ratio falls by less than this share of its factor's relative fall: h98's TP1 by 0.12 (1.9% over 15%)
FLOOR_ELASTICITY = 0.25


def at_floor(misses: list[tuple[float, float]]) -> bool:
    """Whether a regime's misses in a row, (factor, worst ratio) in round order, end at a floor (module docstring)."""
    tail = misses[-FLOOR_ROUNDS:]
    if len(tail) < FLOOR_ROUNDS or any(not 1.0 < r <= FLOOR_NEAR for _, r in tail):
        return False
    (f0, r0), (f1, r1) = tail[0], tail[-1]
    return f1 < f0 and (r0 - r1) / r0 < FLOOR_ELASTICITY * (f0 - f1) / f0


@dataclass
class Floors:
    """The rounds' record of floors: each regime's starting factor, its misses in a row, and the regimes at a floor."""

    initial: dict[str, float] = field(default_factory=dict)
    misses: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    floored: set[str] = field(default_factory=set)

    def judged(self, regime: str, factor: float, ratio: float, missed: bool) -> bool:
        """Record a round's judgement of ``regime`` at ``factor`` (its worst ratio ``ratio``); whether it reached
        its floor in this round (a regime that met starts its misses anew)."""
        if not missed:
            self.misses.pop(regime, None)
            return False
        seen = self.misses.setdefault(regime, [])
        if seen and seen[-1][1] == ratio:  # the same simulation judged again (rounds._past_unchanged steps the
            return False                   # factors on it until the plan changes): no new point of the slope
        seen.append((factor, ratio))
        if regime in self.floored or not at_floor(self.misses[regime]):
            return False
        self.floored.add(regime)
        return True
