"""Pressure (hetinfra.plan.replicated): a unit whose KV cache came near full, or that preempted, in a
replication is near a preemption cascade, and one whose replica ran near its max_num_seqs sequences
is near the seat cliff (a burst becomes a queue): rare events that a few clean seeds do not rule out.
So is a model whose spec declares them (burst_pressed: an attainment target, bursty arrivals).
The confirmation runs such a model on more seeds, at the plan's longest run, and judges it at a
higher confidence (docs/verification.md, "KV pressure"); the search's early acceptance never takes a
model whose KV cache filled on one seed."""

from __future__ import annotations

#: the confirmation's most replications for a model under KV pressure (its KV cache at least
#: KV_NEAR full, or preempting, in a replication of either judge): a collapse that one seed in five or
#: ten shows (a preemption cascade, a unit that stops keeping up) passes 7 clean seeds 21-48% of the
#: time and 13 only 5-25%. On bench_scale.py's other fleets, models confirmed on 7 clean seeds then
#: missed on 2 of 10 audit seeds (o13-phi-4 of --mix other --seed 1: unstable twice)
MAX_PRESSED = 13
#: the confirmation's most replications where the arrivals are bursty (burst_pressed, bursty): a run's
#: statistic then has a heavy upper tail (the runs with a strong burst), so the spread of 13 runs is itself
#: a matter of luck. Held-out h62b (mixtral-8x7b, p99 TPOT 35 ms, burst_cv 2; $43.92/h): its 4 blocks of 13
#: confirm seeds had p99 TPOT sd 0.64, 1.04, 0.78, 1.28 ms and 99% bounds 34.49 (met: the block the
#: confirmation ran), 35.83, 35.18, 36.50; 60 audit runs, sd 0.94, one at 36.6. Its 2 blocks of 26 bound
#: it at 35.46 and 36.16: each vetoes
MAX_BURST_PRESSED = 26
#: under bursty arrivals, a pressed model whose MAX_PRESSED-run bound is within this share of its objective runs
#: on to MAX_BURST_PRESSED; one further inside stops at MAX_PRESSED and keeps its block after a veto
#: (Replicated.beyond_pressed). h62b's blocks of 13 bound it at 0.985, 1.024, 1.005 and 1.043 of its objective: a
#: 13-run bound's luck spans some 6% there, and the lucky block sat 1.5% inside. Every model of a bursty
#: fleet run to 26 and judged again on each veto's fresh block made a 48-model linked fleet under burst_cv 2
#: spend the work budget before its confirmation ended (195 -> 305 s, not confirmed)
BURST_EDGE = 0.05
#: a unit whose KV cache was this full, or that preempted, in a replication is near a collapse
KV_FULL = 0.99
#: the confirmation's pressure (MAX_PRESSED): a KV cache this full in a replication. o04-llama-2-13b of
#: bench_scale.py --mix other --seed 3 peaked at 0.92-1.0 in every audit run and collapsed in 2 of 10;
#: its 2 confirmation runs had stayed under KV_FULL
KV_NEAR = 0.95
#: a stable run's drift (hetinfra.sim.stability: the last window's median TTFT over the middle's) that
#: counts as pressure: past a quarter of the way from steady (1) to unstable (DRIFT_MAX, 1.5)
DRIFT_NEAR = 1.125
#: the confirmation's one-sided confidence for a model under KV pressure (the judges' is
#: hetinfra.plan.verdicts.CONFIDENCE, 0.95): such a model's runs have a heavy upper tail (a preemption
#: burst lifts one run's p99 far above the others'), which the Student-t bound's normal shape does not
#: see, and the promise (no run past its objective by more than 2% in ten, issue 33) leaves a run of
#: that kind no 5% chance. benchmarks/specs/capped-trio.yaml's model c was confirmed on 13 seeds at
#: p99 TPOT 75.3 ms, 95% bound 79.1 against 80, and missed by 5.7% on 1 of 30 audit seeds (a preemption
#: burst); its 99% bound on the same 13 runs is 81.0
PRESSED_CONFIDENCE = 0.99


#: the confirmation's pressure too: a replica whose running batch came this near its max_num_seqs in a
#: replication (hetinfra.sim.unit_entry: batch.max). At the cap new requests wait for a sequence to
#: finish, so a burst becomes a queue: bench_scale.py's independent fleet's m04-llama-31-70b (one H100 TP4
#: replica, 256 seats) ran 246-248 sequences at most in its clean runs and hit 256 in every run whose
#: p99 TTFT jumped (1.8-4.1 s against 0.7-0.8 s; 1 of 10 audit runs missed). No other unit of that fleet
#: passed 0.88 of its seats
SEATS_NEAR = 0.95


def burst_pressed(view: dict, model: str, burst_cv: float) -> bool:
    """The confirmation's pressure too, which the spec declares and no run need show: ``model``'s misses
    come with a run's rare burst. So is a model whose objective in ``view`` has an attainment target (the
    share of requests within its latency bounds, ``slo.attainment``), or one verified under arrivals
    burstier than Poisson (``burst_cv`` > 1, planning.verify.burst_cv: the judge's workload carries it).
    A burst puts one run's statistic past its objective while the runs without one sit inside it: with
    an attainment target those attain 1.0, so the replications' spread is nil (the Student-t bound sees
    none) and the Clopper-Pearson bound on the pooled requests counts a burst's misses as independent
    requests when they come together; a percentile is lifted in that one run only. Held-out specs
    (benchmarks/results/promise_stop60.txt, promise_burst61.txt): mixtral-8x7b at 10 req/s, burst_cv 2,
    at attainment 0.999 (benchmarks/specs/attain-burst.yaml) was confirmed on 6 runs that all attained
    1.0 and missed in 8 of 60 audit runs (one at 0.980); the same plan missed 4 of 30 confirm seeds.
    Without the attainment target (p99 TTFT 1 s / TPOT 35 ms only) it was confirmed on 4 runs, p99 TPOT
    bound 33.7 ms, and one audit run in 60 missed by 4.6% (seed 1161: a burst lifts the decode batch's
    peak from ~100 to 114, p99 TPOT 36.6 ms): one 10-seed audit in six fails. Such a model is run at the
    plan's longest run and judged at the same confidence as one under KV pressure, on as many seeds, or
    on MAX_BURST_PRESSED under bursts (most_pressed): a run with a burst is one it may show. Poisson
    arrivals (burst_cv 1, every example's) press no model that has no attainment target."""
    slo = next((m.get("slo") or {} for m in view["models"] if m["name"] == model), {})
    return slo.get("attainment") is not None or bursty(burst_cv)


def bursty(burst_cv: float) -> bool:
    """Whether arrivals of coefficient of variation ``burst_cv`` are burstier than Poisson's (1)."""
    return burst_cv > 1.0


def most_pressed(burst_cv: float) -> int:
    """The confirmation's most replications (and its block of seeds) at ``burst_cv``: MAX_BURST_PRESSED
    where the arrivals are bursty, else MAX_PRESSED."""
    return MAX_BURST_PRESSED if bursty(burst_cv) else MAX_PRESSED


def under_pressure(sims: list[dict], model: str) -> bool:
    """The confirmation's pressure: in one of ``sims``, a unit of ``model`` whose KV cache was KV_NEAR full
    (or that preempted), or one of whose replicas ran SEATS_NEAR x its max_num_seqs sequences at once (the
    seat cliff: a unit with no KV pressure can still queue there), or one that drifted DRIFT_NEAR of the
    way to unstable (:func:`_drifting`)."""
    ttft = {m["model"]: (m.get("slo") or {}).get("ttft_ms") for s in sims for m in s["models"]}
    return any(_kv_full(u, KV_NEAR) or _seats_full(u) or _drifting(u, ttft.get(model)) for u in _units(sims, model))


def _drifting(unit: dict, ttft_objective_ms: float | None) -> bool:
    """A unit whose stable run still drifted: its last window's median TTFT DRIFT_NEAR x the middle's and
    past hetinfra.sim.stability's floor (DRIFT_FLOOR of the objective). A unit near its capacity with few,
    long requests swings between runs: held-out h142's one TP8 replica for 6% of 32k-100k-token prompts
    drifted 0.7-1.4 in the runs verification saw, all stable, and was unstable in 2 of 8 other seeds
    (drift 1.6-3.6; benchmarks/results/heldout65b). Judged as under pressure it is run on more seeds."""
    from hetinfra.sim.stability import drifts

    st = unit.get("stability") or {}
    ms = st.get("ttft_ms") or {}
    return bool(st.get("tested") and ttft_objective_ms) and drifts(
        st.get("drift") or 0.0, (ms.get("last", 0.0) - ms.get("middle", 0.0)) / 1e3, ttft_objective_ms, DRIFT_NEAR)


def kv_filled(sims: list[dict], model: str, full: float = KV_FULL) -> bool:
    """Whether a unit of ``model`` filled its KV cache (or preempted) in one of ``sims``: the state in
    which one burst more starts a preemption cascade (services/summarize.yaml's plan: the KV cache
    full in 9 of 30 seeds, a collapse in 3 of them)."""
    return any(_kv_full(u, full) for u in _units(sims, model))


def _units(sims: list[dict], model: str):
    """The entries of ``model``'s units in every one of ``sims``."""
    return (u for s in sims for u in s["units"] if u["model"] == model)


def _kv_full(unit: dict, full: float) -> bool:
    return bool(unit.get("preemptions")) or (unit.get("kv_occupancy") or {}).get("max", 0) >= full


def _seats_full(unit: dict) -> bool:
    batch = unit.get("batch") or {}
    return bool(batch.get("max_num_seqs")) and (batch.get("max") or 0) >= SEATS_NEAR * batch["max_num_seqs"]


def thrashing(sims: list[dict], model: str, confidence: float) -> dict | None:
    """plan.json ``fidelity.confirmation.models[].thrashing`` for ``model`` over its replications ``sims``:
    the unit of ``model`` whose lower ``confidence`` bound on its re-preemption (the KV thrashing
    figure of hetinfra.sim.stability), from its preemptions and victims summed over the runs, is
    highest, that bound, the rule's limit (``repreemption_max``), and whether it is within it. None
    where no unit of it preempted.

    The re-preemption bound of hetinfra.sim.stability (recorded per run, not judged there since
    stop 56: the scheduler re-preempts the request it just re-admitted, so one run's counts can be
    one short squeeze of the cache) over every run's evidence at once, at the judgement's
    confidence instead of a run's SIGMAS: a unit that re-preempts past the limit with a few victims
    a run shows it in the sum of its runs where no one run can (10 victims preempted 60 times,
    m = 0.83, is 1.8 standard deviations past 0.75 in a run and 6.6 over 13). Before stop 55, a
    prediction bound on each run's estimate judged it; a run's estimate from a handful of victims
    spreads from 0 to 0.9 where nothing thrashes (o13-phi-4 of bench_scale.py --mix other --seed 1,
    linked)."""
    import math

    from hetinfra.sim.bounds import t_quantile
    from hetinfra.sim.stability import REPREEMPTION_MAX, repreemption_low

    counts: dict[str, list[int]] = {}
    for s in sims:
        for u in s["units"]:
            if u["model"] == model and u.get("count"):
                st = u.get("stability") or {}
                pooled = counts.setdefault(u["unit"], [0, 0])
                pooled[0] += int(st.get("preempted_requests") or 0)
                pooled[1] += int(st.get("preemptions") or 0)
    z = t_quantile(confidence, math.inf)  # the normal quantile
    bounds = {unit: repreemption_low(victims, total, z) for unit, (victims, total) in counts.items() if total}
    if not bounds:
        return None
    unit = max(sorted(bounds), key=bounds.get)
    return {"unit": unit, "bound": round(bounds[unit], 4), "repreemption_max": REPREEMPTION_MAX,
            "met": bounds[unit] <= REPREEMPTION_MAX}


def thrashing_first(units: list[dict], record: dict) -> list[dict]:
    """A model's judged ``units`` with the one ``record`` (:func:`thrashing`) names read as missing by its
    bound over the limit (``objective.ratios.thrashing``): the padding then gives it the replica
    (hetinfra.plan.pad.padding_order reads the worst ratio)."""
    ratio = record["bound"] / record["repreemption_max"]
    return [{**u, "objective": {**u["objective"], "met": False, "ratio": max(u["objective"].get("ratio") or 0.0, ratio),
                                "ratios": {**(u["objective"].get("ratios") or {}), "thrashing": round(ratio, 4)}}}
            if u["unit"] == record["unit"] else u for u in units]


def only_pressure_misses(confirmation: dict) -> bool:
    """Whether every model ``confirmation`` missed met at the promised load and missed only a check of a
    model under pressure: its KV thrashing over its replications, or the cliff probe 5% past it
    (hetinfra.plan.replicated._judge_pressed). The padding gives such a model a replica on the unit
    that thrashed or fell, where a veto would derate every regime of its model
    (benchmarks/specs/two-models.yaml: summary-7b's 2 x L40S became one H100, $11.17 -> $14.32/h,
    where a third L40S is $13.03/h)."""
    missed = [m for m in confirmation["models"] if not m["met"]]
    return bool(missed) and all(pressure_miss(m) for m in missed)


def pressure_miss(model: dict) -> str | None:
    """What a missed model of a confirmation missed that only a model under pressure is judged on:
    "thrashing", "cliff", or None (plan.json fidelity.confirmation.padded[].missed_on)."""
    if not (model.get("thrashing") or {}).get("met", True):
        return "thrashing"
    return "cliff" if (model.get("cliff") or {}).get("collapsed") else None
