"""The compiled replica simulator (``_core.c``): which units it runs, and the arrays it reads and fills.

``hetinfra.sim.columns.simulate_unit`` hands each unit to :func:`run_arrays` first. The core is the
inner loop of ONE configuration only: the default scheduler policy (``policy.VLLMv1``) on the default
KV allocator (``kv.KVBlocks``), one pool of independent replicas (``clock.run_replicas``). Any other
policy, allocator or route (``hetinfra.sim.pools``) runs on the Python loop, so adding one touches
Python only, and the C file never states a second policy. The core runs a unit
when the replicas are fresh, use that policy and allocator, and their step model is one it knows (an
estimator ``Engine``, a mixed pipeline of them, or either scaled to a profile:
``hetinfra.sim.engines``); otherwise, or when the
extension is not built (a platform without a C compiler: setup.py builds it optionally),
:func:`run_arrays` returns None and the reference loop (``hetinfra.sim.replica.run_replicas``) runs
the unit. The two give bit-identical results, request by request and
replica by replica (tests/sim/test_core.py), so which one ran changes no figure of a plan, only how
long verification takes. ``HETINFRA_SIM_CORE=python`` forces the Python loop (the reference).
"""

from __future__ import annotations

import math
import os
from array import array
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np

from hetinfra import cores, keep_stack_chunks
from hetinfra.sim.kv import KVBlocks
from hetinfra.sim.policy import VLLMv1
from hetinfra.sim.replica import Request, ScaledEngine, checked_step

try:
    from hetinfra.sim import _core as _built
    from hetinfra.sim._core import exp_gaps as _exp_gaps_core, fsum as _fsum_core, run as _run_core, sample as _sample_core
except ImportError:  # not built: the Python loops run every unit and draw every request
    _built = _run_core = _sample_core = _exp_gaps_core = _fsum_core = None

__all__ = ["COEFFICIENTS", "available", "compiled", "exp_gaps", "fsum", "map_units", "python_only", "run_arrays",
           "sample"]

#: the estimator Engine's step coefficients, in the order _core.c reads them (its enum)
COEFFICIENTS = ("w_gpu", "moe_p", "bw", "kv_tok_bw", "c_dlin", "c_dattn", "c_plin", "c_pattn", "pp", "serial",
                "ar_lat", "ar_tok", "p2p_lat", "p2p_tok", "fixed", "per_seq", "per_req", "isl", "overlap")
#: per replica, what _core.c reports, in its order (integers come back as floats)
STATS = ("busy_s", "seq_area", "steps", "q_area", "q_max", "kv_area", "kv_max", "preemptions", "q_t", "used", "seq_max")
_INTEGER_STATS = frozenset({"steps", "q_max", "kv_max", "preemptions", "used", "seq_max"})
if _built is not None and getattr(_built, "NSTATS", None) != len(STATS):  # a stale in-place build: not used
    _run_core = _sample_core = _exp_gaps_core = _fsum_core = None


keep_stack_chunks()  # the simulator's loops are the hottest Python hetinfra runs (the CLI calls it first)


def available() -> bool:
    """Whether units run in the compiled core (built, and not switched off by HETINFRA_SIM_CORE=python)."""
    return _run_core is not None and os.environ.get("HETINFRA_SIM_CORE", "").lower() != "python"


def _step_model(engine) -> tuple[array, float | None] | None:
    """The core's description of ``engine``: its stages' coefficients and its profile factor (None:
    not scaled); None when the core does not know this step model."""
    from hetinfra.perf.estimator import Engine
    from hetinfra.perf.pipeline import PipelineEngine

    factor = None
    if type(engine) is ScaledEngine:
        factor, engine = float(engine.factor), engine.engine
    stages = list(engine.stages) if type(engine) is PipelineEngine else [engine] if type(engine) is Engine else None
    if stages is None or any(type(s) is not Engine for s in stages):
        return None
    return array("d", [float(getattr(s, c)) for s in stages for c in COEFFICIENTS]), factor


def compiled(replica) -> bool:
    """Whether the core states ``replica``'s scheduler and KV allocator: exactly the defaults (a
    subclass may change any choice, so it runs in Python)."""
    return type(replica.policy) is VLLMv1 and type(replica.kv) is KVBlocks


def run_arrays(replicas: list, arrival, prompt, output, progress: Callable[[int], None] | None = None):
    """Serve requests given as columns (arrival s as float64, prompt and output tokens as int64, in
    arrival order) on fresh ``replicas`` of one engine, as ``replica.run_replicas`` does: the
    columns (first, finish, replica, preempted) it fills, with each replica's statistics set as the
    Python loop leaves them; None (nothing done) when the core cannot run them."""
    if not available() or not replicas or not len(arrival):
        return None
    head = replicas[0]
    model = _step_model(head.engine)
    if model is None or any(r.engine is not head.engine or r.win.version or r.bs != head.bs or r.max_seqs != head.max_seqs
                            or not compiled(r) for r in replicas):
        return None
    arrival = np.ascontiguousarray(arrival, dtype=np.float64)
    prompt = np.ascontiguousarray(prompt, dtype=np.int64)
    output = np.ascontiguousarray(output, dtype=np.int64)
    too_big = np.flatnonzero(prompt + output > head.blocks * head.bs)
    if len(too_big):  # a request larger than one engine's KV cache: the reference's error, at the first one
        i = int(too_big[0])
        head.check_fits(Request(i, float(arrival[i]), int(prompt[i]), int(output[i])))
    n, k = len(arrival), len(replicas)
    first, finish = np.empty(n), np.empty(n)
    replica, preempted = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    stats = np.zeros(len(STATS) * k)
    stages, factor = model
    try:
        _run_core(stages, factor is not None, factor or 1.0, head.pp, head.budget, head.blocks, head.bs, head.max_seqs,
                  k, arrival, prompt, output, first, finish, replica, preempted, stats)
    except ArithmeticError:
        checked_step(math.nan)  # the reference's error
    for i, r in enumerate(replicas):
        for j, name in enumerate(STATS):
            v = float(stats[len(STATS) * i + j])
            setattr(r.kv if name == "used" else r, name, int(v) if name in _INTEGER_STATS else v)
        r.outstanding = 0
        r.win.version += 1
    if progress is not None:
        progress(n)
    return first, finish, replica, preempted


def sample(rng, n: int, cum: list[float], rules: list, origins: bool):
    """``draw._sample``'s n draws from ``rng`` (a ``random.Random``) in the core: each request's
    class (the first whose cumulative share ``cum`` exceeds random() x the total, at most the last),
    its sizes (``rules``: one ``workload.SizeRule`` per class), the uniform that picks its origin
    (when ``origins``) and the one that picks its unit; the same numbers from the same generator
    as the Python loop, so the same requests. (cls, prompt, output, where or None, pick) as numpy
    arrays; None when the core is not available or a rule is beyond it (sizes of 2**32 or more)."""
    if not available() or any(max(r.input[1], r.output[1], len(r.rows)) >= 2**32 for r in rules):
        return None
    flat, table = [], []
    for r in rules:
        flat += [*r.input, *r.output, len(table), len(r.rows)]
        table += r.rows
    cls, prompt, output = (np.empty(n, dtype=np.int64) for _ in range(3))
    where, pick = np.empty(n), np.empty(n)
    _sample_core(_state(rng), np.array(cum, dtype=np.float64), np.array(flat, dtype=np.int64),
                 np.array(table, dtype=np.int64).reshape(-1, 2) if table else np.empty((0, 2), dtype=np.int64),
                 origins, cls, prompt, output, where, pick)
    return cls, prompt, output, where if origins else None, pick


def exp_gaps(rng, n: int) -> np.ndarray | None:
    """``workload.arrival_gaps``' Poisson loop in the core: ``-log(1 - rng.random())`` n times from
    ``rng``'s state (which is left as it was: each model's arrivals have a generator of their own);
    None when the core is not available."""
    if not available():
        return None
    out = np.empty(n)
    _exp_gaps_core(_state(rng), out)
    return out


def _state(rng) -> np.ndarray:
    """``rng``'s Mersenne Twister state as the core reads it: random.getstate()'s 624 words and index."""
    _, words, _ = rng.getstate()
    return np.array(words, dtype=np.uint32)


def fsum(values: np.ndarray) -> float:
    """``math.fsum(values)`` of a float64 array: the exact sum correctly rounded (the core runs
    CPython's algorithm; math.fsum itself where the core is not built or a value is not finite)."""
    values = np.ascontiguousarray(values, dtype=np.float64)
    total = _fsum_core(values) if available() else None
    return math.fsum(values.tolist()) if total is None else total


def python_only(units) -> bool:
    """Whether every one of ``units`` (a SimPlan's allocations) that has replicas replays on the Python
    loop: a LoRA unit always does (hetinfra.sim.lora). Such work runs in turn, never on threads that
    only take turns at the GIL (``hetinfra plan benchmarks/specs/lora-50.yaml``: 25.6 s with them,
    23.6 s without, the same plan)."""
    units = [a for a in units if a.count]
    return bool(units) and all(a.adapters is not None for a in units)


def map_units(fn: Callable, items: list, threads: bool = True) -> list:
    """``[fn(x) for x in items]``, on a thread per core where there are several items and cores and
    the core runs them (it releases the GIL; the Python loops hold it): each result is what a serial
    call gives, whatever the threads' timing, and the list is in ``items``' order. ``threads`` False:
    in turn (work the Python loop does alone gains nothing from threads that contend for the GIL)."""
    workers = min(len(items), cores()) if available() and threads else 1
    if workers <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(workers, thread_name_prefix="hetinfra-sim") as pool:
        return list(pool.map(fn, items))
