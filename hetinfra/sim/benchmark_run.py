"""A published benchmark run replayed on the simulator, measured as the benchmark measures it.

The published end-to-end checks (``hetinfra.perf.published``) compare our rate with a run's. A
saturated steady-state rate is not what those runs measured, so each check replays the run's own
procedure on the simulator (``hetinfra.sim``: the same step model as the estimator), one engine of
the run's data-parallel group at a time, under the scheduler the run's vLLM version ran:

* ``burst``: every request sent at once and the run timed from the first send to the last reply
  (``benchmark_serving.py`` at ``--request-rate inf``; MLPerf's offline scenario): requests / makespan,
  so the fill at the start and the drain at the end count, as they did.
* ``server``: MLPerf's server scenario: Poisson arrivals at a scheduled rate for the run's duration,
  valid while the p99 TTFT and the p99 per-request TPOT hold the limits; the result is the largest
  valid scheduled rate's completed rate (requests / time of the last completion, as LoadGen reports
  "completed samples per second").

A data-parallel group of ``engines`` engines is one engine at 1/engines of the load (a random split
of a Poisson stream is Poisson; LoadGen's own balancing across engines is smoother, so this errs
slow). Request sizes: samples of the run's data set's published per-sample lengths, drawn as its
benchmark drew them and scaled to the run's published means (``request_sizes``); where no lengths are
published, every request at the means. vLLM V0's multi-step decoding: ``multi_step_outputs``.
Engine constants: the run's vLLM version's (``hetinfra.perf.calibration.for_engine``). Deterministic: fixed seeds. The published checks (``published_checks``; tests/perf/test_published.py)
live here rather than in ``hetinfra.perf.e2e_checks``: the simulator is a later stage than perf, which
never imports it (the estimator's mean-field figures for the same runs stay there, for the planner).
"""

from __future__ import annotations

import math
import random
import statistics
from functools import lru_cache

from hetinfra.catalog.gpus import GPUS
from hetinfra.catalog.models import MODELS
from hetinfra.perf.calibration import CALIBRATION, Calibration, for_engine
from hetinfra.perf.engine import Estimate, build_engine
from hetinfra.perf.e2e_checks import Check, summary
from hetinfra.perf.published import PUBLISHED, PublishedRate, size_table
from hetinfra.sim import core
from hetinfra.sim.clock import run_replicas
from hetinfra.sim.policy import DEFAULT_POLICY, SchedulerPolicy, VLLMv0
from hetinfra.sim.replica import Replica, ReplicaConfig, Request

__all__ = ["simulated_rate", "policy_for", "request_sizes", "multi_step_outputs", "published_check", "published_checks", "published_report",
           "SEED"]

SEED = 20250402  # MLPerf v5.0's publication date: any fixed seed; the checks must not depend on it much
MAX_OUTPUT = 1024  # MLPerf Llama-2-70B's max_new_tokens
SEARCH_STEPS = 6  # bisection steps of the server scenario's rate search (to 2.2%)


def policy_for(p: PublishedRate) -> SchedulerPolicy:
    """The scheduler the run's engine ran: vLLM V0 without chunked prefill, or V1."""
    return VLLMv0() if p.scheduler == "v0" else DEFAULT_POLICY


def request_sizes(p: PublishedRate, n: int, seed: int = SEED) -> list[tuple[int, int]]:
    """n (input, output) token counts of the run, as its benchmark drew them from its data set's
    per-sample lengths: MLPerf's LoadGen with replacement, inputs in the run's model's tokens
    (``input_scale``), outputs scaled to the run's measured tokens per sample and capped at MAX_OUTPUT; vLLM's benchmark_serving.py a sample without replacement (the
    first n of a seeded shuffle), inputs and outputs scaled to the run's published means (at least 4
    tokens, the sampler's floor); or every request at the published means."""
    if not p.sizes:
        return [(p.isl, p.osl)] * n
    table = size_table(p.sizes)
    out_scale = p.osl * len(table) / sum(o for _, o in table)
    rng = random.Random(seed)
    if p.sampler == "vllm":
        in_scale = p.isl * len(table) / sum(a for a, _ in table)
        return [(max(4, round(a * in_scale)), max(4, round(o * out_scale))) for a, o in rng.sample(table, n)]
    return [(max(1, round(a * p.input_scale)), max(1, min(MAX_OUTPUT, round(o * out_scale))))
            for a, o in (rng.choice(table) for _ in range(n))]


def multi_step_outputs(outputs: list[int], steps: int) -> list[int]:
    """The tokens each request is decoded for under V0's multi-step decoding (``--num-scheduler-steps``
    N, vLLM 0.6.0): a prefill step schedules one step (no lookahead slots for prefills), a decode batch
    N steps at once (``num_lookahead_slots`` N - 1) with no admission inside it, and a sequence that
    finishes inside a batch is computed to the batch's end. Admissions happen only between batches, so
    a request joins decoding at a batch's start and holds its slot, its compute and its KV for
    1 + N * ceil((output - 1) / N) tokens. Exact for a burst under the V0 policy: every finish then falls
    on a batch boundary, where the policy admits, as vLLM does (``hetinfra.sim.policy.VLLMv0``); under
    arrivals spread in time (not replayed) an arrival would also wait for the batch to end."""
    if steps <= 1:
        return list(outputs)
    return [1 + steps * math.ceil((o - 1) / steps) if o > 1 else o for o in outputs]


def _replica(p: PublishedRate, calib: Calibration) -> Replica | Estimate:
    """One engine of the run, on ``calib`` as the run's vLLM version runs it (``for_engine``: from 0.14
    on, asynchronous scheduling)."""
    e = build_engine(MODELS[p.model], GPUS[p.gpu], p.tp, 1, p.isl, p.osl, p.precision, p.gpu_memory_utilization,
                     p.max_num_seqs, p.kv_precision, p.max_num_batched_tokens, for_engine(calib, p.vllm_version,
                                                                                        p.scheduler_steps))
    if isinstance(e, Estimate):
        return e
    return Replica(e, ReplicaConfig(max_num_seqs=p.max_num_seqs, policy=policy_for(p)))


class Served:
    """What a replayed run's requests did: their arrival, first-token and finish times (s), outputs."""

    def __init__(self, arrival, first, finish, output):
        self.arrival, self.first, self.finish, self.output = arrival, first, finish, output

    @property
    def makespan(self) -> float:
        return max(self.finish)


def _run(p: PublishedRate, calib: Calibration, arrivals: list[float], seed: int = SEED) -> Served | Estimate:
    """Serve the run's requests arriving at ``arrivals`` on one engine: in the compiled core where it
    states the run's scheduler (V1), else on the Python loop."""
    rep = _replica(p, calib)
    if isinstance(rep, Estimate):
        return rep
    sizes = request_sizes(p, len(arrivals), seed)
    prompt, output = [a for a, _ in sizes], multi_step_outputs([b for _, b in sizes], p.scheduler_steps)
    got = core.run_arrays([rep], arrivals, prompt, output) if rep.policy is DEFAULT_POLICY else None
    if got is not None:
        return Served(arrivals, got[0].tolist(), got[1].tolist(), output)
    reqs = [Request(i, t, a, b) for i, (t, a, b) in enumerate(zip(arrivals, prompt, output))]
    run_replicas([rep], reqs)
    return Served(arrivals, [r.first for r in reqs], [r.finish for r in reqs], output)


def burst_rate(p: PublishedRate, calib: Calibration = CALIBRATION) -> float:
    """Requests per second of the whole run when its requests are all sent at t=0 (one engine's share):
    the median over the run's ``draws`` independent draws of its requests."""
    n = max(1, p.requests // p.engines)
    rates = []
    for draw in range(p.draws):
        served = _run(p, calib, [0.0] * n, SEED + draw)
        if isinstance(served, Estimate):
            return 0.0
        rates.append(p.engines * n / served.makespan)
    return statistics.median(rates)


def _p99(values: list[float]) -> float:
    values = sorted(values)
    return values[max(0, math.ceil(0.99 * len(values)) - 1)]


def server_run(p: PublishedRate, rate: float, calib: Calibration = CALIBRATION) -> tuple[bool, float]:
    """(whether the limits hold, completed req/s of the whole run) at a scheduled rate of ``rate`` req/s."""
    per_engine = rate / p.engines
    n = max(100, round(per_engine * p.duration_s))
    rng = random.Random(SEED)
    t, arrivals = 0.0, []
    for _ in range(n):
        t += rng.expovariate(per_engine)
        arrivals.append(t)
    s = _run(p, calib, arrivals)
    if isinstance(s, Estimate):
        return False, 0.0
    ttft = _p99([f - a for a, f in zip(s.arrival, s.first)])
    tpot = _p99([(e - f) / (o - 1) for f, e, o in zip(s.first, s.finish, s.output) if o > 1])
    ok = ttft * 1e3 <= p.ttft_p99_ms and tpot * 1e3 <= p.tpot_p99_ms
    return ok, p.engines * n / s.makespan


def server_rate(p: PublishedRate, calib: Calibration = CALIBRATION) -> float:
    """The completed rate at the largest scheduled rate whose run holds the p99 limits (bisection
    between half and twice the published rate; 0 if half fails)."""
    lo, hi = 0.5 * p.rate, 2.0 * p.rate
    ok, completed = server_run(p, lo, calib)
    if not ok:
        return 0.0
    for _ in range(SEARCH_STEPS):
        mid = math.sqrt(lo * hi)
        ok, got = server_run(p, mid, calib)
        if ok:
            lo, completed = mid, got
        else:
            hi = mid
    return completed


def simulated_rate(p: PublishedRate, calib: Calibration = CALIBRATION) -> float:
    """The run's rate as its benchmark measured it, replayed on the simulator."""
    if calib is CALIBRATION:
        return _cached(p)
    return server_rate(p, calib) if p.procedure == "server" else burst_rate(p, calib)


@lru_cache(maxsize=None)
def _cached(p: PublishedRate) -> float:
    return server_rate(p) if p.procedure == "server" else burst_rate(p)


def published_check(p: PublishedRate, calib: Calibration = CALIBRATION) -> Check:
    """The published run replayed under its procedure and its engine's scheduler, against the published
    rate (error = replayed / published - 1; + = optimistic)."""
    how = "MLPerf server, p99 limits" if p.procedure == "server" else f"{p.requests} requests at once"
    return Check(p.name, p.rate, simulated_rate(p, calib), f"{how}, vLLM {p.scheduler.upper()} scheduler")


def published_checks(calib: Calibration = CALIBRATION) -> list[Check]:
    """Every published run of ``hetinfra.perf.published.PUBLISHED``, replayed."""
    return [published_check(p, calib) for p in PUBLISHED]


def published_report(calib: Calibration = CALIBRATION) -> str:
    """A line per published run (published, replayed, error, procedure) and their summary."""
    checks = published_checks(calib)
    lines = [f"{c.label}: published {c.measured:.2f} req/s, replayed {c.predicted:.2f} ({c.error:+.1%}; {c.binding})"
             for c in checks]
    lines.append(summary("published end-to-end rates", checks))
    return "\n".join(lines)
