"""One vLLM engine (V1 scheduler) as a discrete-event simulator, request by request.

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
from typing import Callable, Protocol

from hetinfra.errors import InvalidInputError
from hetinfra.facts import MAX_NUM_SEQS

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
    """vLLM engine settings the scheduler uses (planning pins max_num_seqs=256)."""

    max_num_seqs: int = MAX_NUM_SEQS
    block_size: int = 16  # vLLM's default KV block size on CUDA

    def __post_init__(self):
        if self.max_num_seqs < 1 or self.block_size < 1:
            raise InvalidInputError(f"max_num_seqs and block_size must be >= 1 (got {self.max_num_seqs}, "
                                    f"{self.block_size})")


class Request:
    """One request. ``g`` = tokens generated so far; ``computed`` = tokens whose KV is computed."""

    __slots__ = ("rid", "arrival", "prompt", "output", "replica", "g", "computed", "first", "finish", "xb", "dec",
                 "gen", "preempted")

    def __init__(self, rid: int, arrival: float, prompt: int, output: int):
        self.rid, self.arrival, self.prompt, self.output = rid, arrival, prompt, output
        self.replica = -1
        self.g = self.computed = self.xb = self.gen = self.preempted = 0
        self.dec = False  # in the decode aggregate
        self.first = self.finish = math.nan


class Replica:
    """One engine's scheduler and clock. Drive it with :meth:`add` (an arrival at time t, in time
    order) and :meth:`complete` (at ``busy_until``, the end of the current window of steps); a caller
    holding several replicas completes their windows in time order, a window ending at t only after
    the arrivals at t have been added (see ``plan_sim.run_replicas``)."""

    def __init__(self, engine: StepModel, config: ReplicaConfig = ReplicaConfig()):
        bs = config.block_size
        if engine.mbt < config.max_num_seqs:  # vLLM refuses this configuration too
            raise InvalidInputError(f"max_num_batched_tokens {engine.mbt} < max_num_seqs {config.max_num_seqs}")
        self.engine = engine  # what hetinfra.sim.core compiles
        self.step = engine.step_s
        self.pp = engine.pp
        self.budget = engine.pp * engine.mbt  # pp lockstep micro-batches of mbt tokens each
        self.blocks = int(engine.kv_tokens) // bs
        self.bs, self.max_seqs = bs, config.max_num_seqs
        self.waiting: deque[Request] = deque()
        self.running: dict[int, Request] = {}  # admission order: the last item is the preemption victim
        self.prefilling: list[Request] = []  # running requests whose (re)prefill is incomplete
        # decode aggregate: a decoding request has computed = xb + clock tokens
        self.clock = 0
        self.nd = 0
        self.sum_xb = 0
        self.phase = [0] * bs  # decoding requests by xb mod block size (when they need a new block)
        self.fin: list[tuple] = []  # (clock at which it has its last token, seq, gen, request)
        self._seq = 0
        self.used = 0  # KV blocks held
        # the current window: ``k`` steps from ``w_start``; step j lasts d0 + a*j
        self.busy_until: float | None = None
        self.version = 0  # bumped when busy_until changes (stale heap entries of the caller)
        self.w_start = self.w_d0 = self.w_a = 0.0
        self.w_k = 0
        self.w_chunks: list[tuple[Request, int]] | None = None  # None: a pure-decode window
        self.w_used0 = 0
        # statistics
        self.outstanding = 0
        self.preemptions = 0
        self.busy_s = 0.0
        self.seq_area = 0.0  # integral of running sequences over time
        self.steps = 0
        self.q_area = 0.0
        self.q_t = 0.0
        self.q_max = 0
        self.kv_area = 0.0
        self.kv_max = 0
        self.done: list[Request] = []

    # ---- helpers -------------------------------------------------------------------------------
    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.bs)

    def _queue_mark(self, t: float) -> None:
        self.q_area += len(self.waiting) * (t - self.q_t)
        self.q_t = t

    def _set_busy(self, until: float | None) -> None:
        self.busy_until = until
        self.version += 1

    def _new_blocks(self, k: int) -> int:
        """Blocks the decode aggregate allocates over its next k steps."""
        if not self.nd or k <= 0:
            return 0
        bs, c, ph = self.bs, self.clock, self.phase
        full, r = divmod(k, bs)
        return full * self.nd + sum(ph[(-(c + j)) % bs] for j in range(r))

    def _max_steps_for(self, free: int) -> int:
        """Largest k whose decode steps fit in ``free`` blocks."""
        if not self.nd:
            return 1 << 60
        bs, c, ph = self.bs, self.clock, self.phase
        q, rem = divmod(free, self.nd)
        r, acc = 0, 0
        while r < bs - 1:
            acc += ph[(-(c + r)) % bs]
            if acc > rem:
                break
            r += 1
        return q * bs + r

    def check_fits(self, req: Request) -> None:
        if self.blocks_for(req.prompt + req.output) > self.blocks:
            raise InvalidInputError(
                f"a request of {req.prompt}+{req.output} tokens needs more KV cache than one engine holds "
                f"({self.blocks * self.bs} tokens): it would be preempted forever",
                hint="the plan routes requests larger than this engine can serve; re-plan, or lower the size edges")

    # ---- events --------------------------------------------------------------------------------
    def add(self, req: Request, t: float) -> None:
        """A request arrives at time t (>= the start of the current window)."""
        self._queue_mark(t)
        self.waiting.append(req)
        self.outstanding += 1
        if len(self.waiting) > self.q_max:
            self.q_max = len(self.waiting)
        if self.busy_until is None:
            # wake at t through an empty window, so that every request arriving at the same instant is
            # in the queue when the scheduler runs (vLLM drains its input queue before scheduling)
            self.w_start, self.w_d0, self.w_a, self.w_k, self.w_chunks = t, 0.0, 0.0, 0, []
            self._set_busy(t)
        elif self.w_k > 1:  # cut the window at the step in progress: the scheduler sees the request next
            j = self._steps_until(t - self.w_start)
            if j < self.w_k:
                self.w_k = j
                self._set_busy(self.w_start + self._span(j))

    def _span(self, k: int) -> float:
        return k * self.w_d0 + self.w_a * k * (k - 1) * 0.5

    def _steps_until(self, h: float) -> int:
        """Smallest j >= 1 whose first j steps end at or after h (from the window start)."""
        d0, a = self.w_d0, self.w_a
        if h <= d0:
            return 1
        if a > 0:
            b = d0 - 0.5 * a
            j = max(1, int(math.ceil((-b + math.sqrt(b * b + 2.0 * a * h)) / a)))
        else:
            j = max(1, int(math.ceil(h / d0)))
        while j > 1 and self._span(j - 1) >= h:
            j -= 1
        while self._span(j) < h:
            j += 1
        return j

    def complete(self) -> None:
        """End the current window at ``busy_until``: emit its tokens, retire finished requests, and
        schedule the next window."""
        t = self.busy_until
        k = self.w_k
        dur = k * self.w_d0 + self.w_a * k * (k - 1) * 0.5  # _span(k), inline: the hottest call
        self.busy_s += dur
        self.seq_area += len(self.running) * dur  # the batch is fixed within a window
        self.steps += k
        chunks = self.w_chunks
        if chunks is None:
            if self.nd:
                self.used += self._new_blocks(k)
            self.kv_area += 0.5 * (self.w_used0 + self.used) * dur
        else:
            self.kv_area += self.used * dur
        if self.used > self.kv_max:
            self.kv_max = self.used
        if self.nd:
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
        self._schedule(t)

    def _to_decode(self, req: Request) -> None:
        req.dec = True
        req.xb = xb = req.computed - self.clock
        self.nd += 1
        self.sum_xb += xb
        self.phase[xb % self.bs] += 1
        self._seq += 1
        heappush(self.fin, (self.clock + req.output - req.g, self._seq, req.gen, req))

    def _leave_decode(self, req: Request) -> None:
        req.computed = req.xb + self.clock
        req.g = req.computed - req.prompt + 1
        req.dec = False
        req.gen += 1
        self.nd -= 1
        self.sum_xb -= req.xb
        self.phase[req.xb % self.bs] -= 1

    def _finish(self, req: Request, t: float) -> None:
        if req.dec:
            self._leave_decode(req)
        req.finish = t
        self.used -= self.blocks_for(req.computed)
        del self.running[req.rid]
        self.outstanding -= 1
        self.done.append(req)

    def _preempt(self, t: float) -> Request:
        victim = next(reversed(self.running.values()))
        if victim.dec:
            self._leave_decode(victim)
        else:
            self.prefilling.remove(victim)
        self.used -= self.blocks_for(victim.computed)
        victim.computed = 0
        del self.running[victim.rid]
        self._queue_mark(t)
        self.waiting.appendleft(victim)
        if len(self.waiting) > self.q_max:
            self.q_max = len(self.waiting)
        victim.preempted += 1
        self.preemptions += 1
        return victim

    # ---- the scheduler -------------------------------------------------------------------------
    def _schedule(self, t: float) -> None:
        nd = self.nd
        free = self.blocks - self.used
        if nd and not self.prefilling:
            need = self.phase[(-self.clock) % self.bs]
            if need <= free:
                # a pure-decode window unless the queue's head could be admitted now (its first
                # chunk within the budget left and its blocks within the blocks left)
                waiting, left = self.waiting, self.budget - nd
                if (not waiting or left <= 0 or len(self.running) >= self.max_seqs
                        or self.blocks_for(min(waiting[0].prompt + waiting[0].g, left)) > free - need):
                    self._decode_window(t, free)
                    return
        self._mixed_step(t)

    def _decode_window(self, t: float, free: int) -> None:
        """k pure-decode steps with a fixed batch: until the first finish, or the KV cache is full."""
        fin = self.fin
        while fin[0][2] != fin[0][3].gen or not fin[0][3].dec:
            heappop(fin)
        k = min(fin[0][0] - self.clock, self._max_steps_for(free))
        nd, pp, step = self.nd, self.pp, self.step
        seqs = len(self.running)
        ctx0 = self.sum_xb + nd * (self.clock + 1)  # each sequence attends its computed tokens + itself
        d0 = checked_step(step(0.0, 0.0, nd / pp, ctx0 / pp, seqs))
        a = 0.0
        if k > 1:
            a = step(0.0, 0.0, nd / pp, (ctx0 + nd) / pp, seqs) - d0
            last = checked_step(step(0.0, 0.0, nd / pp, (ctx0 + nd * (k - 1)) / pp, seqs))
            if abs(d0 + a * (k - 1) - last) > 1e-9 * last:  # a roofline branch switch inside: stop before it
                lo, hi = 1, k - 1  # step lo is on the line, step hi is not
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    v = step(0.0, 0.0, nd / pp, (ctx0 + nd * mid) / pp, seqs)
                    if abs(d0 + a * mid - v) <= 1e-9 * v:
                        lo = mid
                    else:
                        hi = mid
                k = lo + 1
        self.w_start, self.w_d0, self.w_a, self.w_k, self.w_chunks = t, d0, a, k, None
        self.w_used0 = self.used
        self._set_busy(t + self._span(k))

    def _mixed_step(self, t: float) -> None:
        """One step, vLLM's schedule() literally: running decodes, running prefills, then admissions."""
        preempted = False
        if self.nd:
            need = self.phase[(-self.clock) % self.bs]
            while need > self.blocks - self.used:
                self._preempt(t)
                preempted = True
                need = self.phase[(-self.clock) % self.bs] if self.nd else 0
            self.used += need
        budget = self.budget - self.nd
        chunks: list[tuple[Request, int]] = []
        for req in list(self.prefilling):
            if req.rid not in self.running:
                continue  # preempted above
            n = min(req.prompt + req.g - req.computed, budget)
            if n <= 0:
                break
            nb = self.blocks_for(req.computed + n) - self.blocks_for(req.computed)
            while nb > self.blocks - self.used:
                preempted = True
                if self._preempt(t) is req:
                    break
            if req.rid not in self.running:
                break
            self.used += nb
            chunks.append((req, n))
            budget -= n
        if not preempted:
            waiting, running = self.waiting, self.running
            while waiting and budget > 0 and len(running) < self.max_seqs:
                req = waiting[0]
                n = min(req.prompt + req.g, budget)
                nb = self.blocks_for(n)
                if nb > self.blocks - self.used:
                    break
                self._queue_mark(t)
                waiting.popleft()
                running[req.rid] = req
                self.prefilling.append(req)
                self.used += nb
                chunks.append((req, n))
                budget -= n
        nd = self.nd
        if not nd and not chunks:
            self.w_k = 0
            self._set_busy(None)  # idle until the next arrival
            return
        pt = pos = 0
        for req, n in chunks:
            pt += n
            pos += n * req.computed + n * (n - 1) // 2  # causal: token i attends i earlier tokens
        pp = self.pp
        ctx = self.sum_xb + nd * (self.clock + 1)
        d = checked_step(self.step(pt / pp, pos / pp, nd / pp, ctx / pp, len(self.running)))
        self.w_start, self.w_d0, self.w_a, self.w_k, self.w_chunks = t, d, 0.0, 1, chunks
        self._set_busy(t + d)


def run_replicas(replicas: list[Replica], requests: list[Request], progress: Callable[[int], None] | None = None) -> None:
    """Replay ``requests`` (sorted by arrival) on ``replicas`` in time order, each to the replica
    with the fewest outstanding requests, until all have finished. The reference statement of the
    loop that hetinfra.sim.core runs compiled (hetinfra.sim.columns.simulate_unit picks which)."""
    heap: list[tuple[float, int, int]] = []
    n = len(replicas)

    def until(t: float) -> None:
        # strictly before t: a window ending at t sees the requests arriving at t
        while heap and heap[0][0] < t:
            _, i, ver = heappop(heap)
            r = replicas[i]
            if ver != r.version:
                continue  # stale: the window was cut or replaced
            r.complete()
            if r.busy_until is not None:
                heappush(heap, (r.busy_until, i, r.version))

    tick = 0
    for req in requests:
        t = req.arrival
        until(t)
        if n == 1:
            i = 0
        else:
            i, best = 0, replicas[0].outstanding
            for j in range(1, n):
                o = replicas[j].outstanding
                if o < best:
                    i, best = j, o
        r = replicas[i]
        r.check_fits(req)
        req.replica = i
        ver = r.version
        r.add(req, t)
        if r.version != ver and r.busy_until is not None:
            heappush(heap, (r.busy_until, i, r.version))
        tick += 1
        if progress is not None and tick == 1000:
            progress(tick)
            tick = 0
    until(math.inf)
    if progress is not None and tick:
        progress(tick)
