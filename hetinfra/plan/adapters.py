"""LoRA adapters in the allocation problem: their demand keys, the slot tiers of a unit, how many
instances must hold each, and which instance holds which adapter once the ILP has chosen.

* **Demand.** Adapter ``a`` of base ``m`` with ``share: f`` takes ``f x lambda[m,w]`` of each class
  ``w`` into its own key ``(m, "w~a")`` (the base keeps the rest); with ``rate_rps: r`` it adds
  ``r x share[w]`` of each class. Its requests have the base's sizes.
* **Tiers.** A unit of the base comes in slot tiers: 0 slots (the base engine, no derate) and
  ``k`` slots at the base's slot rank, each instance ``k`` adapters, its rates the LoRA engine's
  (:func:`hetinfra.perf.lora.lora_estimate`: slot memory out of the KV cache, every step m(k) slower).
  The ILP (``solver.rows.add_adapter_*``) picks the tiers and which adapters each holds, so it
  trades slot memory and slowdown against more replicas.
* **Copies.** An adapter is held by at least one instance in each area where it has demand, two
  where its rate needs more than one instance of the best tier (so one instance lost leaves it served).
* **Assignment.** ``x[u,a] <= n[u]`` and ``sum_a x[u,a] <= slots n[u]`` let copies go round-robin:
  :func:`instance_adapters` gives each instance of a unit its list.
"""

from __future__ import annotations

import math
from dataclasses import replace

from hetinfra.errors import InvalidInputError
from hetinfra.solver.problem import AdapterHold, SolverUnit

__all__ = ["ADAPTER_KEY_SEP", "SLOT_TIERS", "adapter_demand", "adapter_holds", "copies_needed", "instance_adapters",
           "lora_tier", "refuse_unplanned_adapters"]

#: joins a class name and an adapter name into the adapter's demand key (``"chat~sql"``)
ADAPTER_KEY_SEP = "~"
#: the slot counts (vLLM --max-loras) a unit's tiers offer
SLOT_TIERS = (1, 2, 4, 8, 16, 32, 64)


def adapter_demand(model: str, classes: dict[str, float], adapters) -> tuple[dict, dict[str, tuple]]:
    """(demand keys -> req/s, adapter -> its keys) of one base model whose class rates are ``classes``
    and whose adapters (spec entries: name, demand.share | demand.rate_rps) are ``adapters``."""
    total = sum(classes.values())
    demand = dict.fromkeys(((model, w) for w in classes), 0.0)
    keys: dict[str, tuple] = {}
    base_left = 1.0 - sum(a.demand.share or 0.0 for a in adapters)
    for w, lam in classes.items():
        demand[(model, w)] = lam * base_left
    for a in adapters:
        keys[a.name] = tuple((model, f"{w}{ADAPTER_KEY_SEP}{a.name}") for w in classes)
        for w, lam in classes.items():
            rate = lam * a.demand.share if a.demand.share else a.demand.rate_rps * lam / total
            demand[(model, f"{w}{ADAPTER_KEY_SEP}{a.name}")] = rate
    return {k: v for k, v in demand.items() if v > 1e-12}, keys


def lora_tier(unit: SolverUnit, slots: int, class_rates: dict[str, float]) -> SolverUnit:
    """The unit ``unit`` in its tier of ``slots`` adapter slots: its id ends ``+lora<slots>`` and each
    adapter key of a class gets that class's LoRA rate (``class_rates``: class -> req/s at this tier)."""
    rates = dict(class_rates)
    return replace(unit, id=f"{unit.id}+lora{slots}", slots=slots, rates=rates)


def with_adapter_keys(rates: dict[str, float], demand: dict) -> dict[str, float]:
    """A tier's rates extended to every adapter key of its classes present in ``demand``."""
    out = dict(rates)
    for _, w in demand:
        base = w.split(ADAPTER_KEY_SEP, 1)[0]
        if ADAPTER_KEY_SEP in w and base in rates:
            out[w] = rates[base]
    return out


def copies_needed(rate_rps: float, best_rps: float) -> int:
    """Instances that must hold an adapter in an area: 1, or 2 where its rate needs more than one."""
    return 1 if best_rps <= 0 or rate_rps <= best_rps else 2


def adapter_holds(model: str, adapters, keys: dict[str, tuple], demand: dict, best_rps: float) -> tuple:
    """The problem's :class:`AdapterHold` entries of one base model (residency from ``regions``)."""
    out = []
    for a in adapters:
        rate = sum(demand.get(k, 0.0) for k in keys[a.name])
        if rate <= 0:
            continue
        out.append(AdapterHold(a.name, model, keys[a.name], tuple(a.regions or ()),
                               (((), copies_needed(rate, best_rps)),)))
    return tuple(out)


def instance_adapters(count: int, slots: int, holds: dict[str, int]) -> list[list[str]]:
    """The adapters of each of ``count`` instances, given adapter -> instances holding it: copies dealt
    round-robin in adapter order, so no instance holds an adapter twice (each <= count) and none holds
    more than ``slots`` (their sum <= slots x count). Raises ValueError when the counts break either."""
    if any(c > count for c in holds.values()) or sum(holds.values()) > slots * count:
        raise ValueError(f"holds {holds} do not fit {count} instances of {slots} slots")
    out: list[list[str]] = [[] for _ in range(count)]
    i = 0
    for name in sorted(holds, key=lambda a: (-holds[a], a)):
        for _ in range(holds[name]):
            out[i % count].append(name)
            i += 1
    assert all(len(x) <= math.ceil(sum(holds.values()) / max(count, 1)) for x in out)
    return out


def refuse_unplanned_adapters(spec, locate) -> None:
    """Exit 2 for a spec with ``adapters`` at ``hetinfra plan``: the placement above is not yet wired into
    the plan's units and plan.json, and a plan that left the adapters' memory, slowdown and routing out
    would promise what its fleet cannot keep (docs/concepts/adapters.md, "Not wired yet")."""
    if spec.adapters:
        raise InvalidInputError(f"{locate('adapters')}: `hetinfra plan` does not place LoRA adapters yet (the spec is "
                                "valid; the placement runs in tools/lora_acceptance.py)",
                                hint="plan without `adapters:` for the base models alone")
