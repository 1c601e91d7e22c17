"""prune_dominated files kept units by availability group (issue 16: 2.5 s -> 0.4 s on a capped
32-model fleet); the pruned set must be exactly what checking every kept unit gave."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetinfra.perf.model import PerformanceModel
from hetinfra.plan.inputs import resolve
from hetinfra.plan.prune import prune_dominated
from hetinfra.plan.templates import build_units
from hetinfra.spec.load import load_spec

REPO = Path(__file__).resolve().parents[2]


def covers(v, u, capped) -> bool:
    """The dominance rule (as in templates.py): k copies of v in u's group or an uncapped one. ``v`` and
    ``u`` are units' (gpus, gpu_use, cost, rates), read once per unit (_Facts): the properties
    rebuild gpu_use on every read, a third of the reference's time over a bucket's pairs."""
    if u.gpus % v.gpus:
        return False
    k = u.gpus // v.gpus
    if any(g in capped and k * n > u.gpu_use.get(g, 0) for g, n in v.gpu_use.items()):
        return False
    return k * v.cost <= u.cost + 1e-12 and all(k * v.rates.get(w, 0.0) >= r - 1e-12 for w, r in u.rates.items())


class _Facts:
    """What the dominance rule reads of a unit, read once."""

    __slots__ = ("gpus", "gpu_use", "cost", "rates")

    def __init__(self, u):
        self.gpus, self.gpu_use, self.cost, self.rates = u.gpus, u.gpu_use, u.cost, u.template.rates


def reference(units, *, capped=frozenset(), regional=False, keep=frozenset()):
    """The rule as first written: every kept unit of the bucket is checked."""
    order = sorted(units, key=lambda u: (u.cost / u.gpus, u.gpus, -sum(u.template.rates.values()) / u.gpus, u.id))
    by_bucket: dict = {}
    kept = []
    for u in order:
        cands = by_bucket.setdefault((u.model, u.spot, u.committed, u.region if regional else None), [])
        facts = _Facts(u)
        if u.id not in keep and any(covers(v, facts, capped) for v in cands):
            continue
        cands.append(facts)
        kept.append(u)
    return sorted(kept, key=lambda u: u.id)


@functools.lru_cache(maxsize=None)
def _units(name: str):
    """(inputs, units) of an example, built once per worker: pruning and derating never change them."""
    path = REPO / "services" / name
    spec, text, locate = load_spec(path)
    inputs = resolve(spec, path, text, None, locate)
    units, _ = build_units(inputs, PerformanceModel(inputs.profiles))
    return inputs, units


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "services").glob("*.yaml")))
def test_pruned_set_is_identical_to_the_reference(name):
    inputs, units = _units(name)
    groups = sorted({g for u in units for g in u.gpu_use})
    cases = [set(inputs.caps), set(groups), set(groups[::2]), set()]  # the spec's caps; all; every other; none
    keep = {u.id for u in units[::17]}
    for capped in cases:
        for regional in (False, True):
            for kept in (frozenset(), keep):
                want = [u.id for u in reference(units, capped=capped, regional=regional, keep=kept)]
                got = [u.id for u in prune_dominated(units, capped=capped, regional=regional, keep=kept)]
                assert got == want, (name, len(capped), regional, bool(kept))
                memo: dict = {}  # remembered buckets give the same set, the first time and again
                for _ in range(2):
                    again = prune_dominated(units, capped=capped, regional=regional, keep=kept, memo=memo)
                    assert [u.id for u in again] == want, (name, len(capped), regional, bool(kept))


def test_a_derate_prunes_again_only_the_buckets_it_touches():
    """planner.derated with a memo gives back the same unit objects for the same factors, so the
    pruning memo (by identity) recomputes only the derated model's buckets, and the pruned set is
    what pruning the derated units from scratch gives."""
    from dataclasses import replace

    from hetinfra.plan.planner import derated

    _, units = _units("multi-region.yaml")
    models = sorted({u.model for u in units})
    first = {u.template.id: 0.9 for u in units if u.model == models[0]}
    second = {**first, **{u.template.id: 0.5 for u in units if u.model == models[-1]}}
    derate_memo, prune_memo = {}, {}
    a = derated(units, first, derate_memo)
    prune_dominated(a, memo=prune_memo)
    b = derated(units, second, derate_memo)
    assert all(x is y for x, y in zip(a, b) if x.model != models[-1])
    assert all(x is not y for x, y in zip(a, b) if x.model == models[-1])
    for x, u in zip(b, units):  # the same content as dataclasses.replace gives
        f = second.get(u.template.id)
        want = u if f is None else replace(u, template=replace(u.template, rates={w: r * f for w, r in u.template.rates.items()}))
        assert x == want
    before = dict(prune_memo)
    got = prune_dominated(b, memo=prune_memo)
    assert prune_memo.keys() == before.keys()  # one pruning per bucket, not one per round
    again = {k[0][0] for k, v in prune_memo.items() if v is not before[k]}
    assert again == {models[-1]}  # only the derated model's buckets were pruned again
    assert [u.id for u in got] == [u.id for u in reference(b)]


def test_a_derated_template_is_what_replace_gives_and_holds_only_its_fields():
    """library.with_fields (a derate's copy of each template and unit) copies a template's fields at
    once instead of dataclasses.replace's field-by-field frozen __init__: the same template, nothing
    else carried over from the original's __dict__ (a value cached there would be stale at other rates)."""
    from dataclasses import fields, replace

    from hetinfra.plan.library import Template
    from hetinfra.plan.library import with_fields

    _, units = _units("variants.yaml")
    for t in {id(u.template): u.template for u in units}.values():
        rates = {w: r * 0.7 for w, r in t.rates.items()}
        got = with_fields(t, rates=rates)
        assert got == replace(t, rates=rates) and got.rates is rates and type(got) is Template
        assert list(vars(got)) == [f.name for f in fields(Template)]
    t = units[0].template
    object.__setattr__(t, "_cached", 1)  # something else in the original's __dict__ is not copied
    assert not hasattr(with_fields(t, rates=dict(t.rates)), "_cached")
    u = units[0]
    assert u.with_template(t) == replace(u, template=t)  # a unit is copied the same way


def test_the_reference_prunes_something_capped_and_keeps_more():
    _, units = _units("multi-region.yaml")
    groups = {g for u in units for g in u.gpu_use}
    free, capped = prune_dominated(units), prune_dominated(units, capped=groups)
    assert len(free) < len(capped) < len(units)


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "services").glob("*.yaml")))
def test_pruning_without_the_dominated_copies_keeps_the_same_units_at_any_factors(name):
    """prune_copies drops the copies of a template that another copy dominates (its rates are the
    same, so at every derating factor): pruning what is left keeps exactly the units pruning all of
    them keeps, whatever the factors, caps, locality and running units."""
    import random

    from hetinfra.plan.planner import derated
    from hetinfra.plan.prune import prune_copies

    inputs, units = _units(name)
    groups = sorted({g for u in units for g in u.gpu_use})
    templates = sorted({u.template.id for u in units})
    rng = random.Random(name)
    keep = {u.id for u in units[::23]}
    for capped in (set(inputs.caps), set(groups[::3]), set()):
        for regional in (False, True):
            for kept in (frozenset(), keep):
                fewer = prune_copies(units, capped=capped, regional=regional, keep=kept)
                assert set(kept) & {u.id for u in units} <= {u.id for u in fewer}  # running units stay
                for _ in range(2):  # random factors, the same for every copy of a template (as verification's)
                    factor = {t: rng.choice([0.5, 0.8, 1.0, 1.25, 1.6]) for t in templates}
                    want = prune_dominated(derated(units, factor), capped=capped, regional=regional, keep=kept)
                    got = prune_dominated(derated(fewer, factor), capped=capped, regional=regional, keep=kept)
                    assert [u.id for u in got] == [u.id for u in want], (name, len(capped), regional, bool(kept))


def test_prune_copies_drops_the_dearer_copies_of_an_uncapped_template():
    from hetinfra.plan.prune import prune_copies

    _, units = _units("multi-region.yaml")
    fewer = prune_copies(units)
    assert len(fewer) < len(units)
    by_template: dict = {}
    for u in units:
        by_template.setdefault((u.template.id, u.spot, u.committed), []).append(u)
    for u in fewer:  # what stays of each uncapped template is its cheapest copy
        assert u.cost == min(v.cost for v in by_template[(u.template.id, u.spot, u.committed)])


def _residency_regions() -> list[str]:
    """Regions of chat.yaml's clouds that sell one of the base's cheap GPUs (L4 or L40S, one per
    instance): an adapter held only there can be planned."""
    from hetinfra.price_feeds.offers import load_embedded_snapshot

    return sorted({o.region for o in load_embedded_snapshot().offers
                   if o.cloud in ("aws", "gcp") and o.gpu in ("L4", "L40S") and o.gpu_count == 1})


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(region=st.sampled_from(_residency_regions()))
def test_an_adapter_held_only_in_a_region_its_base_can_run_in_is_planned_there(tmp_path_factory, run_cli, region):
    """Pruning kept only the cheapest region's copy of a template (us-east-1's g6e.xlarge stood for
    us-west-2's at the same price), so an adapter whose residency ``regions`` named another region had
    no unit that may hold it: a feasible spec was exit 3, "no plan satisfies all constraints together".
    Each adapter's base units in its regions are pruned among themselves only (prune.resident_regions)."""
    import json

    import yaml

    doc = yaml.safe_load((REPO / "services" / "chat.yaml").read_text())
    doc["infrastructure"].update(clouds=["aws", "gcp"], gpus=["L4", "L40S"])
    doc["adapters"] = [{"name": "sql", "base": "chat-8b", "source": "acme/sql-lora", "rank": 16,
                        "demand": {"share": 0.2}, "regions": [region]}]
    path = tmp_path_factory.mktemp("residency") / "s.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    code, out, err = run_cli("plan", str(path), "--no-verify", "--no-baselines", "--json")
    assert code == 0, err
    held = {a["region"] for a in json.loads(out)["allocations"] for h in (a.get("adapters") or {}).get("held", [])
            if h["name"] == "sql"}
    assert held == {region}


@settings(max_examples=12, deadline=None)
@given(name=st.sampled_from(["chat.yaml", "multi-region.yaml", "batch.yaml"]), pick=st.integers(0, 10_000),
       regional=st.booleans())
def test_property_a_resident_region_is_pruned_on_its_own_and_nothing_else_changes(name, pick, regional):
    """A (model, region) an adapter is resident in is a pruning bucket of its own: its units are pruned by
    each other only (none is dropped for another region's copy), and the other units are pruned as before.
    Round eight's first fix kept every such unit: a spec resident in five regions solved 1,961 variables
    where 93 did (a reviewer's finding); the pool is bounded by the two prunings here."""
    from hetinfra.plan.prune import prune_copies

    _, units = _units(name)
    model, region = sorted({(u.model, u.region) for u in units})[pick % len({(u.model, u.region) for u in units})]
    resident = frozenset({(model, region)})
    inside = [u for u in units if (u.model, u.region) == (model, region)]
    outside = [u for u in units if (u.model, u.region) != (model, region)]
    for prune in (prune_dominated, prune_copies):
        got = {u.id for u in prune(units, regional=regional, resident=resident)}
        assert got == {u.id for u in prune(outside, regional=regional)} | {u.id for u in prune(inside, regional=True)}
        assert got & {u.id for u in inside}  # the resident region keeps a unit its adapter may use
