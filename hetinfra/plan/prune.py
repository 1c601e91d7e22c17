"""Dominated units (the plan stage's pruning before each solve): a unit goes when copies of a kept unit
of its model and purchase option serve at least as much for no more money without breaking an
availability cap (:func:`prune_dominated`). Units of different buckets (and LoRA slot counts) never dominate each other, so
each bucket is pruned on its own and, across verification's rounds, only where a derate changed it."""

from __future__ import annotations

from hetinfra.plan.library import TemplateUnit


def resident_regions(spec) -> frozenset[tuple[str, str]]:
    """(model, region) of each adapter's base model in each of its residency ``regions``: there a base unit is
    pruned only by units of its own region (a bucket of its own, as ``regional`` makes every bucket). Pruned
    as copies of a cheaper region's, an adapter held only in us-west-2 left no unit that may hold it, and a
    feasible spec was exit 3 ("no plan satisfies all constraints together"); kept whole (round eight's first
    fix), a spec resident in five regions solved 1,961 variables where 93 did (a reviewer's finding)."""
    return frozenset((a.base, r) for a in spec.adapters for r in a.regions or ())


def _region_key(u: TemplateUnit, regional: bool, resident: frozenset) -> str | None:
    """The region part of a pruning bucket's key: the unit's region where locality applies or its model is
    resident there (:func:`resident_regions`), else None (a copy in any region may cover it)."""
    return u.region if regional or (u.model, u.region) in resident else None


def prune_dominated(units: list[TemplateUnit], *, capped: set[tuple[str, str, str]] = frozenset(), regional: bool = False,
                    keep: set[str] = frozenset(), memo: dict | None = None,
                    resident: frozenset[tuple[str, str]] = frozenset()) -> list[TemplateUnit]:
    """Drop unit u when k copies of a kept unit v (k = u.gpus / v.gpus, whole; k = 1 included) have
    at least u's capacity on every class for no more money, v has u's model and purchase option
    (spot, on demand, or committed: any term, each paid every hour) (and region, when ``regional``
    because locality applies), and v is in u's availability group
    or in an uncapped one (for mixed pipelines: k copies of v take no more GPUs of any capped group
    than u frees), so swapping u for v copies never breaks a constraint. Units in ``keep``
    (running now, for the churn penalty) stay.

    Dominance is transitive under these rules, so checking against kept units suffices; units are
    visited cheapest per GPU first, which also breaks exact ties (equal prices in several regions)
    deterministically; an exact tie between a model's variants keeps the more accurate one. Besides
    shrinking the ILP this removes symmetric alternatives such as eight 1-GPU instances vs one 8-GPU
    instance running eight TP=1 engines at the same price per GPU.

    Units of different buckets (model, purchase option, region when ``regional`` or where the model is
    ``resident``: :func:`resident_regions`) never cover each
    other, so each bucket is pruned on its own. ``memo`` (a dict kept by the caller) holds each
    bucket's last pruning (_Pruned): the same units (by identity; held there, so no identity is
    reused) and kept units give its result again, and a bucket whose units changed reuses the facts
    of those that did not. A verification round that derates a few templates re-prunes only their
    buckets, and the memo holds one pruning per bucket, not one per round."""
    buckets: dict[tuple, list[TemplateUnit]] = {}
    for u in units:
        # adapter slots and their rank split buckets: fewer slots (or a lower rank) at a higher rate never
        # stand in for more (issue 38)
        lora = u.template.lora
        buckets.setdefault((u.model, u.spot, u.committed, _region_key(u, regional, resident),
                            (lora.slots, lora.rank) if lora else None), []).append(u)
    capped = frozenset(capped)
    kept: list[TemplateUnit] = []
    for bucket, members in buckets.items():
        last = memo.get((bucket, capped)) if memo is not None else None
        pruned = _Pruned(members, tuple(u.id for u in members if u.id in keep))
        if last is not None and last.same(pruned):
            pruned = last
        else:
            pruned.prune(capped, keep, last.facts if last is not None else {})
            if memo is not None:
                memo[(bucket, capped)] = pruned
        kept.extend(pruned.kept)
    return sorted(kept, key=lambda u: u.id)


def prune_copies(units: list[TemplateUnit], *, capped: set[tuple[str, str, str]] = frozenset(), regional: bool = False,
                 keep: set[str] = frozenset(), resident: frozenset[tuple[str, str]] = frozenset()) -> list[TemplateUnit]:
    """``units`` less those that a copy of the same template (another region or instance offer at the
    same rates) dominates under :func:`prune_dominated`'s rule, in their order. Copies share their
    rates, so this holds at any derating factor: verification's rounds scale a template's rates, never
    one copy's, and prune each round's pool without these (what :func:`prune_dominated` keeps is the
    same: a dropped copy is covered, directly or through the copy covering it, by a unit it keeps).
    Copies still count where a pruned pool is not the question (failover's other regions)."""
    groups: dict[tuple, list[TemplateUnit]] = {}
    for u in units:
        groups.setdefault((u.template.id, u.model, u.spot, u.committed, _region_key(u, regional, resident)), []).append(u)
    capped = frozenset(capped)
    kept: set[int] = set()
    for members in groups.values():
        if len(members) == 1:
            kept.add(id(members[0]))
        elif any(g in capped for u in members for g in u.gpu_use):
            kept.update(map(id, _prune_bucket(members, capped, keep, {})))
        else:  # no cap: the first copy in _prune_bucket's order (cheapest per GPU, then id) covers the rest
            kept.add(id(min(members, key=lambda u: (u.cost / u.gpus, u.id))))
            kept.update(id(u) for u in members if u.id in keep)
    return [u for u in units if id(u) in kept]


class _Pruned:
    """One bucket's pruning: its units (``ids``: their identities), those kept as running, the units
    kept, and each unit's _Facts by identity."""

    def __init__(self, members: list[TemplateUnit], held: tuple[str, ...]):
        self.members, self.held, self.ids = members, held, tuple(map(id, members))
        self.kept: list[TemplateUnit] = []
        self.facts: dict[int, _Facts] = {}

    def same(self, other: "_Pruned") -> bool:
        return self.ids == other.ids and self.held == other.held

    def prune(self, capped: frozenset, keep: set[str], known: dict[int, "_Facts"]) -> None:
        """Prune these units, taking the facts of units in ``known`` (the bucket's last pruning's)."""
        self.facts = {i: known[i] for i in self.ids if i in known}
        self.kept = _prune_bucket(self.members, capped, keep, self.facts)


def _prune_bucket(members: list[TemplateUnit], capped: frozenset, keep: set[str],
                  facts: dict[int, "_Facts"]) -> list[TemplateUnit]:
    """prune_dominated within one bucket. Whether u is dropped is "any kept v covers u": the order in
    which kept units are tried changes only the time. Tried first: the unit that covered the last
    unit of u's template (its copies in other regions are mostly covered by the same one); then the
    kept units filed by where they can cover from: None (no capped group: may cover any u), a capped
    group g (covers only units that use g), "mixed" (several groups, one capped: checked in full).
    A v filed under a capped group u does not use fails _covers anyway, so skipping those lists
    changes nothing."""
    filed: dict = {}
    last_cover: dict[str, _Facts] = {}
    kept: list[TemplateUnit] = []
    for f in sorted(_facts(members, capped, facts), key=lambda f: f.rank):
        if f.unit.id not in keep:
            hint = last_cover.get(f.template)
            if hint is not None and _covers(hint, f):
                continue
            lists = [filed.get(None, ()), filed.get("mixed", ())] + [filed.get(g, ()) for g in f.use]
            cover = next((v for vs in lists for v in vs if _covers(v, f)), None)
            if cover is not None:
                last_cover[f.template] = cover
                continue
        filed.setdefault(f.where, []).append(f)
        kept.append(f.unit)
    return kept


class _Facts:
    """What dominance reads of one unit, computed once per prune: its GPUs, price, GPUs in each capped
    group, rates, where it is filed and its place in the visiting order. ``shared``: its template's
    part (see _facts)."""

    __slots__ = ("unit", "template", "gpus", "cost", "use", "rates", "items", "where", "rank")

    def __init__(self, u: TemplateUnit, capped: set, shared: tuple):
        self.template, self.gpus, self.rates, self.items, per_gpu, accuracy = shared
        self.unit, self.cost = u, u.cost
        gpu_use = u.gpu_use
        self.use = {g: n for g, n in gpu_use.items() if g in capped}
        self.where = None if not self.use else next(iter(self.use)) if len(gpu_use) == 1 else "mixed"
        self.rank = (u.cost / self.gpus, self.gpus, per_gpu, accuracy, u.id)


def _facts(units: list[TemplateUnit], capped: frozenset, known: dict[int, _Facts]) -> list[_Facts]:
    """Each unit's _Facts: from ``known`` (by the unit's identity: its _Facts holds the unit, so the id
    stays the unit's), else computed and added there; a template's part once for all its units (id,
    GPUs, rates, minus its rates' sum per GPU and minus its accuracy: the visiting order's keys)."""
    shared: dict[int, tuple] = {}
    out = []
    for u in units:
        f = known.get(id(u))
        if f is None:
            t = u.template
            part = shared.get(id(t))
            if part is None:
                gpus = t.gpus
                part = shared[id(t)] = (t.id, gpus, t.rates, tuple(t.rates.items()), -sum(t.rates.values()) / gpus,
                                        -(t.accuracy or 0.0))
            f = known[id(u)] = _Facts(u, capped, part)
        out.append(f)
    return out


def _covers(v: _Facts, u: _Facts) -> bool:
    """k = u.gpus / v.gpus copies of v (whole) fit in the capped GPUs u frees, cost no more and serve
    at least u's rate on each of u's classes."""
    if u.gpus % v.gpus:
        return False
    k = u.gpus // v.gpus
    freed = u.use
    for g, n in v.use.items():
        if k * n > freed.get(g, 0):
            return False
    if k * v.cost > u.cost + 1e-12:
        return False
    rates = v.rates
    for w, r in u.items:
        if k * rates.get(w, 0.0) < r - 1e-12:
            return False
    return True
