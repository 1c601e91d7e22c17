"""plan.json ``fidelity``: what verification (``hetinfra.plan.verify``) found, recorded on the document
assembled from the final plan (``hetinfra.plan.pipeline``), with verification's warnings."""

from __future__ import annotations

import math

from hetinfra.document import Plan
from hetinfra.document.fidelity import (Confirmation, Fidelity, FidelityModel, OverProvisioning, Replications,
                                        Trim)
from hetinfra.errors import InfeasibleError
from hetinfra.plan.planner import PlanResult
from hetinfra.plan.summary_promise import padding_cause
from hetinfra.plan.verify import Verification, load_basis, verification_load

OVER_PROVISIONING_DEFINITION = (
    "per model: the largest multiple x of the declared demand on the grid load x (1 + k/8), k = 0..7 "
    "(searched from load x 9/8 up, then by bisection), at which the judgement on the decide seeds (the "
    "same requests per replication) still meets the objective; ratio = the smallest over models")
#: appended where the plan leaves demand unserved (unmet_rps): the simulator routes each class's served
#: share at every load, so x multiplies the demand served, not the declared demand
UNSERVED_CLAUSE = ("; where the plan leaves demand unserved (unmet_rps), the same share of it stays unserved at "
                   "every multiple: x multiplies the demand the plan serves")


def record(doc: Plan, v: Verification, strict: bool) -> Plan:
    """Plan ``doc`` of ``v.pr`` with ``fidelity`` (:func:`fidelity_of`) and the verification's warnings.
    ``strict``: a plan that still misses raises InfeasibleError (exit 3) instead of a warning."""
    fidelity = fidelity_of(v, doc.cost_usd_per_hour, {a.template for a in doc.allocations})
    update = {"fidelity": fidelity, "warnings": [*doc.warnings, *_warnings(fidelity, v, strict, doc.unserved_models())]}
    if v.stopped:  # a round's solve was cut by the wall clock (said even when the baselines' cut already set it)
        update["solver"] = doc.solver.model_copy(update={"safety_stop": True})
    return doc.model_copy(update=update)


def unverified(reason: str) -> Fidelity:
    """fidelity of a plan that was not simulated, and why."""
    return Fidelity(verified=False, reason=reason)


def fidelity_of(v: Verification, cost_after: float | None, templates: set[str]) -> Fidelity:
    """plan.json ``fidelity`` of ``v``: the plan's cost after verification is ``cost_after``, its
    allocations use ``templates`` (the derates recorded are theirs)."""
    from hetinfra.sim import SIMULATOR_VERSION

    spec = v.pr.inputs.spec
    settings = spec.planning.verify
    return Fidelity(
        verified=True, met=bool(v.sim["met"] and v.confirmation.get("met", False)), rounds=len(v.history),
        max_rounds=settings.max_rounds, settle_rounds=settings.settle_rounds, simulator=SIMULATOR_VERSION, seed=settings.seed,
        load=verification_load(spec), load_basis=load_basis(spec),
        statistic={m["model"]: m["slo"]["percentile"] for m in v.sim["models"]},
        burst_cv=settings.burst_cv, requests=v.requests or settings.requests, requests_per="model",
        margin=settings.margin, confidence=spec.planning.confidence,
        cost_before_usd_per_hour=v.history[0]["cost_usd_per_hour"], cost_after_usd_per_hour=cost_after,
        over_provisioning=OverProvisioning(ratio=min(v.sustained.values()) if v.sustained else None,
                                           by_model=v.sustained, definition=OVER_PROVISIONING_DEFINITION
                                           + (UNSERVED_CLAUSE if v.pr.result.leaves_unmet
                                              else "")),
        trim=Trim(removed=v.trimmed, checked_removals=len(v.last_pass), put_back=v.put_back, last_pass=v.last_pass),
        derate={m: round(f, 6) for m, f in sorted(_model_factors(v.pr).items())},
        derate_by_template={t: round(f, 6) for t, f in sorted(v.pr.derate.items()) if t in templates},
        models=[_model_fidelity(m) for m in v.sim["models"]], history=v.history,
        round_by_model=dict(sorted(v.round_by_model.items())),
        replications=_replications(v, settings.seed, settings.burst_cv), confirmation=_confirmation(v),
        **({"safety_stop": True} if v.stopped else {}))


def _warnings(fidelity: Fidelity, v: Verification, strict: bool, unserved: frozenset[str] = frozenset()) -> list[str]:
    """The verification's warnings; a plan that still misses raises InfeasibleError under ``strict``.
    ``unserved``: the models the plan serves none of (Plan.unserved_models)."""
    out = [v.stop_reason] if v.stop_reason else []
    if v.stopped:
        # its result steered the rounds after it: this cut can change the plan
        from hetinfra.solver.decompose import SAFETY_WARNING

        out.append(SAFETY_WARNING + " (during verification)")
    if v.put_back:
        units = ", ".join(sorted({r["unit"] for r in v.put_back}))
        out.append(f"{len(v.put_back)} removal(s) of the trim put back ({units}): the plan missed "
                   "without them on the confirmation's fresh seeds")
    for r in v.padded:
        if r["replicas_added"]:  # kept only where they made it meet (hetinfra.plan.pad removes the rest)
            units = ", ".join(sorted(r["replicas_by_unit"]))
            moved = "".join(f"; {rps:.4g} req/s moved to them from {u}, which could take no replica within the "
                            "spec's rules" for u, rps in sorted(r.get("relieved", {}).items()))
            cause = padding_cause(r["missed_on"], len(v.vetoes), r.get("after_veto"))
            out.append(f"{r['replicas_added']} replica(s) added to {r['model']} ({units}) as {cause}{moved}; met on fresh "
                       "seeds with them")
    for r in v.off_peak_fleets:
        if r["met"] and r["replicas_added"]:  # hetinfra.plan.levels: counts_by_period keeps them
            units = ", ".join(sorted(r["replicas_added"]))
            out.append(f"the off-peak fleet of profile period(s) {', '.join(map(str, r['periods']))} missed without "
                       f"{sum(r['replicas_added'].values())} more replica(s) ({units}): counts_by_period keeps "
                       "them there; met on fresh seeds with them")
    out += v.off_peak
    if not v.sim["met"]:
        msg = (f"{not_met_words(v.sim['models'], unserved)} in simulation at {fidelity.load:g}x demand "
               f"after {fidelity.rounds} round(s) of re-planning")
    elif v.confirmation.get("reason"):  # the work budget was spent first: not confirmed, never "met"
        msg = f"the plan is {v.confirmation['reason']}"
    elif not v.confirmation.get("met", False):
        msg = (f"{not_met_words(v.confirmation['models'], unserved)} at {fidelity.load:g}x demand on the "
               "confirmation's fresh seeds (it met on the seeds its search decided on)")
    else:
        return out
    if strict:
        raise InfeasibleError(msg, hint="loosen the SLO or its percentile, allow faster GPUs, raise "
                                        "planning.verify.max_rounds, or plan without --strict-verify",
                              details={"fidelity": fidelity.model_dump(mode="json", exclude_unset=True)})
    return out + [msg + ": see fidelity in plan.json, and `hetinfra simulate` for details"]


def not_met_words(models: list[dict], unserved: set[str]) -> str:
    """"the plan misses the latency objective of A; ..." for the judged ``models`` not met, each said
    as what it is: a miss; undecided (its bound straddled the objective when its replications ended, as
    when the work budget stopped them: not shown to meet, which a held-out LoRA spec's summary called a
    miss); or a model none of whose requests the plan serves (``unserved``: Plan.unserved_models), of
    which no latency was measured to miss."""
    kinds: dict[str, list[str]] = {"missed": [], "undecided": [], "unserved": []}
    for m in models:
        if m["met"]:
            continue
        kind = ("unserved" if m["model"] in unserved
                else "undecided" if m.get("decision") == "undecided" else "missed")
        kinds[kind].append(m["model"])
    parts = []
    if kinds["missed"]:
        parts.append(f"misses the latency objective of {', '.join(kinds['missed'])}")
    if kinds["undecided"]:
        parts.append(f"is not shown to meet the latency objective of {', '.join(kinds['undecided'])} (undecided: its "
                     "bound straddled the objective when its replications ended; counted as not met)")
    if kinds["unserved"]:
        parts.append(f"serves none of the demand of {', '.join(kinds['unserved'])} (unmet_rps), so no latency "
                     "objective of it is shown met")
    return "the plan " + "; it ".join(parts or ["is not met"])


def _model_factors(pr: PlanResult) -> dict[str, float]:
    """Per model, the smallest factor of the templates its plan uses (1: none derated)."""
    out: dict[str, float] = {}
    for uid in pr.result.n:
        u = pr.units[uid]
        out[u.model] = min(out.get(u.model, math.inf), pr.derate.get(u.template.id, 1.0))
    return out


def _model_fidelity(m: dict) -> FidelityModel:
    """A model's line of fidelity.models: its worst replication's latency blocks (the published keys),
    then the judgement over the replications (estimate, bound, decision)."""
    pick = ("mean", "p50", "p90", "p95", "p99")
    return FidelityModel.model_validate({
        "model": m["model"], "slo": m["slo"], "met": m["met"], "requests": m["count"],
        "ttft_ms": {k: m["ttft_ms"].get(k) for k in pick}, "tpot_ms": {k: m["tpot_ms"].get(k) for k in pick},
        "attainment": m["objective"].get("attainment"), "preempted_requests": m.get("preempted_requests", 0),
        **_judgement(m)})


def _judgement(m: dict) -> dict:
    """What the replications say of one model (hetinfra.sim.replications.judge, or a one-seed screen),
    with its confidence where it is not every judgement's (a model the confirmation judged under KV
    pressure: hetinfra.plan.kv_pressure.PRESSED_CONFIDENCE)."""
    from hetinfra.plan.verdicts import CONFIDENCE

    level = (m.get("objective") or {}).get("confidence")
    return {"replications": m.get("replications", 1), "seeds": list(m.get("seeds") or ()),
            "decision": m.get("decision", "met" if m["met"] else "missed"), "stable": m.get("stable", True),
            "estimate": m.get("estimate"), "bound": m.get("bound"), "ratio_bound": m.get("ratio_bound"),
            **({"confidence": level} if level is not None and level != CONFIDENCE else {})}


def _replications(v: Verification, seed: int, burst_cv: float) -> Replications:
    """fidelity.replications: how every decision and the confirmation were judged (at ``burst_cv``)."""
    from hetinfra.plan import replication_method
    from hetinfra.plan.kv_pressure import most_pressed
    from hetinfra.plan.verdicts import CONFIDENCE, CONFIRM_CONFIDENCE

    counted = any(m.get("lumpy") for m in v.confirmation.get("models", ()))  # hetinfra.plan.lumpy
    return Replications(method=replication_method.method(burst_cv, counted), confidence=CONFIDENCE,
                        confirm_confidence=CONFIRM_CONFIDENCE,
                        base_seed=seed,
                        start=replication_method.START, step=replication_method.STEP,
                        max_replications=most_pressed(burst_cv),
                        decide_requests=v.decide_requests or v.requests, decide_seeds=list(v.sim.get("seeds") or ()),
                        confirm_seeds=list(v.confirmation.get("seeds") or ()), simulated=dict(v.replications))


def _confirmation(v: Verification) -> Confirmation:
    """fidelity.confirmation: the final plan on the confirm seeds, per model."""
    c = v.confirmation
    return Confirmation.model_validate({
        "met": bool(c.get("met", False)), "seeds": list(c.get("seeds") or ()),
        "models": [{"model": m["model"], "met": m["met"], **_judgement(m),
                    **({"requests": v.confirm_requests[m["model"]]} if m["model"] in v.confirm_requests else {}),
                    **{k: m[k] for k in ("thrashing", "cliff", "lumpy") if m.get(k)}}
                   for m in c.get("models", ())],
        "vetoes": list(v.vetoes), **({"padded": list(v.padded)} if v.padded else {}),
        **({"off_peak": list(v.off_peak_fleets)} if v.off_peak_fleets else {}),
        **({"reason": c["reason"]} if c.get("reason") else {})})
