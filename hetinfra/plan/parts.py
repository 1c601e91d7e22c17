"""The parts of a simulation view that one model's simulation reads (``hetinfra.plan.replicated``):
a model's requests depend on its own demand, units and routing only (``hetinfra.sim.plan_sim``), so
a judge simulates the models it must on a view reduced to them, keys each model's judgement by its
part, and joins runs of disjoint sets of models (at their own lengths) into one simulation."""

from __future__ import annotations

__all__ = ["reduced", "model_part", "part_of", "joined"]


def part_of(whole, models: set[str]):
    """The SimPlan of ``view`` with only ``models``' demand from ``whole``, its SimPlan (validated once
    per judgement): the other models' demand set to none, nothing validated again (re-validating a
    32-model fleet's view for each subset of undecided models was a tenth of its judging). It shares
    ``whole``'s memo keys: the keys of a model depend on its own demand, units and routing only
    (hetinfra.sim.plan_sim._memo_keys), which the subset keeps as they are, and it asks only for
    the models it keeps."""
    part = whole.model_copy(update={"models": [m if m.name in models else m.model_copy(update={"rate_rps": 0.0})
                                               for m in whole.models]})
    part._memo_keys = whole.memo_keys
    return part


def joined(view: dict, sims: list[dict]) -> dict:
    """One simulation of ``view`` from simulations of disjoint sets of its models at one seed (at
    their own lengths): models and units in the view's order; ``requests`` the longest."""
    order = {m["name"]: k for k, m in enumerate(view["models"])}
    units = {a["unit"]: k for k, a in enumerate(view["allocations"])}
    models = sorted((m for s in sims for m in s["models"]), key=lambda m: order[m["model"]])
    return {**sims[0], "requests": max(s.get("requests") or 0 for s in sims), "met": all(m["met"] for m in models),
            "models": models, "units": sorted((u for s in sims for u in s["units"]), key=lambda u: units.get(u["unit"], len(units)))}


def reduced(view: dict, models: set[str]) -> dict:
    """``view`` with ``models`` only: their entries, allocations, routing and templates (a model's
    simulation reads nothing else: hetinfra.sim.plan_sim), so that validating it costs what they do,
    not what the whole fleet does."""
    allocs = [a for a in view["allocations"] if a["model"] in models]
    used = {a["template"] for a in allocs}
    out = {**view, "models": [m for m in view["models"] if m["name"] in models], "allocations": allocs,
           "routing": {m: r for m, r in view["routing"].items() if m in models},
           "templates": [t for t in view.get("templates") or () if t["id"] in used]}
    for key in ("routing_by_origin", "origins"):
        if view.get(key):
            out[key] = {m: r for m, r in view[key].items() if m in models}
    return out


def model_part(view: dict, model: str) -> list:
    """What of ``view`` one model's simulation reads (:func:`reduced` of it), for a key: its entry,
    its allocations and their templates, its routing and origins, and the plan's demand scale,
    objective and engine (deploy)."""
    part = reduced(view, {model})
    return [part["models"], part["allocations"], part["templates"], part["routing"], part.get("routing_by_origin"),
            part.get("origins"), view.get("demand_scale"), view.get("objective"), view.get("deploy"),
            view.get("plan_version")]
