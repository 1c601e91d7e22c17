"""The plan summary's lines about the promise (plan.json ``fidelity``), as plain text: each model's
judgement and what binds it, the confirmation on fresh seeds, the padding and the capacity the
simulation leaned on. ``hetinfra.plan.summary`` prints them under its tables; plan.json's warnings
and the tests read the same lines."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetinfra.sim.stats import MIN_ATTAINED

if TYPE_CHECKING:
    from hetinfra.document import Plan


def verified_fidelity(plan: "Plan"):
    """plan.json ``fidelity`` where the plan was verified (typed: hetinfra.document.fidelity), else None."""
    return plan.fidelity if plan.fidelity and plan.fidelity.verified else None


def confirmed_by_model(plan: "Plan") -> dict:
    """Per model, its judgement on the confirmation's fresh seeds (plan.json fidelity.confirmation)."""
    c = plan.fidelity.confirmation if plan.fidelity else None
    return {m.model: m for m in c.models} if c else {}


def with_bound(value, bound) -> str:
    return _ms(value) + (f" (bound {_ms(bound)})" if bound is not None else "")


def judgement_lines(plan: "Plan") -> list[str]:
    """Per model, the binding statistic as "p99 TPOT 78.7 ms (95% bound 80.9) vs 80", on the search's
    seeds and on the confirmation's, with the replications each rests on."""
    f = verified_fidelity(plan)
    if f is None or f.replications is None:
        return []
    def conf(judged) -> str:  # a judgement's own confidence where it states one (under pressure: KV or seats)
        return f"{100 * (judged.confidence or f.replications.confidence):g}%"

    confirmed = confirmed_by_model(plan)
    unserved = plan.unserved_models()
    out = []
    for m in f.models or ():
        if m.model in unserved:
            out.append(f"{m.model}: serves none of its demand (unmet_rps): no latency to judge")
            continue
        line = f"{m.model}: {_binding(m, m, conf(m))} ({_searched(m)}{_overruled(m, m)})"
        c = confirmed.get(m.model)
        if c is not None:
            line += f"; confirmed on fresh seeds: {_binding(m, c, conf(c))} ({c.replications} " \
                    f"replication(s), {c.decision}{_overruled(m, c)})"
        out.append(line)
    return out


def _searched(m) -> str:
    """How the search judged ``m``: its replications and decision; one replication met is the search's
    early acceptance (far inside on the screening seed's batch means), which the promise line's
    range of replications (the confirmation's) does not cover, so it says so."""
    if m.replications == 1 and m.decision == "met":
        return "met on its screening seed, far inside"
    return f"{m.replications} replication(s), {m.decision}"


def _worst(m, judged) -> tuple[str, float, float | None, float] | None:
    """The statistic of model ``m``'s objective that decided ``judged`` (its judgement or its
    confirmation's), as (key, estimate, bound, ratio): the one whose bound (its estimate where it has
    none) is worst against its objective, the attainment included (a lower bound: objective over
    bound), as evaluate's ratio reads it (hetinfra.sim.stats); None where none was judged."""
    stats = {k: m.statistic(k, judged) for k in BINDING_STATS if m.objective(k) and m.statistic(k, judged)[0] is not None}
    if not stats:
        return None

    def ratio(k: str) -> float:
        est, bound = stats[k]
        v = est if bound is None else bound
        return m.objective(k) / max(v, MIN_ATTAINED) if k == "attainment" else v / m.objective(k)

    k = max(stats, key=ratio)
    return k, stats[k][0], stats[k][1], ratio(k)


def _binding(m, judged, conf: str) -> str:
    """:func:`_worst`'s statistic in words: 'p99 TPOT 78.7 ms (95% bound 80.9) vs 80', 'attainment
    99.33% (99% bound 98.95%) vs 99%'."""
    worst = _worst(m, judged)
    if worst is None:
        return "no statistic"
    k, est, bound, _ = worst
    goal = m.objective(k)
    if k == "attainment":
        text = f"attainment {_pct(est)}" + (f" ({conf} bound {_pct(bound)})" if bound is not None else "")
        return text + f" vs {100 * goal:g}%"
    text = f"{m.percentile} {k.split('_')[0].upper()} {_num(est)} ms"
    if bound is not None:
        text += f" ({conf} bound {_num(bound)})"
    return text + f" vs {goal:g}"


def _overruled(m, judged) -> str:
    """Words after a "missed" whose every bound is inside its objective: no statistic decided it, a check
    after the statistics did (hetinfra.plan.verdicts.not_met: a veto, a cliff, KV thrashing, a lumpy
    count; or a unit past its ceiling)."""
    worst = _worst(m, judged)
    if judged.decision != "missed" or worst is None or worst[3] > 1:
        return ""
    return ", every bound inside: a later check overruled them, see fidelity in plan.json"


#: the statistics an objective may bound, in the order a tie between their ratios is broken
BINDING_STATS = ("ttft_ms", "tpot_ms", "attainment")


def _pct(v: float) -> str:
    """An attainment as a percentage to two decimals: 0.98946 -> "98.95%"."""
    return f"{100 * v:.2f}%"


def _num(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def promise_lines(doc: "Plan") -> list[str]:
    """What the plan promises and what keeping it cost (plan.json ``fidelity``, docs/verification.md),
    how it was judged, and how much of its capacity rests on measured, calibrated or extrapolated
    rates (and how to measure the extrapolated part)."""
    out = []
    fid = doc.fidelity if doc.fidelity and doc.fidelity.verified else None
    if fid is not None and fid.load_basis is not None:
        stats = ", ".join(sorted(set((fid.statistic or {}).values()))) or "p99"
        reps = fid.replications
        confirming = (f" ({100 * reps.confirm_confidence:g}% in the confirmation)"
                      if reps and reps.confirm_confidence else "")
        sample = (f"{reps.start} to {reps.max_replications} replications of {fid.requests} requests per model, "
                  f"{100 * reps.confidence:g}% bounds{confirming}; {_seed_words(fid)}") if reps else \
            f"seed {fid.seed}, {fid.requests} requests per model"
        out.append(f"promise: every objective ({stats}) at {fid.load:g}x demand ({fid.load_basis}), {sample}"
                   + (f", margin {fid.margin:g}" if fid.margin else ""))
        out.extend(judgement_lines(doc))
        over = fid.over_provisioning.ratio if fid.over_provisioning else None
        out.append(f"verification: ${fid.cost_before_usd_per_hour:.2f}/h before, ${fid.cost_after_usd_per_hour:.2f}/h "
                   f"after ({trim_words(fid)}" + _padded_words(fid)
                   + "); over-provisioning " + _over_words(over, fid.load, doc))
        out.extend(_trim_stop_lines(doc))
        out.extend(_off_peak_lines(fid))
    out.extend(_capacity_lines(doc))
    return out


def _over_words(over: float | None, load: float, doc) -> str:
    """The over-provisioning figure: at the top of the search's grid (hetinfra.sim.minimal.sustained_load:
    up to load x (1 + (2**SUSTAIN_STEPS - 1) / 2**SUSTAIN_STEPS)) it is where the search stopped, not
    where the plan stops meeting ("2.25x" for one L4 at 1% utilisation read as a measurement)."""
    if over is None:
        return "n/a"
    from hetinfra.sim.minimal import SUSTAIN_STEPS

    top = load * (1 + (2 ** SUSTAIN_STEPS - 1) / 2 ** SUSTAIN_STEPS)
    words = f"{over:g}x {_demand_served(doc)} sustained"
    return f"at least {words} (the top of the search)" if over >= top - 1e-9 else words


def _demand_served(doc) -> str:
    """What the over-provisioning multiplies: the demand, or where the plan leaves some unserved
    (unmet_rps) the part it serves (the unserved share stays unrouted at every multiple)."""
    return "the served demand" if doc.unmet_by_model() else "demand"


def _seed_words(fid) -> str:
    """The seeds the plan's judgements ran on (fidelity.replications: the search's last judgement and the
    confirmation's, hetinfra.sim.replications.seeds_for from the base seed): "seeds from 0" read as
    seeds 0, 1, ... where the search ran 1000, 1003 and the confirmation 1001, 1004."""
    reps = fid.replications
    return (f"seeds: search {seed_list(reps.decide_seeds)}, confirmation {seed_list(reps.confirm_seeds)} "
            f"(base seed {reps.base_seed}: fidelity.replications)")


def seed_list(seeds) -> str:
    """Seeds as runs of seeds_for's stride (3), a run of more than 4 shortened: "1001, 1004",
    "1079, 1082, ..., 1115 (13 seeds)"; "none" where no judgement ran."""
    runs: list[list[int]] = []
    for s in seeds:
        if runs and s - runs[-1][-1] == 3:
            runs[-1].append(s)
        else:
            runs.append([s])
    return ", ".join(", ".join(map(str, r)) if len(r) <= 4 else f"{r[0]}, {r[1]}, ..., {r[-1]} ({len(r)} seeds)"
                     for r in runs) or "none"


def trim_words(fid) -> str:
    """What the trim did (fidelity.trim): the removals it kept, and those the confirmation put back, as
    removals that were made and undone ("0 replica(s) trimmed, 1 put back" read as a contradiction)."""
    kept = sum(fid.trim.replicas_by_unit(fid.trim.removed).values()) if fid.trim else 0
    back = sum(fid.trim.replicas_by_unit(fid.trim.put_back).values()) if fid.trim else 0
    if not back:
        return f"{kept} replica(s) trimmed"
    return (f"{kept + back} replica(s) trimmed, {back} put back as the confirmation missed without them, "
            f"so {kept} stay trimmed")


def _trim_stop_lines(doc) -> list[str]:
    """Where the trim's last pass refused a removal without simulating it (fidelity.trim.last_pass: a
    unit past its ceiling, or a rule of the spec), what refused it, in one line: a reader who sees a
    unit at 87% wants to know why it keeps the replica a simulation might not need."""
    fid = doc.fidelity
    held = sorted((c for c in (fid.trim.last_pass if fid.trim else ()) if c.refused_by in ("ceiling", "rules")),
                  key=lambda c: c.whole)  # one replica fewer first: the removal a reader has in mind
    if not held:
        return []
    label = {a.unit: f"{a.model} {a.gpu} {a.cloud}/{a.region}" for a in doc.allocations}

    def why(c) -> str:
        removal = ("all of " if c.whole else "one replica fewer of ") + label.get(c.unit, c.unit)
        if c.refused_by == "rules":
            return f"{removal} breaks the spec ({c.detail})"
        over = "it" if c.unit_over == c.unit else label.get(c.unit_over, c.unit_over)
        return f"{removal} puts {over} at {c.ratio:.2f}x its {c.basis}"

    more = f"; {len(held) - 2} more in fidelity.trim.last_pass" if len(held) > 2 else ""
    return [f"trim: kept by a ceiling or a rule of the spec, not by the simulation, at {fid.load:g}x demand: "
            + "; ".join(map(why, held[:2])) + more]


def _off_peak_lines(fid) -> list[str]:
    """A demand profile's off-peak fleets as verification judged and mended them
    (fidelity.confirmation.off_peak; hetinfra.plan.levels), in one line."""
    fleets = fid.confirmation.off_peak if fid.confirmation else []
    if not fleets:
        return []

    def periods(f) -> str:
        return ", ".join(map(str, f.periods))

    mended = [f"period(s) {periods(f)} met with {sum(f.replicas_added.values())} replica(s) given back"
              for f in fleets if f.met and f.replicas_added]
    missed = [f"period(s) {periods(f)} still miss{' ' + ', '.join(f.missed) if f.missed else ''}"
              for f in fleets if not f.met]
    words = "; ".join(mended + missed) or "all met"
    return [f"off-peak: {len(fleets)} fleet(s) of counts_by_period judged at their largest demand, routed as the "
            f"gateway routes: {words} (`hetinfra simulate OUT --period K` runs any period)"]


def _padded_words(fid) -> str:
    """The verification line's words for the padding (fidelity.confirmation.padded), if any."""
    padded = [p for p in (fid.confirmation.padded if fid.confirmation else ()) if p.replicas_added]
    if not padded:
        return ""
    vetoes = len(fid.confirmation.vetoes)
    return "; " + ", ".join(f"{p.replicas_added} added to {p.model}" + ("" if p.met else " (still missing)")
                            + f" as {padding_cause(p.missed_on, vetoes, p.after_veto)}" for p in padded)


def padding_cause(missed_on: str, vetoes: int, after_veto: int | None = None) -> str:
    """Why a model was padded (fidelity.confirmation.padded[].missed_on, ``after_veto``), in words."""
    if after_veto:  # hetinfra.plan.alternative: the vetoed plan, padded, cost less than the resumed search's
        return (f"the confirmation missed the plan of veto {after_veto} of {vetoes}, which with them cost less than "
                "the plan the resumed search confirmed")
    if missed_on == "search":
        return "the search's rounds ran out with it missing"
    if missed_on == "thrashing":  # hetinfra.plan.kv_pressure.thrashing
        return "its KV cache thrashed (a bound on its re-preemption over its runs past the limit of 0.75)"
    if missed_on == "cliff":  # hetinfra.plan.cliff
        from hetinfra.plan.cliff import CLIFF_MARGIN

        return f"it met on the confirmation's seeds but collapsed at {CLIFF_MARGIN:.0%} more load (a cliff that close)"
    return "the confirmation missed" + (f" after {vetoes_words(vetoes)}" if vetoes else " on its fresh seeds")


def vetoes_words(n: int) -> str:
    """"1 veto", "2 vetoes"."""
    return f"{n} veto" + ("" if n == 1 else "es")


def _capacity_lines(doc: "Plan") -> list[str]:
    gpus: dict[str, int] = {}
    for a in doc.allocations:
        level = a.confidence or "unknown"
        gpus[level] = gpus.get(level, 0) + a.gpus_per_replica() * a.count
    total = sum(gpus.values())
    if not total:
        return []
    out = ["capacity (GPUs): " + ", ".join(f"{100 * gpus[k] / total:.0f}% {k}"
                                          for k in ("measured", "calibrated", "extrapolated", "unknown") if gpus.get(k))]
    if gpus.get("extrapolated"):
        units = sorted({f"{a.gpu} TP{a.tp}" + (f" PP{a.pp}" if a.pp > 1 else "") for a in doc.allocations
                        if a.confidence == "extrapolated"})
        out.append(f"extrapolated capacity: {gpus['extrapolated']} GPU(s) ({', '.join(units)}) rest on rates nobody "
                   "measured; measure them before you spend: `hetinfra profile OUT --launch`")
    return out


def _ms(v) -> str:
    return "-" if v is None else f"{v:,.0f} ms" if v >= 100 else f"{v:.1f} ms"
