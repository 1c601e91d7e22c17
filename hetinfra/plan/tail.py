"""Best-effort classes: the part of a model's requests a percentile objective leaves free.

A p90 objective holds when 90% of the model's requests meet it; the other 10% may take any time.
The templates rate each class against the model's bounds on its own, a sufficient condition for
the model's statistic, which costs dearly where a rare class can meet them only on a large layout:
held-out h136 (an 8B, 98% short chats and 2% 100,000-token prompts, p90 TTFT 1 s) bought two
8 x H100 TP8 instances ($110.08/h) so that the 2% would prefill in 1 s, where the chats on L40S
and the long prompts on single H100s, served past 1 s, met the p90 over all requests at $45-52/h.

So a model whose objective leaves a tail (``tail_budget``: 1 - the percentile, or 1 - the
attainment) may plan up to TAIL_SHARE of that tail as best effort: the classes that shut a layout
out (every other class of the model fits it at the bounds; those it does not fit together within the
budget: two rare long classes shut the same layouts out), the longest first, while
their shares add up to at most TAIL_SHARE x the budget. A best-effort class is rated on each layout
at bounds of its own, BEST_EFFORT_TTFT x and BEST_EFFORT_TPOT x the fastest the layout reaches for
it (never below the model's bounds): a queue that stays short, not a deadline. Verification judges
the model's statistic over all its requests, as always, so the plan still meets or is derated; the
other three quarters of the tail are the margin the other classes keep. A rate measured in a profile is kept
(a relaxed bound would fall back on the estimator: credit for what nobody measured). A mean
objective leaves no tail: every request counts."""

from __future__ import annotations

from dataclasses import replace

from hetinfra.perf.model import BEST_EFFORT_SOURCE, PerformanceModel, RateResult
from hetinfra.plan.library import Template, with_fields

#: the share of a model's tail (1 - percentile, or 1 - attainment) its best-effort classes may take:
#: the rest is the margin the classes planned at the bounds keep, and they need it: a best-effort class's
#: long prefills slow the requests that share its replicas. At half the tail held-out h146 (4% of 50k-token
#: prompts at p90) had 8% of its chats miss beside them and failed 3 of 40 fresh seeds (benchmarks/results/
#: heldout65b, F1), and h141a (4.9%) 4 of 40
TAIL_SHARE = 0.25
#: a best-effort class's bounds on a layout, as multiples of the fastest TTFT and TPOT it reaches there
BEST_EFFORT_TTFT = 4.0
BEST_EFFORT_TPOT = 2.0

_PERCENTILE_TAIL = {"p50": 0.5, "p90": 0.1, "p95": 0.05, "p99": 0.01}


def _budget(pm) -> float:
    """The share of ``pm``'s requests its best-effort classes may take (TAIL_SHARE of its tail)."""
    return TAIL_SHARE * tail_budget(pm.spec.slo)


def _best_effort_rates(t: Template) -> set[str]:
    """The classes ``t`` rates at best-effort bounds (their source says so: :func:`relaxed`)."""
    return {c for c, src in t.sources.items() if src.startswith(BEST_EFFORT_SOURCE)}


def tail_budget(slo) -> float:
    """The fraction of a model's requests its objective lets miss: 1 - the percentile's level (0 for a
    mean), and no more than 1 - the attainment where one is set."""
    out = _PERCENTILE_TAIL.get(slo.percentile, 0.0)
    if slo.attainment is not None:
        out = min(out, 1.0 - slo.attainment)
    return max(out, 0.0)


def cache_words(pm) -> list:
    """What of ``pm`` the best-effort choice reads besides its layouts' rates, for the template cache's key
    (hetinfra.plan.template_cache): the budget and the shares of the classes within it (a class past it
    is never chosen, and any set holding it is past it too). Keyed on the class names and bounds only,
    a spec's choice leaked into the next spec planned with the same classes (heldout65b F2: the same
    classes at p99 after p90 planned a class best effort against a 1% tail and missed)."""
    budget = _budget(pm)
    return [budget, sorted([c.name, c.share] for c in pm.classes if c.share <= budget + 1e-12)]


def best_effort_classes(pm, templates: list[Template]) -> tuple[str, ...]:
    """The classes of ``pm`` planned best effort (see the module docstring), in its class order."""
    budget = _budget(pm)
    if budget <= 0 or len(pm.classes) < 2:
        return ()
    share = {c.name: c.share for c in pm.classes}
    # the classes that shut a layout out: the layout serves all the others, and those it does not
    # serve fit in the budget together (two rare long classes shut the same layouts out)
    shut_out = set()
    for t in templates:
        missing = set(share) - set(t.rates)
        if missing and sum(share[c] for c in missing) <= budget + 1e-12:
            shut_out |= missing
    chosen, used = set(), 0.0
    for c in sorted((c for c in pm.classes if c.name in shut_out),
                    key=lambda c: (-(c.input_tokens + c.output_tokens), c.name)):
        if used + c.share <= budget + 1e-12:
            chosen.add(c.name)
            used += c.share
    return tuple(c.name for c in pm.classes if c.name in chosen)


def relaxed(pm, perf: PerformanceModel, t: Template, classes: tuple[str, ...]) -> Template:
    """``t`` with each of ``classes`` it does not serve at the bounds rated at its best-effort bounds (a
    class it serves there, a profile's measured rate among them, keeps that rate)."""
    nodes = t.node_count or t.pp
    rates, sources = dict(t.rates), dict(t.sources)
    for c in (c for c in pm.classes if c.name in classes):
        if c.name in rates:  # served at the bounds here: kept (see the module docstring)
            continue
        strict: RateResult = perf.rate(pm.ctx, t.gpu, t.tp, t.pp, c, nodes=nodes)
        if not (strict.ttft_floor_ms and strict.tpot_floor_ms):
            continue  # the weights do not fit: no bound helps
        ctx = replace(pm.ctx, ttft_ms=max(pm.ctx.ttft_ms, BEST_EFFORT_TTFT * strict.ttft_floor_ms),
                      tpot_ms=max(pm.ctx.tpot_ms, BEST_EFFORT_TPOT * strict.tpot_floor_ms))
        r = perf.rate(ctx, t.gpu, t.tp, t.pp, c, nodes=nodes)
        if r.max_rps > 0:
            rates[c.name], sources[c.name] = t.engines * r.max_rps, BEST_EFFORT_SOURCE + r.source
    return with_fields(t, rates=rates, sources=sources) if rates != t.rates else t


def uses_best_effort(pr) -> dict[str, set[str]]:
    """Per model, the classes plan ``pr`` (a PlanResult) serves at best-effort rates on a unit it uses."""
    used: dict[str, set[str]] = {}
    for uid, n in pr.result.n.items():
        t = pr.units[uid].template
        if n and _best_effort_rates(t):
            used.setdefault(t.model, set()).update(_best_effort_rates(t))
    return used


def best_effort_warnings(pr) -> list[str]:
    """One line per model whose plan ``pr`` (a PlanResult) serves a class at best-effort rates: which, their
    share, and how to bound them after all."""
    used = uses_best_effort(pr)
    out = []
    for pm in pr.inputs.models:
        names = [c for c in pm.classes if c.name in used.get(pm.spec.name, ())]
        if names:
            slo = pm.spec.slo
            out.append(f"{pm.spec.name}: {', '.join(c.name for c in names)} ({100 * sum(c.share for c in names):.3g}% "
                       f"of its requests) planned best effort, inside the {100 * tail_budget(slo):g}% its "
                       f"{'attainment' if slo.attainment is not None else slo.percentile} objective lets miss: the "
                       "objective is verified over all its requests, but these may take longer (a model of their "
                       "own bounds them)")
    return out


def strict_units(units: list) -> list | None:
    """``units`` (TemplateUnits) without their best-effort rates, the pool every class is planned in at
    the bounds (a unit left serving nothing goes); None where none has a best-effort rate."""
    out, changed = [], False
    for u in units:
        t = u.template
        relaxed_here = _best_effort_rates(t)
        if not relaxed_here:
            out.append(u)
            continue
        changed = True
        rates = {c: r for c, r in t.rates.items() if c not in relaxed_here}
        if rates:
            out.append(u.with_template(with_fields(t, rates=rates, sources={c: s for c, s in t.sources.items()
                                                                          if c not in relaxed_here})))
    return out if changed else None
