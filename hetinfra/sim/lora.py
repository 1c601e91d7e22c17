"""LoRA adapters in the simulator: requests carry their adapter, batches pay the derate of their
distinct adapters, and an engine holding more adapters than GPU slots swaps them LRU at a load cost.

Built on the simulator's seams (docs/internals/simulator.md, "Seams"), on the Python loop:

* :class:`LoraRequest` is a :class:`~hetinfra.sim.replica.Request` with an ``adapter`` (None: the base);
* :class:`LoraEngine` wraps a step model: each step takes ``m(gpu, rank, distinct)`` times the base
  step (:func:`hetinfra.perf.lora.slowdown`, the distinct adapters of the running batch; a batch of
  base requests only pays nothing), plus the load time of adapters brought into a slot for it. Its
  ``slots`` (vLLM ``--max-loras``) are an LRU of resident adapters;
* a plan's unit with ``adapters`` (plan.json) is simulated by :func:`lora_replicas` and
  :func:`simulate_lora` (``hetinfra.sim.plan_sim`` calls them): every replica registers every adapter
  the unit holds (as its engines do: ``--lora-modules`` lists them all, ``--max-loras`` of them in GPU
  slots, the others in host memory), its KV cache less the slots' memory; each request carries the
  adapter its class names (``chat~sql``: ``sql``);
* :class:`LoraVLLM` is vLLM V1 with vLLM's LoRA admission rule: a waiting request whose adapter is not
  resident is admitted only when a slot is free or holds an adapter no running request uses (the
  least recently used of those is evicted); otherwise it is skipped and the next one tried, as vLLM's
  scheduler skips requests whose LoRA cannot be scheduled.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from hetinfra.perf.lora import slowdown
from hetinfra.sim.policy import VLLMv1
from hetinfra.sim.replica import Replica, ReplicaConfig, Request

__all__ = ["LoraEngine", "LoraReplica", "LoraRequest", "LoraVLLM", "lora_replicas", "lora_unit", "simulate_lora"]


class LoraRequest(Request):
    """A request naming a LoRA adapter (the OpenAI ``model`` field); ``adapter`` None: the base model."""

    __slots__ = ("adapter",)

    def __init__(self, rid: int, arrival: float, prompt: int, output: int, adapter: str | None = None,
                 computed: int = 0, origin=None):
        super().__init__(rid, arrival, prompt, output, computed, origin)
        self.adapter = adapter


class LoraEngine:
    """A step model serving adapters: the base ``engine``'s steps times the LoRA slowdown of the batch's
    distinct adapters, plus ``load_s`` per adapter loaded into a slot for the step."""

    def __init__(self, engine, gpu: str, rank: int, slots: int, load_s: float):
        if slots < 1:
            raise ValueError("a LoRA engine needs at least one slot (vLLM --max-loras >= 1)")
        self.base, self.gpu, self.rank, self.slots, self.load_s = engine, gpu, rank, slots, load_s
        self.mbt, self.kv_tokens, self.pp = engine.mbt, engine.kv_tokens, engine.pp
        self.resident: OrderedDict[str, None] = OrderedDict()  # GPU slots, least recently used first
        self.distinct = 0  # distinct adapters of the running batch (the policy sets it)
        self.pending_load_s = 0.0  # loads the next step pays
        self.loads = 0
        self.max_distinct = 0

    def step_s(self, prefill_tokens, prefill_positions, decode_seqs, decode_context, running_seqs=None):
        base = self.base.step_s(prefill_tokens, prefill_positions, decode_seqs, decode_context, running_seqs)
        m = slowdown(self.gpu, self.rank, self.distinct) if self.distinct else 1.0
        extra, self.pending_load_s = self.pending_load_s, 0.0
        return base * m + extra

    def can_take(self, adapter: str | None, in_use: set) -> bool:
        """Whether a request of ``adapter`` may join the batch: base requests always; an adapter when
        resident, a slot is free, or a resident adapter is unused by the running batch."""
        if adapter is None or adapter in self.resident or len(self.resident) < self.slots:
            return True
        return any(a not in in_use for a in self.resident)

    def bring(self, adapter: str | None, in_use: set) -> None:
        """Make ``adapter`` resident (most recently used), evicting the LRU adapter not in use."""
        if adapter is None:
            return
        if adapter in self.resident:
            self.resident.move_to_end(adapter)
            return
        if len(self.resident) >= self.slots:
            del self.resident[next(a for a in self.resident if a not in in_use)]
        self.resident[adapter] = None
        self.pending_load_s += self.load_s
        self.loads += 1


class LoraReplica(Replica):
    """A :class:`~hetinfra.sim.replica.Replica` that counts the running requests of each adapter as they
    are admitted, preempted and finished, so the LoRA admission rule reads the adapters in use without
    walking the running batch at every scheduling call (that walk was ~35% of a LoRA unit's simulation)."""

    def __init__(self, engine, config: ReplicaConfig = ReplicaConfig()):
        super().__init__(engine, config)
        #: adapter -> running requests naming it; an adapter leaves when its count reaches 0, so the
        #: keys are exactly the adapters of the running batch (what the admission rule reads)
        self.adapters_running: dict[str, int] = {}

    def admit(self, req, t: float) -> None:
        super().admit(req, t)
        a = getattr(req, "adapter", None)
        if a is not None:
            self.adapters_running[a] = self.adapters_running.get(a, 0) + 1

    def preempt(self, t: float, victim):
        out = super().preempt(t, victim)
        self._left(victim)
        return out

    def _finish(self, req, t: float) -> None:
        super()._finish(req, t)
        self._left(req)

    def _left(self, req) -> None:
        a = getattr(req, "adapter", None)
        if a is not None:
            left = self.adapters_running[a] - 1
            if left:
                self.adapters_running[a] = left
            else:
                del self.adapters_running[a]


def _in_use(rep):
    """The adapters of ``rep``'s running batch: a :class:`LoraReplica` keeps them counted; any other
    replica (a test's plain Replica) is walked."""
    if isinstance(rep, LoraReplica):
        return rep.adapters_running
    return {r.adapter for r in rep.running.values() if getattr(r, "adapter", None) is not None}


class LoraVLLM(VLLMv1):
    """vLLM V1 with LoRA slots: admission skips requests whose adapter cannot get a slot; every step's
    engine knows the batch's distinct adapters (its replica's engine must be a :class:`LoraEngine`)."""

    name = "vllm-v1-lora"

    def schedule(self, rep, t: float) -> None:
        self._count(rep)
        super().schedule(rep, t)

    def admissible(self, rep):
        """The first waiting request whose adapter can get a slot (vLLM skips the others), or None."""
        in_use, eng = _in_use(rep), rep.engine
        return next((r for r in rep.waiting if eng.can_take(getattr(r, "adapter", None), in_use)), None)

    def admitted(self, rep, req) -> None:
        rep.engine.bring(getattr(req, "adapter", None), _in_use(rep))

    def admit(self, rep, t: float, budget: int, chunks: list) -> int:
        budget = super().admit(rep, t, budget, chunks)
        self._count(rep)
        return budget

    @staticmethod
    def _count(rep) -> None:
        eng = rep.engine
        eng.distinct = len(_in_use(rep))
        eng.max_distinct = max(eng.max_distinct, eng.distinct)


def lora_replicas(alloc, engine, arch, count: int) -> list:
    """``count`` fresh replicas of a plan's LoRA unit ``alloc`` (its ``adapters``: slots, rank, memory
    and load time), each a :class:`LoraEngine` over ``engine`` (the unit's base step model) whose KV
    cache is the base's less the slots' memory, scheduled by :class:`LoraVLLM`."""
    from copy import copy

    from hetinfra.perf.estimator import kv_bytes_per_token_per_gpu

    lo = alloc.adapters
    taken = int(float(lo.slot_memory_gb) * 1e9 / kv_bytes_per_token_per_gpu(arch, alloc.tp, "bf16", alloc.pp))
    out = []
    for _ in range(count):
        eng = LoraEngine(engine, alloc.gpu, int(lo.max_lora_rank), int(lo.max_loras), float(lo.cold_load_ms) / 1e3)
        eng.kv_tokens = max(1, int(engine.kv_tokens) - taken)
        out.append(LoraReplica(eng, ReplicaConfig(policy=copy(LoraVLLM()))))
    return out


def simulate_lora(replicas: list, reqs, adapter_of_class: list, progress=None) -> None:
    """Serve a unit's requests (``hetinfra.sim.columns.UnitRequests``) on its LoRA ``replicas`` on the
    Python loop, each request naming ``adapter_of_class[its class]`` (None: the base), filling the
    same columns as ``columns.simulate_unit``."""
    from hetinfra.sim.clock import run

    objs = [LoraRequest(rid, t, p, o, adapter_of_class[c]) for rid, t, p, o, c in
            zip(reqs.rid.tolist(), reqs.arrival.tolist(), reqs.prompt.tolist(), reqs.output.tolist(),
                reqs.cls.tolist())]
    run([replicas], objs, None, progress)
    reqs.first = np.array([r.first for r in objs], dtype=float)
    reqs.finish = np.array([r.finish for r in objs], dtype=float)
    reqs.replica = np.array([r.replica for r in objs], dtype=np.int64)
    reqs.preempted = np.array([r.preempted for r in objs], dtype=np.int64)


def lora_unit(alloc, ue, arch, class_names: list[str]) -> list:
    """A plan's LoRA unit made ready for ``hetinfra.sim.plan_sim``: its fresh replicas
    (:func:`lora_replicas`), and ``ue.run`` set to :func:`simulate_lora` with each class's adapter."""
    from hetinfra.spec.adapters import adapter_of

    adapters = [adapter_of(c) for c in class_names]
    ue.run = lambda replicas, reqs: simulate_lora(replicas, reqs, adapters)
    return lora_replicas(alloc, ue.engine, arch, max(alloc.count * alloc.engines_per_instance, 0))
