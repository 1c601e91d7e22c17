"""plan.json ``fidelity``: what verification (``hetinfra.plan.verify``) found, recorded on the document
assembled from the final plan (``hetinfra.plan.pipeline``), with verification's warnings."""

from __future__ import annotations

import math

from hetinfra.errors import InfeasibleError
from hetinfra.plan.planner import PlanResult
from hetinfra.plan.verify import Verification, load_basis, verification_load

OVER_PROVISIONING_DEFINITION = (
    "per model: the largest multiple x of the declared demand on the grid load x (1 + k/8), k = 0..7 "
    "(searched from load x 9/8 up, then by bisection), at which the simulation with the same seed and "
    "requests still meets the objective; ratio = the smallest over models")


def record(doc: dict, v: Verification, strict: bool) -> None:
    """Add ``fidelity`` (and the verification's warnings) to plan.json ``doc`` of ``v.pr``.
    ``strict``: a plan that still misses raises InfeasibleError (exit 3) instead of a warning."""
    from hetinfra.sim import SIMULATOR_VERSION

    spec = v.pr.inputs.spec
    settings = spec.planning.verify
    load = verification_load(spec)
    doc["fidelity"] = {
        "verified": True, "met": v.sim["met"], "rounds": len(v.history), "max_rounds": settings.max_rounds,
        "simulator": SIMULATOR_VERSION, "seed": settings.seed, "load": load,
        "load_basis": load_basis(spec),
        "statistic": {m["model"]: m["slo"]["percentile"] for m in v.sim["models"]},
        "burst_cv": settings.burst_cv, "requests": settings.requests, "requests_per": "model",
        "margin": settings.margin, "confidence": spec.planning.confidence,
        "cost_before_usd_per_hour": v.history[0]["cost_usd_per_hour"],
        "cost_after_usd_per_hour": doc["cost_usd_per_hour"],
        "over_provisioning": {"ratio": min(v.sustained.values()) if v.sustained else None, "by_model": v.sustained,
                              "definition": OVER_PROVISIONING_DEFINITION},
        "trim": {"removed": v.trimmed, "checked_removals": v.checked_removals},
        "derate": {m: round(f, 6) for m, f in sorted(_model_factors(v.pr).items())},
        "derate_by_template": {t: round(f, 6) for t, f in sorted(v.pr.derate.items())
                               if t in {a["template"] for a in doc["allocations"]}},
        "models": [_model_fidelity(m) for m in v.sim["models"]], "history": v.history,
        "round_by_model": dict(sorted(v.round_by_model.items())),
    }
    _finish_warnings(doc, v.sim, v.stopped, v.stop_reason, strict, load)


def _finish_warnings(doc: dict, sim: dict, stopped: bool, stop_reason: str | None, strict: bool, load: float) -> None:
    if stop_reason:
        doc["warnings"].append(stop_reason)
    if stopped:
        # a round's solve was cut by the wall clock: its result steered the rounds after it (said even
        # when the baselines' cut already set solver.safety_stop: this one can change the plan)
        from hetinfra.solver.decompose import SAFETY_WARNING

        doc["solver"]["safety_stop"] = True
        doc["fidelity"]["safety_stop"] = True
        doc["warnings"].append(SAFETY_WARNING + " (during verification)")
    if not sim["met"]:
        missing = ", ".join(m["model"] for m in sim["models"] if not m["met"])
        msg = (f"the plan misses the latency objective of {missing} in simulation at {load:g}x demand "
               f"after {doc['fidelity']['rounds']} round(s) of re-planning")
        if strict:
            raise InfeasibleError(msg, hint="loosen the SLO or its percentile, allow faster GPUs, raise "
                                            "planning.verify.max_rounds, or plan without --strict-verify",
                                  details={"fidelity": doc["fidelity"]})
        doc["warnings"].append(msg + ": see fidelity in plan.json, and `hetinfra simulate` for details")


def _model_factors(pr: PlanResult) -> dict[str, float]:
    """Per model, the smallest factor of the templates its plan uses (1: none derated)."""
    out: dict[str, float] = {}
    for uid in pr.result.n:
        u = pr.units[uid]
        out[u.model] = min(out.get(u.model, math.inf), pr.derate.get(u.template.id, 1.0))
    return out


def _model_fidelity(m: dict) -> dict:
    pick = ("mean", "p50", "p90", "p95", "p99")
    return {"model": m["model"], "slo": m["slo"], "met": m["met"], "requests": m["count"],
            "ttft_ms": {k: m["ttft_ms"].get(k) for k in pick}, "tpot_ms": {k: m["tpot_ms"].get(k) for k in pick},
            "attainment": m["objective"].get("attainment"), "preempted_requests": m.get("preempted_requests", 0)}
