"""What of a simulation view one model's judgement depends on (hetinfra.plan.replicated): the keys its
verdicts, its vetoes and its lumpy count are kept by. A model's requests depend on its own demand, units
and routing only (hetinfra.sim.plan_sim), so a model the trim, a later round or the over-provisioning
search left as it was is judged once."""

from __future__ import annotations

from hetinfra.plan.parts import model_part

__all__ = ["simulated_part", "model_state", "PLANNED_ONLY"]


#: allocations[] keys the planner writes for the reader (its rated load), which no simulation reads
#: (hetinfra.document.simulation.SimUnit ignores them): a derating factor moves them, not the fleet
PLANNED_ONLY = ("utilization", "target_qps_per_replica")


def simulated_part(view: dict, model: str) -> list:
    """:func:`model_part` as the simulator reads it: of a template's rates only a profiled class's rate
    over the factor (hetinfra.sim.engines.measured_capacity, as the unit memo's key reads it), without the factor or
    the planner's rated load per allocation. Rounds whose plans differ only in a factor that left a
    model's units, counts and routing the same simulate it the same way: its judgement is kept."""
    models, allocations, templates, *rest = model_part(view, model)
    allocations = [{k: v for k, v in a.items() if k not in PLANNED_ONLY} for a in allocations]
    return [models, allocations, [_as_simulated(t) for t in templates], *rest]


def _as_simulated(t: dict) -> dict:
    from hetinfra.sim.engines import measured_capacity

    profiled = measured_capacity(t.get("capacity_rps"), t.get("sources"), t.get("derate"))
    return {**{k: v for k, v in t.items() if k not in ("capacity_rps", "derate")}, "profiled": profiled}


def model_state(view: dict, model: str) -> str:
    """What of ``view`` one model's simulation depends on: its demand, its units and their replicas,
    and its routing (hetinfra.sim.plan_sim: a model's requests depend on nothing else)."""
    import json

    demand = next((m for m in view["models"] if m["name"] == model), {})
    return json.dumps([model, demand.get("rate_rps"), view.get("demand_scale"),
                       sorted((a["unit"], a["count"]) for a in view["allocations"] if a["model"] == model),
                       view["routing"].get(model), (view.get("routing_by_origin") or {}).get(model)],
                      sort_keys=True)
