"""The estimator against published end-to-end vLLM results (hetinfra.perf.published): measured
closed-loop runs (TTFT, TPOT and the sustained rate at a fixed concurrency: the estimator's operating
point), and published benchmark rates (MLPerf Inference, vLLM's own benchmark), which hetinfra.sim.benchmark_run
replays on the simulator (the published checks live there: the simulator is a later stage). Error =
predicted / measured - 1 on the RATE (+ = optimistic: we promise more requests per second than the run
sustained). Used by tests/perf/test_published.py and tools/fit_kernels.py --e2e; the estimator's
mean-field figures for the published runs (``estimator_check``) are the planner's second source
(``layout_factors``)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from functools import lru_cache

from hetinfra.catalog.gpus import GPUS
from hetinfra.catalog.models import MODELS
from hetinfra.perf.calibration import CALIBRATION, Calibration, for_engine, for_gpu
from hetinfra.perf.estimator import Estimate, estimate, operating_point
from hetinfra.perf.published import PUBLISHED, PublishedRate, SiliconRow, silicon_rows

__all__ = ["Check", "silicon_check", "silicon_checks", "plausible_rows", "estimator_check", "e2e_report", "summary",
           "layout_factors", "LayoutFactor", "E2E_SOURCE"]


@dataclass(frozen=True)
class Check:
    label: str
    measured: float  # req/s
    predicted: float  # req/s
    binding: str = ""
    tpot_err: float = 0.0  # closed-loop rows: predicted / measured TPOT - 1
    ttft_err: float = 0.0

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1.0


def silicon_check(row: SiliconRow, calib: Calibration = CALIBRATION) -> Check | None:
    got = operating_point(MODELS[row.model], GPUS[row.gpu], tp=row.tp, input_tokens=row.isl, output_tokens=row.osl,
                          concurrency=row.concurrency, precision=row.precision, kv_precision=row.kv_precision,
                          max_num_seqs=1024, calib=calib)
    if isinstance(got, Estimate):
        return None
    ttft, tpot, rate = got
    return Check(row.label, row.rate, rate, "closed loop", tpot / row.tpot_ms - 1.0, ttft / row.ttft_ms - 1.0)


def prefill_share_of_peak(row: SiliconRow) -> float:
    """The share of the GPUs' dense peak the run's prompt tokens need at 2 x active params FLOPs each."""
    gpu, model = GPUS[row.gpu], MODELS[row.model]
    peak = (gpu.fp8_tflops if row.precision == "fp8" and gpu.fp8_tflops else gpu.bf16_tflops) * 1e12 * row.tp
    return row.rate * row.isl * 2.0 * model.active / peak


def kernel_prefill_share(row: SiliconRow, calib: Calibration = CALIBRATION) -> float:
    """The share of that peak the measured prefill kernels reach on the run's GPU (mfu_prefill, times
    the fp8 GEMM scale at fp8)."""
    c = for_gpu(calib, row.gpu)
    return c.mfu_prefill * (c.fp8_gemm_scale if row.precision == "fp8" else 1.0)


def plausible_rows(calib: Calibration = CALIBRATION) -> list[SiliconRow]:
    """The runs whose prompt tokens the GPUs could have prefilled: a run needing more prefill compute
    than the measured kernels deliver (the Llama-3.1-8B-FP8 H200 runs at 100 output tokens need
    55-76% of the fp8 peak; the kernels reach 46%) served its prompts from vLLM's prefix cache,
    which the estimator does not model."""
    return [r for r in silicon_rows() if prefill_share_of_peak(r) <= kernel_prefill_share(r, calib)]


def silicon_checks(calib: Calibration = CALIBRATION) -> list[Check]:
    """Every plausible measured closed-loop run the estimator can lay out (one engine; requests that
    queue beyond the engine's KV capacity are the simulator's business, not a mean-field point's)."""
    out = []
    for row in plausible_rows(calib):
        c = silicon_check(row, calib)
        if c is not None:
            out.append(c)
    return out


def estimator_check(p: PublishedRate, calib: Calibration = CALIBRATION) -> Check | None:
    """The estimator's mean-field rate for a published setting, with the engine settings the run used:
    the largest rate holding the run's mean latencies ("slo"), or the rate with max_num_seqs sequences
    in flight ("saturated"); None where the run has no such figure (``mode`` ""). On ``calib`` as the
    run's engine runs it (``for_engine``: vLLM 0.6-0.7's V0 costs, multi-step), so that the factor is
    the estimator's error on the layout, not the difference between that engine and the planned one.
    What the planner's second source compares (``layout_factors``); the published check itself
    replays the run."""
    if not p.mode:
        return None
    calib = for_engine(calib, p.vllm_version, p.scheduler_steps)
    model, gpu = MODELS[p.model], GPUS[p.gpu]
    kw = dict(tp=p.tp, input_tokens=p.isl, output_tokens=p.osl, precision=p.precision, max_num_seqs=p.max_num_seqs,
              max_num_batched_tokens=p.max_num_batched_tokens, gpu_memory_utilization=p.gpu_memory_utilization,
              calib=calib)
    if p.mode == "saturated":
        got = operating_point(model, gpu, concurrency=p.max_num_seqs, **kw)
        if isinstance(got, Estimate):
            return Check(p.name, p.rate, 0.0, got.binding)
        return Check(p.name, p.rate, got[2] * p.engines, f"{p.max_num_seqs} sequences in flight")
    e = estimate(model, gpu, ttft_ms=p.ttft_ms, tpot_ms=p.tpot_ms, **kw)
    return Check(p.name, p.rate, e.max_rps * p.engines if e.feasible else 0.0, e.binding)


#: how plan.json names the published end-to-end runs when they widen a template's interval
E2E_SOURCE = "published vLLM runs"


#: a published run speaks for request sizes within this factor of the sizes its layout's runs cover
SIZE_REACH = 2.0


@dataclass(frozen=True)
class LayoutFactor:
    """The published end-to-end runs of one layout over the built-in estimator's figures for them."""
    factor: float  # median measured / predicted rate
    isl: tuple[int, int]  # the runs' mean input tokens, least and most
    osl: tuple[int, int]

    def covers(self, input_tokens: int, output_tokens: int) -> bool:
        """Whether a request of these sizes is the runs' setting (within SIZE_REACH of their sizes)."""
        return (self.isl[0] / SIZE_REACH <= input_tokens <= self.isl[1] * SIZE_REACH
                and self.osl[0] / SIZE_REACH <= output_tokens <= self.osl[1] * SIZE_REACH)


@lru_cache(maxsize=1)
def layout_factors() -> dict[tuple[str, str, int, str], LayoutFactor]:
    """(catalog model, GPU, TP, precision) -> the published end-to-end runs of that layout over the
    built-in estimator's figure for them (median of measured / predicted rate over the layout's
    measured closed-loop runs and published rates), with the request sizes they ran: a second source
    for the templates of the layout whose classes are of those sizes (hetinfra.perf.model,
    "Disagreement is uncertainty"). The shipped constants only (the current engine)."""
    groups: dict[tuple[str, str, int, str], list[tuple[float, int, int]]] = {}
    for row in plausible_rows():
        c = silicon_check(row)
        if c is not None and c.predicted > 0:
            groups.setdefault((row.model, row.gpu, row.tp, row.precision), []).append(
                (c.measured / c.predicted, row.isl, row.osl))
    for p in PUBLISHED:
        c = estimator_check(p)
        if c is not None and c.predicted > 0:
            groups.setdefault((p.model, p.gpu, p.tp, p.precision), []).append((c.measured / c.predicted, p.isl, p.osl))
    return {k: LayoutFactor(round(statistics.median(f for f, _, _ in v), 3), (min(i for _, i, _ in v), max(i for _, i, _ in v)),
                            (min(o for _, _, o in v), max(o for _, _, o in v))) for k, v in sorted(groups.items())}


def summary(title: str, checks: list[Check]) -> str:
    """One line: how many checks, their median error and |error|, p10 / p90, and how many within 15%."""
    errs = sorted(c.error for c in checks)
    if not errs:
        return f"{title}: no rows"
    absm = statistics.median(abs(e) for e in errs)
    within = sum(abs(e) <= 0.15 for e in errs)
    return (f"{title}: {len(errs)} rows, rate error median {statistics.median(errs):+.1%}, median |error| "
            f"{absm:.1%}, p10 {errs[len(errs) // 10]:+.1%}, p90 {errs[(9 * len(errs)) // 10]:+.1%}, "
            f"within 15%: {within}/{len(errs)}")


def e2e_report(calib: Calibration = CALIBRATION) -> str:
    lines = []
    sil = silicon_checks(calib)
    lines.append(summary("measured vLLM runs (aiconfigurator silicon_sample)", sil))
    by_group: dict[str, list[Check]] = {}
    for c in sil:
        by_group.setdefault(" ".join(c.label.split()[:3]), []).append(c)
    for name, cs in sorted(by_group.items()):
        lines.append("  " + summary(name, cs) + f"; TPOT median {statistics.median(c.tpot_err for c in cs):+.1%}, "
                     f"TTFT median {statistics.median(c.ttft_err for c in cs):+.1%}")
    return "\n".join(lines)
