"""One vLLM engine (V1 scheduler) as a discrete-event simulator, request by request.

A replica is three parts with seams between them:

* its **scheduler policy** (``hetinfra.sim.policy``: which requests a step serves, what it admits,
  whom it preempts; ``VLLMv1`` by default);
* its **KV allocator** (``hetinfra.sim.kv.KVBlocks``: blocks of 16 tokens, allocated chunk by chunk);
* its **clock** (``hetinfra.sim.clock.Window``: the current window of steps and when it ends), driven
  with the other replicas' by ``hetinfra.sim.clock.EventLoop``.

This class holds the state they share and the mechanics no policy changes: arrival, a window's
completion (tokens emitted, requests finished), admission, the decode aggregate, preemption.

What vLLM does (``vllm/v1/core/sched/scheduler.py``) and what is kept here:

* continuous batching with chunked prefill: every step has a token budget
  (``--max-num-batched-tokens``). RUNNING requests are served first, in admission order: a
  decoding request takes 1 token, a partially prefilled prompt its next chunk. Then WAITING requests
  are admitted FCFS while budget remains, fewer than ``max_num_seqs`` run, and the KV cache has free
  blocks for the chunk they are scheduled (blocks of 16 tokens, allocated chunk by chunk; no
  prefix caching, no watermark).
* when a running request needs a new block and none is free, the most recently admitted running
  request is preempted (recompute mode): its blocks are freed and it goes back to the FRONT of the
  waiting queue, to re-prefill its prompt and the tokens generated so far. A step that preempted
  admits nobody.
* a token is emitted at the end of the step that computed it; the step that completes a (re)prefill
  samples the next token (the first token for a fresh request). Finished requests free their blocks.
  A request may arrive with KV already computed (``Request.computed``: a decode pool's request,
  whose prompt a prefill pool computed, ``hetinfra.sim.pools``): admission allocates its blocks and
  schedules only the rest.
* step time: ``Engine.step_s`` of the step's actual composition (prefill tokens, the sum of their
  causal positions, decode sequences, the sum of their contexts, sequences held), the same step
  model the estimator's TPOT is the mean-field case of.
* pipeline parallelism (pp stages): vLLM keeps pp micro-batches in flight (the batch queue), all
  sharing one KV pool and ``max_num_seqs``. SIMPLIFICATION: the pp micro-batches run in lockstep
  and are balanced: one simulated step carries pp micro-batches' worth of work (token budget
  pp x mbt) and lasts ``step_s`` of ONE micro-batch holding 1/pp of the composition, so saturation
  throughput is pp x b / step_s(b), exactly the estimator's ``rate = pp*b/((osl-1)*tpot)``.

Speed: decoding requests are kept as aggregates (count, sum of contexts, counts by block phase, a
heap of finishing clocks), never visited one by one. Between events (an arrival, a prompt chunk, a
finish, a preemption) a pure-decode batch keeps its composition and only contexts grow, so k decode
steps are taken at once: step_s is affine in the decode context on each roofline branch (the
window is cut at a branch switch) so k steps last k*d0 + a*k(k-1)/2; the KV blocks they need are
counted exactly from the block phases, and the window stops before the KV cache would run out (the
next step then preempts exactly as one step at a time would). An arrival during a window cuts it
at the step in progress, where the scheduler would first see the new request.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from heapq import heappop, heappush
from typing import Protocol

from hetinfra.errors import InvalidInputError
from hetinfra.facts import MAX_NUM_SEQS
from hetinfra.sim.clock import Window, run_replicas
from hetinfra.sim.kv import KVBlocks
from hetinfra.sim.policy import DEFAULT_POLICY, SchedulerPolicy

__all__ = ["StepModel", "ReplicaConfig", "Request", "Replica", "ScaledEngine", "run_replicas"]


BROKEN_STEP = "a simulated engine step has a non-positive or non-finite duration: the unit's step model is broken"


def checked_step(d: float) -> float:
    """A step's duration, refused unless positive and finite (the clock would stall or run away)."""
    if not 0.0 < d < math.inf:
        raise InvalidInputError(BROKEN_STEP, hint="check the unit's GPU and model facts (custom_gpus, a profile); re-plan")
    return d


class StepModel(Protocol):
    """What the simulator needs from ``hetinfra.perf.estimator.Engine`` (or a pipeline of them)."""

    pp: int
    mbt: int
    kv_tokens: float

    def step_s(self, prefill_tokens: float, prefill_positions: float, decode_seqs: float, decode_context: float,
               running_seqs: float | None = None) -> float: ...


class ScaledEngine:
    """An engine whose every step takes ``factor`` times as long (a measured profile's rate is the
    estimator's rate / factor at saturation). Same KV size and token budget."""

    def __init__(self, engine: StepModel, factor: float):
        self.engine, self.factor = engine, factor
        self.pp, self.mbt, self.kv_tokens = engine.pp, engine.mbt, engine.kv_tokens

    def step_s(self, prefill_tokens, prefill_positions, decode_seqs, decode_context, running_seqs=None):
        return self.factor * self.engine.step_s(prefill_tokens, prefill_positions, decode_seqs, decode_context,
                                                running_seqs)


@dataclass(frozen=True)
class ReplicaConfig:
    """vLLM engine settings the scheduler uses (planning pins max_num_seqs=256), and the scheduler
    policy (vLLM V1's unless a study names another: hetinfra.sim.policy)."""

    max_num_seqs: int = MAX_NUM_SEQS
    block_size: int = 16  # vLLM's default KV block size on CUDA
    policy: SchedulerPolicy = DEFAULT_POLICY

    def __post_init__(self):
        if self.max_num_seqs < 1 or self.block_size < 1:
            raise InvalidInputError(f"max_num_seqs and block_size must be >= 1 (got {self.max_num_seqs}, "
                                    f"{self.block_size})")


class Request:
    """One request (or one leg of it in a pool: ``origin`` is then the client's request). ``g`` =
    tokens generated so far; ``computed`` = tokens whose KV is computed (``computed`` at arrival:
    KV computed elsewhere and transferred, which admission allocates blocks for)."""

    __slots__ = ("rid", "arrival", "prompt", "output", "replica", "g", "computed", "first", "finish", "xb", "dec",
                 "gen", "preempted", "origin")

    def __init__(self, rid: int, arrival: float, prompt: int, output: int, computed: int = 0, origin=None):
        self.rid, self.arrival, self.prompt, self.output = rid, arrival, prompt, output
        self.replica = -1
        self.g = self.xb = self.gen = self.preempted = 0
        self.computed = computed
        self.origin = origin
        self.dec = False  # in the decode aggregate
        self.first = self.finish = math.nan


class Replica:
    """One engine: its scheduler policy, KV allocator and clock, and the state they share (queues,
    the decode aggregate, statistics). Drive it with :meth:`add` (an arrival at time t, in time
    order) and :meth:`complete` (at ``win.busy_until``, the end of the current window of steps); a
    caller holding several replicas completes their windows in time order, a window ending at t only
    after the arrivals at t have been added (``hetinfra.sim.clock.EventLoop``)."""

    def __init__(self, engine: StepModel, config: ReplicaConfig = ReplicaConfig()):
        if engine.mbt < config.max_num_seqs:  # vLLM refuses this configuration too
            raise InvalidInputError(f"max_num_batched_tokens {engine.mbt} < max_num_seqs {config.max_num_seqs}")
        self.engine = engine  # what hetinfra.sim.core compiles
        self.step = engine.step_s
        self.checked = checked_step
        self.pp = engine.pp
        self.budget = engine.pp * engine.mbt  # pp lockstep micro-batches of mbt tokens each
        self.max_seqs = config.max_num_seqs
        self.policy = config.policy
        self.kv = KVBlocks(int(engine.kv_tokens) // config.block_size, config.block_size)
        self.win = Window()
        self.waiting: deque[Request] = deque()
        self.running: dict[int, Request] = {}  # admission order: the last item is the preemption victim
        self.prefilling: list[Request] = []  # running requests whose (re)prefill is incomplete
        # the decode aggregate: a decoding request has computed = xb + clock tokens
        self.clock = 0  # decode steps taken
        self.nd = 0
        self.sum_xb = 0
        self.fin: list[tuple] = []  # (clock at which it has its last token, seq, gen, request)
        self._seq = 0
        # statistics
        self.outstanding = 0
        self.preemptions = 0
        self.busy_s = 0.0
        self.seq_area = 0.0  # integral of running sequences over time
        self.seq_max = 0  # the most sequences one window ran (max_num_seqs caps it: the seat cliff)
        self.steps = 0
        self.q_area = 0.0
        self.q_t = 0.0
        self.q_max = 0
        self.kv_area = 0.0
        self.kv_max = 0
        self.done: list[Request] = []
        # whether the current window's steps advance the decoding sequences (a policy that runs
        # prefill-only steps, vLLM V0's prefill-first schedule, clears it for such a window)
        self.decoding = True

    # ---- views (hetinfra.sim.core and the statistics read them) --------------------------------
    @property
    def bs(self) -> int:
        return self.kv.bs

    @property
    def blocks(self) -> int:
        return self.kv.total

    @property
    def used(self) -> int:
        return self.kv.used

    def blocks_for(self, tokens: int) -> int:
        return self.kv.blocks_for(tokens)

    def check_fits(self, req: Request) -> None:
        if self.kv.blocks_for(req.prompt + req.output) > self.kv.total:
            raise InvalidInputError(
                f"a request of {req.prompt}+{req.output} tokens needs more KV cache than one engine holds "
                f"({self.kv.total * self.kv.bs} tokens): it would be preempted forever",
                hint="the plan routes requests larger than this engine can serve; re-plan, or lower the size edges")

    def _queue_mark(self, t: float) -> None:
        self.q_area += len(self.waiting) * (t - self.q_t)
        self.q_t = t

    # ---- events --------------------------------------------------------------------------------
    def add(self, req: Request, t: float) -> None:
        """A request arrives at time t (>= the start of the current window)."""
        self._queue_mark(t)
        self.waiting.append(req)
        self.outstanding += 1
        if len(self.waiting) > self.q_max:
            self.q_max = len(self.waiting)
        if self.win.busy_until is None:
            # wake at t through an empty window, so that every request arriving at the same instant is
            # in the queue when the scheduler runs (vLLM drains its input queue before scheduling)
            self.win.wake(t)
        else:  # cut the window at the step in progress: the scheduler sees the request next
            self.win.cut(t)

    def complete(self) -> None:
        """End the current window at ``win.busy_until``: emit its tokens, retire finished requests,
        and have the policy schedule the next window."""
        win, kv = self.win, self.kv
        t = win.busy_until
        k = win.k
        dur = k * win.d0 + win.a * k * (k - 1) * 0.5  # win.span(k), inline: the hottest call
        self.busy_s += dur
        running = len(self.running)
        self.seq_area += running * dur  # the batch is fixed within a window
        if running > self.seq_max:
            self.seq_max = running
        self.steps += k
        chunks = win.chunks
        if chunks is None:
            if self.nd:
                kv.used += kv.decode_blocks(self.clock, self.nd, k)
            self.kv_area += 0.5 * (win.used0 + kv.used) * dur
        else:
            self.kv_area += kv.used * dur
        if kv.used > self.kv_max:
            self.kv_max = kv.used
        if self.nd and self.decoding:
            self.clock += k
        fin = self.fin
        clock = self.clock
        while fin and fin[0][0] <= clock:
            _, _, gen, req = heappop(fin)
            if gen == req.gen and req.dec:
                self._finish(req, t)
        if chunks:
            for req, n in chunks:
                req.computed += n
                if req.computed == req.prompt + req.g:  # (re)prefill complete: sample the next token
                    req.g += 1
                    if req.g == 1:
                        req.first = t
                    self.prefilling.remove(req)
                    if req.g >= req.output:
                        self._finish(req, t)
                    else:
                        self._to_decode(req)
        self.policy.schedule(self, t)

    # ---- mechanics the policies call -----------------------------------------------------------
    def admit(self, req: Request, t: float) -> None:
        """``req`` leaves the waiting queue and runs (its blocks are the policy's to allocate)."""
        self._queue_mark(t)
        if self.waiting[0] is req:
            self.waiting.popleft()
        else:
            self.waiting.remove(req)
        self.running[req.rid] = req
        self.prefilling.append(req)

    def pop_finish(self) -> None:
        """Drop the finish heap's head (a stale entry: its request left the decode aggregate)."""
        heappop(self.fin)

    def preempt(self, t: float, victim: Request) -> Request:
        """Recompute preemption: ``victim`` frees its blocks and goes back to the queue's front."""
        if victim.dec:
            self._leave_decode(victim)
        else:
            self.prefilling.remove(victim)
        self.kv.used -= self.kv.blocks_for(victim.computed)
        victim.computed = 0
        del self.running[victim.rid]
        self._queue_mark(t)
        self.waiting.appendleft(victim)
        if len(self.waiting) > self.q_max:
            self.q_max = len(self.waiting)
        victim.preempted += 1
        self.preemptions += 1
        return victim

    # ---- the decode aggregate ------------------------------------------------------------------
    def _to_decode(self, req: Request) -> None:
        req.dec = True
        req.xb = xb = req.computed - self.clock
        self.nd += 1
        self.sum_xb += xb
        self.kv.track(xb)
        self._seq += 1
        heappush(self.fin, (self.clock + req.output - req.g, self._seq, req.gen, req))

    def _leave_decode(self, req: Request) -> None:
        req.computed = req.xb + self.clock
        req.g = req.computed - req.prompt + 1
        req.dec = False
        req.gen += 1
        self.nd -= 1
        self.sum_xb -= req.xb
        self.kv.untrack(req.xb)

    def _finish(self, req: Request, t: float) -> None:
        if req.dec:
            self._leave_decode(req)
        req.finish = t
        self.kv.used -= self.kv.blocks_for(req.computed)
        del self.running[req.rid]
        self.outstanding -= 1
        self.done.append(req)
