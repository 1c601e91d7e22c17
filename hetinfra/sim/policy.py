"""Scheduler policies: what a replica runs next, given its queues, its KV cache and its token budget.

A policy is a class (one per policy, as Vidur's replica schedulers); a replica calls its
``schedule(replica, t)`` at the end of every window, and the policy opens the next window on the
replica's clock (``replica.win``) or leaves it idle. Policies hold no state of their own (one
instance may serve every replica); the state is the replica's (``hetinfra.sim.replica``).

:class:`VLLMv1` is vLLM's V1 scheduler (``vllm/v1/core/sched/scheduler.py``) and the default: every
figure of a plan comes from it, and it is the one policy the compiled core (``hetinfra.sim.core``)
runs; a replica with any other policy runs on the Python loop. Its choices are small methods, so a
variant overrides one of them:

* :meth:`VLLMv1.next_admission`: which waiting request is admitted next (FCFS: the queue's head;
  a preempted request was put back at the head);
* :meth:`VLLMv1.chunk`: how many of a request's (re)prefill tokens a step schedules, given the
  budget left (chunked prefill: as many as fit; 0: not in this step);
* :meth:`VLLMv1.victim`: which running request a step preempts when the KV cache runs out (the
  most recently admitted).

tests/sim/test_policy.py adds two (shortest prompt first; FCFS without chunked prefill) this way.

:class:`VLLMv0` is vLLM V0's default scheduler without chunked prefill (the engine of vLLM 0.6-0.7
for models of at most 32K context): prefill-only steps that hold the decodes back. The published
end-to-end checks of those versions run under it (``hetinfra.sim.benchmark_run``).
"""

from __future__ import annotations

from collections import deque

__all__ = ["SchedulerPolicy", "VLLMv1", "VLLMv0", "DEFAULT_POLICY"]


class SchedulerPolicy:
    """A scheduler: ``schedule(replica, t)`` opens the replica's next window at t or idles it."""

    name = "abstract"

    def schedule(self, rep, t: float) -> None:
        raise NotImplementedError


class VLLMv1(SchedulerPolicy):
    """vLLM V1: continuous batching with chunked prefill under a token budget, running requests
    first in admission order, then FCFS admissions while budget, ``max_num_seqs`` and KV blocks
    allow; recompute preemption of the last admitted request when a block is missing (a step that
    preempted admits nobody). Between events, k pure-decode steps are one window (see replica.py)."""

    name = "vllm-v1"

    # ---- the choices (override one for a variant) ----------------------------------------------
    def next_admission(self, waiting: deque):
        """The waiting request admitted next (``waiting`` is not empty)."""
        return waiting[0]

    def chunk(self, req, need: int, budget: int) -> int:
        """Tokens of ``req``'s (re)prefill, ``need`` left, to schedule with ``budget`` tokens left."""
        return min(need, budget)

    def victim(self, running: dict):
        """The running request to preempt (``running`` in admission order)."""
        return next(reversed(running.values()))

    # ---- the schedule --------------------------------------------------------------------------
    def schedule(self, rep, t: float) -> None:
        nd = rep.nd
        kv = rep.kv
        free = kv.total - kv.used
        if nd and not rep.prefilling:
            need = kv.phase[(-rep.clock) % kv.bs]
            if need <= free:
                # a pure-decode window unless the next admission could run now (its first chunk
                # within the budget left and its blocks within the blocks left)
                waiting, left = rep.waiting, rep.budget - nd
                if not waiting or left <= 0 or len(rep.running) >= rep.max_seqs:
                    self.decode_window(rep, t, free)
                    return
                head = self.next_admission(waiting)
                n = self.chunk(head, head.prompt + head.g - head.computed, left)
                if n <= 0 or kv.blocks_for(head.computed + n) > free - need:
                    self.decode_window(rep, t, free)
                    return
        self.mixed_step(rep, t)

    def decode_window(self, rep, t: float, free: int) -> None:
        """k pure-decode steps with a fixed batch: until the first finish, or the KV cache is full."""
        fin = rep.fin
        while fin[0][2] != fin[0][3].gen or not fin[0][3].dec:
            rep.pop_finish()
        nd, pp, step, clock = rep.nd, rep.pp, rep.step, rep.clock
        k = min(fin[0][0] - clock, rep.kv.decode_steps_fitting(clock, nd, free))
        seqs = len(rep.running)
        ctx0 = rep.sum_xb + nd * (clock + 1)  # each sequence attends its computed tokens + itself
        d0 = rep.checked(step(0.0, 0.0, nd / pp, ctx0 / pp, seqs))
        a = 0.0
        if k > 1:
            a = step(0.0, 0.0, nd / pp, (ctx0 + nd) / pp, seqs) - d0
            last = rep.checked(step(0.0, 0.0, nd / pp, (ctx0 + nd * (k - 1)) / pp, seqs))
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
        win = rep.win
        win.used0 = rep.kv.used
        win.open(t, d0, a, k, None, t + (k * d0 + a * k * (k - 1) * 0.5))

    def mixed_step(self, rep, t: float) -> None:
        """One step, vLLM's schedule() literally: running decodes, running prefills, then admissions."""
        preempted = self.grow_decodes(rep, t)
        kv = rep.kv
        budget = rep.budget - rep.nd
        chunks: list = []
        for req in list(rep.prefilling):
            if req.rid not in rep.running:
                continue  # preempted above
            n = self.chunk(req, req.prompt + req.g - req.computed, budget)
            if n <= 0:
                break
            nb = kv.blocks_for(req.computed + n) - kv.blocks_for(req.computed)
            while nb > kv.total - kv.used:
                preempted = True
                if rep.preempt(t, self.victim(rep.running)) is req:
                    break
            if req.rid not in rep.running:
                break
            kv.used += nb
            chunks.append((req, n))
            budget -= n
        if not preempted:
            budget = self.admit(rep, t, budget, chunks)
        if not rep.nd and not chunks:
            rep.win.idle()  # until the next arrival
            return
        self.one_step(rep, t, chunks)

    def one_step(self, rep, t: float, chunks: list) -> None:
        """A window of one step: the prefill ``chunks`` ((request, tokens)) beside every decoding sequence."""
        pt, pos = prefill_work(chunks)
        pp, nd = rep.pp, rep.nd
        ctx = rep.sum_xb + nd * (rep.clock + 1)
        d = rep.checked(rep.step(pt / pp, pos / pp, nd / pp, ctx / pp, len(rep.running)))
        rep.win.open(t, d, 0.0, 1, chunks, t + d)

    def grow_decodes(self, rep, t: float) -> bool:
        """Allocate the blocks the decoding sequences need this step, preempting until they fit;
        whether any was preempted."""
        preempted = False
        if rep.nd:
            kv = rep.kv
            need = kv.next_step_blocks(rep.clock)
            while need > kv.total - kv.used:
                rep.preempt(t, self.victim(rep.running))
                preempted = True
                need = kv.next_step_blocks(rep.clock) if rep.nd else 0
            kv.used += need
        return preempted

    def admissible(self, rep):
        """The waiting request to admit next, or None when none may join the batch now (the default:
        whichever :meth:`next_admission` picks; a LoRA engine skips requests whose adapter has no slot)."""
        return self.next_admission(rep.waiting)

    def admitted(self, rep, req) -> None:
        """Called as ``req`` joins the batch, before the replica admits it (a policy with state of its own,
        such as resident LoRA adapters, updates it here); the default has none."""

    def kept_free(self, rep) -> int:
        """KV blocks an admission must leave free (V1: none)."""
        return 0

    def admit(self, rep, t: float, budget: int, chunks: list) -> int:
        """Admit waiting requests while budget, sequences and blocks allow; the budget left."""
        waiting, running, kv = rep.waiting, rep.running, rep.kv
        while waiting and budget > 0 and len(running) < rep.max_seqs:
            req = self.admissible(rep)
            if req is None:
                break
            n = self.chunk(req, req.prompt + req.g - req.computed, budget)
            if n <= 0:
                break
            nb = kv.blocks_for(req.computed + n)
            if nb > kv.total - kv.used - self.kept_free(rep):
                break
            self.admitted(rep, req)
            rep.admit(req, t)
            kv.used += nb
            chunks.append((req, n))
            budget -= n
        return budget


class VLLMv0(VLLMv1):
    """vLLM V0's ``Scheduler._schedule_default`` (``vllm/core/scheduler.py``, the schedule of vLLM
    0.6-0.7 when chunked prefill is off, which it is by default for models of at most 32K context:
    ``EngineArgs`` turned it on only above, vllm-project/vllm#6666). Every step either prefills or
    decodes:

    * with nobody swapped out (recompute preemption only, so never), waiting requests are admitted
      first, FCFS and whole (prompt plus the tokens generated before a preemption), while the step's
      token budget (``max_num_batched_tokens``), ``max_num_seqs`` (the running ones included) and the
      KV cache allow; the block manager keeps a watermark of 1% of the blocks free at admission;
    * "Don't schedule decodes if prefills are scheduled": a step that admitted anyone runs those
      prefills alone, and every decoding sequence waits for it;
    * otherwise every running sequence decodes one token, the last admitted preempted (recompute,
      back to the waiting queue's front) while a block is missing.

    Source: vllm-project/vllm ``vllm/core/scheduler.py`` at 0dce2b29 (Apache-2.0). Not modelled here:
    swap preemption; ``--num-scheduler-steps`` (multi-step decoding), for a burst, by the requests'
    decode lengths (``hetinfra.sim.benchmark_run.multi_step_outputs``)."""

    name = "vllm-v0"
    watermark = 0.01  # CacheConfig's default watermark: the share of blocks admission leaves free

    def chunk(self, req, need: int, budget: int) -> int:
        return need if need <= budget else 0

    def schedule(self, rep, t: float) -> None:
        chunks: list = []
        if rep.waiting:  # whole prompts (``chunk``) within the full budget: _schedule_prefills
            self.admit(rep, t, rep.budget, chunks)
        if chunks:
            rep.decoding = False  # a prefill-only step: the decodes wait
            pt, pos = prefill_work(chunks)
            pp = rep.pp
            d = rep.checked(rep.step(pt / pp, pos / pp, 0.0, 0.0, len(chunks)))
            rep.win.open(t, d, 0.0, 1, chunks, t + d)
            return
        rep.decoding = True
        if not rep.nd:
            rep.win.idle()  # until the next arrival
            return
        kv = rep.kv
        free = kv.total - kv.used
        if kv.next_step_blocks(rep.clock) <= free:
            self.decode_window(rep, t, free)  # cut by an arrival (a prefill next) or ended by a finish
            return
        self.grow_decodes(rep, t)  # preempts until the step's blocks fit
        if not rep.nd:
            rep.win.idle()
            return
        self.one_step(rep, t, [])  # a decode-only step

    def kept_free(self, rep) -> int:
        """The block manager's watermark: admission leaves 1% of the blocks free (a request alone may
        take them, or it would wait forever)."""
        return int(self.watermark * rep.kv.total) if rep.running else 0


def prefill_work(chunks: list) -> tuple[int, int]:
    """(prompt tokens, attention positions) of a step's prefill ``chunks`` ((request, tokens)): causal,
    token i attends i earlier tokens."""
    pt = pos = 0
    for req, n in chunks:
        pt += n
        pos += n * req.computed + n * (n - 1) // 2
    return pt, pos


DEFAULT_POLICY = VLLMv1()
