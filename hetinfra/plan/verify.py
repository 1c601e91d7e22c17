"""Verified plans: simulate the solved plan, and re-plan the units that miss until every model meets
its latency objective (or the rounds run out, which the plan then says).

The allocation ILP sizes the fleet with the performance model's max rate per replica, a mean-field
number. Whether the fleet keeps a *percentile* objective (p99 TTFT and TPOT by default) under
Poisson or bursty arrivals, chunked prefill, KV exhaustion and preemption is what the simulator
(:mod:`hetinfra.sim`) checks, replica by replica, with the same step times.

Each model m has a derating factor g[m] (1 at first) that scales the rates of all its templates; the
allocation is solved with the scaled rates and its plan.json simulated at ``planning.verify.load`` x
the demand. Per model, each round:

A model meets its objective when its simulated statistics are at least ``planning.verify.margin``
(5%) under the bounds: a finite sample's p99 moves by a few percent from seed to seed, and the
promise must hold for the traffic that comes, not for one sample of it.

* a model that misses and has never met: g[m] *= clamp(1 / miss ratio, 0.5, 0.92), where the ratio
  is the worst of (simulated statistic / bound) over TTFT and TPOT, or the attainment shortfall;
* a model that has met at some g_ok and missed at a larger g_bad: g[m] = sqrt(g_ok x g_bad), the
  geometric midpoint, until g_bad / g_ok < 1.25 (a 25% bracket);
* a model that met at g = 1 keeps it.

The plan returned is the cheapest simulated plan in which every model met its objective (else the
last one, marked as missing). Why one factor for all of a model's templates: what the mean-field
estimate misses (queueing at a percentile, bursts, the size spread inside a bucket, preemptions)
comes from the model's traffic, so its other templates are as optimistic; derating only the
templates in use would send the ILP to the next, still optimistic template each round. Everything
is seeded (``planning.verify.seed``): the same input gives the same plan. plan.json ``fidelity``
records the simulated percentiles per model, the rounds and factors and the simulator version;
``templates[].derate`` the factor behind each used template's ``capacity_rps``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from hetinfra.errors import InfeasibleError
from hetinfra.plan.plan_json import build_plan_json
from hetinfra.plan.planner import PlanResult, attach_baselines, derated, plan, solve_units

#: bounds of one round's derating factor: never more than halve a template's rated capacity at once,
#: and always take at least 8% off a template that misses (so a near miss converges in a few rounds)
FACTOR_MIN, FACTOR_MAX = 0.5, 0.92
#: stop refining a model's factor once the bracket [met, missed] is narrower than 25%
BRACKET = 1.25


def verified_plan(spec_path: str | Path, *, verify: bool = True, strict: bool = False, with_baselines: bool = True,
                  progress=None, **plan_kwargs) -> tuple[PlanResult, dict]:
    """Plan ``spec_path`` (see :func:`hetinfra.plan.planner.plan` for ``plan_kwargs``), verify it by
    simulation unless ``verify`` is false or the spec turns it off, and return the result and its
    plan.json (with ``fidelity``). ``strict``: a plan that still misses after the last round raises
    InfeasibleError (exit 3) instead of carrying a warning. ``progress(round, max_rounds)`` is
    called before each simulation."""
    pr = plan(spec_path, with_baselines=False, **plan_kwargs)
    settings = pr.inputs.spec.planning.verify
    if not (verify and settings.enabled):
        doc = _final(pr, with_baselines)
        doc["fidelity"] = {"verified": False,
                           "reason": "plan --no-verify" if not verify else "planning.verify.enabled is false"}
        doc["warnings"].append("the plan was not verified by simulation: its latency objectives are estimated, "
                               "not checked (run `hetinfra simulate` on it)")
        return pr, doc

    from hetinfra.sim import SIMULATOR_VERSION, WorkloadConfig, simulate_plan

    config = WorkloadConfig(requests=settings.requests, load=settings.load, burst_cv=settings.burst_cv,
                            seed=settings.seed)
    templates = _templates_by_model(pr)
    g = {m: 1.0 for m in templates}
    ok: dict[str, float] = {}  # largest factor at which the model met its objective
    bad: dict[str, float] = {}  # smallest factor at which it missed
    history: list[dict] = []
    best = last = None
    seen: dict[str, dict] = {}
    stopped = pr.result.safety_stop  # any round's solve cut by the wall clock
    for rnd in range(1, settings.max_rounds + 1):
        if progress is not None:
            progress(rnd, settings.max_rounds)
        doc = build_plan_json(pr)
        key = _fleet_key(doc)
        if key not in seen:  # a factor that changes no count or route changes no simulation
            seen[key] = simulate_plan(doc, pr.inputs.spec, pr.inputs.spec_path, config)
        sim = _with_margin(seen[key], settings.margin)
        history.append(_round(rnd, doc, sim, g))
        last = (pr, sim)
        rank = (doc["cost_usd_per_hour"], -(doc["demand_scale"] or 0.0))  # cheapest; most served at a budget
        if sim["met"] and (best is None or rank < best[2]):
            best = (pr, sim, rank)
        new = next_factors(sim, g, ok, bad)
        if new == g:
            break
        g = new
        pr = solve_units(pr.inputs, pr.all_units, pr.running, with_baselines=False,
                         derate=_per_template(g, templates), template_cache=pr.template_cache)
        stopped |= pr.result.safety_stop
    pr, sim = (best[0], best[1]) if best is not None else last
    doc = _final(pr, with_baselines)
    doc["fidelity"] = {
        "verified": True, "met": sim["met"], "rounds": len(history), "max_rounds": settings.max_rounds,
        "simulator": SIMULATOR_VERSION, "seed": settings.seed, "load": settings.load, "burst_cv": settings.burst_cv,
        "requests": settings.requests, "margin": settings.margin,
        "derate": {m: round(f, 6) for m, f in sorted(_model_factors(pr).items())},
        "models": [_model_fidelity(m) for m in sim["models"]], "history": history,
    }
    if stopped and not doc["solver"].get("safety_stop"):
        # a round's solve was cut by the wall clock: its result steered the rounds after it
        from hetinfra.solver.decompose import SAFETY_WARNING

        doc["solver"]["safety_stop"] = True
        doc["warnings"].append(SAFETY_WARNING + " (during verification)")
    if not sim["met"]:
        missing = ", ".join(m["model"] for m in sim["models"] if not m["met"])
        msg = (f"the plan misses the latency objective of {missing} in simulation at {settings.load:g}x demand "
               f"after {len(history)} round(s) of re-planning")
        if strict:
            raise InfeasibleError(msg, hint="loosen the SLO or its percentile, allow faster GPUs, raise "
                                            "planning.verify.max_rounds, or plan without --strict-verify",
                                  details={"fidelity": doc["fidelity"]})
        doc["warnings"].append(msg + ": see fidelity in plan.json, and `hetinfra simulate` for details")
    return pr, doc


def next_factors(sim: dict, g: dict[str, float], ok: dict[str, float], bad: dict[str, float]) -> dict[str, float]:
    """Each model's derating factor for the next round (see the module docstring); records the
    factors at which models met (``ok``) and missed (``bad``)."""
    out = dict(g)
    for m in sim["models"]:
        name, f = m["model"], g.get(m["model"], 1.0)
        if m["met"]:
            ok[name] = max(ok.get(name, 0.0), f)
        else:
            bad[name] = min(bad.get(name, math.inf), f)
        if name not in ok:
            ratio = m["objective"].get("ratio")
            step = FACTOR_MAX if ratio is None or not math.isfinite(ratio) or ratio <= 1 else 1.0 / ratio
            out[name] = f * min(max(step, FACTOR_MIN), FACTOR_MAX)
        elif name in bad and bad[name] / ok[name] >= BRACKET:
            out[name] = math.sqrt(ok[name] * bad[name])
        else:
            out[name] = ok[name]
    return out


def _per_template(g: dict[str, float], templates: dict[str, set[str]]) -> dict[str, float]:
    return {t: f for m, f in g.items() if f != 1.0 for t in sorted(templates.get(m, ()))}


def _model_factors(pr: PlanResult) -> dict[str, float]:
    out: dict[str, float] = {}
    for u in pr.all_units:
        out[u.model] = pr.derate.get(u.template.id, 1.0)
    return out


def _templates_by_model(pr: PlanResult) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for u in pr.all_units:
        out.setdefault(u.model, set()).add(u.template.id)
    return out


def _final(pr: PlanResult, with_baselines: bool) -> dict:
    if with_baselines:
        attach_baselines(pr, derated(pr.all_units, pr.derate))
    return build_plan_json(pr)


def _with_margin(sim: dict, margin: float) -> dict:
    """``sim`` with each model's ``met`` requiring its miss ratio <= 1 - margin (and the ratio
    rescaled so that the factor search aims under the bound), the plan's ``met`` likewise."""
    models = []
    for m in sim["models"]:
        ratio = m["objective"].get("ratio")
        scaled = None if ratio is None else ratio / (1.0 - margin)
        models.append({**m, "met": m["met"] and scaled is not None and scaled <= 1.0,
                       "objective": {**m["objective"], "ratio": scaled}})
    return {**sim, "models": models, "met": all(m["met"] for m in models)}


def _fleet_key(doc: dict) -> str:
    """What a simulation of plan.json depends on besides the spec: counts, routing, demand scale."""
    return json.dumps([[(a["unit"], a["count"]) for a in doc["allocations"]], doc["routing"], doc["demand_scale"]],
                      sort_keys=True)


def _round(rnd: int, doc: dict, sim: dict, g: dict[str, float]) -> dict:
    return {"round": rnd, "cost_usd_per_hour": doc["cost_usd_per_hour"], "met": sim["met"],
            "derate": {m: round(f, 6) for m, f in sorted(g.items())},
            "models_met": {m["model"]: m["met"] for m in sim["models"]},
            "missed_units": sorted(u["unit"] for u in sim["units"] if u.get("count") and not u["objective"]["met"])}


def _model_fidelity(m: dict) -> dict:
    pick = ("mean", "p50", "p90", "p99")
    return {"model": m["model"], "slo": m["slo"], "met": m["met"], "requests": m["count"],
            "ttft_ms": {k: m["ttft_ms"].get(k) for k in pick}, "tpot_ms": {k: m["tpot_ms"].get(k) for k in pick},
            "attainment": m["objective"].get("attainment"), "preempted_requests": m.get("preempted_requests", 0)}
