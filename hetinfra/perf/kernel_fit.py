"""The per-GPU step-model fit on measured kernel timings, shared by tools/fit_kernels.py (the
shipped GPU_KERNELS, on the vendored kernel table) and hetinfra.perf.aic_backend (a layout's own
constants, on aiconfigurator's kernels for exactly that model and layout).

Error = predicted / measured step time - 1 (- is optimistic). Objective per GPU: over the step kinds
(decode, prefill, mixed), each weighted equally, 0.5 x the median |log error| + the mean |log error|
+ 0.5 x the mean optimistic log error (the model must not promise faster steps than the kernels).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import defaultdict

from hetinfra.catalog.gpus import GPUS
from hetinfra.catalog.models import MODELS
from hetinfra.perf import estimator as est
from hetinfra.perf.calibration import CALIBRATION, Calibration
from hetinfra.perf.published import KernelRow, kernel_rows

KINDS = ("decode", "prefill", "mixed")
# searched per GPU: (field, lower bound, upper bound)
PARAMS = (("eta_bw", 0.4, 1.0), ("eta_kv", 0.2, 1.0), ("mfu_prefill", 0.2, 0.95), ("mfu_prefill_attn", 0.1, 0.95),
          ("mfu_decode", 0.1, 0.95), ("fp8_gemm_scale", 0.4, 1.0), ("fp8_prefill_scale", 0.5, 2.0), ("mem_compute_serial", 0.0, 1.0),
          ("t_layer_us", 0.0, 200.0), ("moe_eff", 0.05, 1.0))
NVLINK_PARAMS = (("allreduce_us_nvlink", 1.0, 40.0),)
PCIE_PARAMS = (("allreduce_us_pcie", 1.0, 80.0), ("pcie_allreduce_efficiency", 0.05, 1.5),
               ("pcie_allreduce_tp_decay", 0.0, 5.0))


def fit_rows() -> list[KernelRow]:
    """The kernel rows the fit uses: all but the fp8 MoE ones (calibration.Calibration.moe_eff says why)."""
    return [r for r in kernel_rows() if not (r.precision == "fp8" and MODELS[r.model].active_params)]


def predict(row: KernelRow, calib: Calibration) -> float:
    """The built-in model's GPU time (ms) of a kernel row's step (no CPU-side step costs)."""
    m, g = MODELS[row.model], GPUS[row.gpu]
    if row.kind == "decode":
        return est.decode_step_ms(m, g, tp=row.tp, batch=row.batch, context=row.context, precision=row.precision,
                                  overheads=False, calib=calib)
    if row.kind == "prefill":
        return est.prefill_ms(m, g, tp=row.tp, tokens=row.context, precision=row.precision, overheads=False,
                              calib=calib)
    e = est._bare(m, g, row.tp, 1, row.context, row.context, row.precision, None, False, calib)
    chunk, ctx = row.chunk, row.context  # the chunk sits mid-prompt on average: it attends half of the rest
    positions = chunk * chunk / 2 + chunk * (ctx - chunk) / 2
    return e.step_s(chunk, positions, row.batch, row.batch * ctx, 0.0, 0.0) * 1e3


def errors(rows, calib: Calibration) -> list[tuple[KernelRow, float]]:
    return [(r, predict(r, calib) / r.ms - 1.0) for r in rows]


def objective(rows, calib: Calibration) -> float:
    by_kind: dict[str, list[float]] = defaultdict(list)
    for r, e in errors(rows, calib):
        by_kind[r.kind].append(math.log1p(e))
    total = 0.0
    for logs in by_kind.values():
        absl = [abs(x) for x in logs]
        total += 0.5 * statistics.median(absl) + statistics.fmean(absl) + 0.5 * statistics.fmean(
            [-x for x in logs if x < 0] or [0.0])
    return total / max(len(by_kind), 1)


def with_gpu(calib: Calibration, gpu: str, values: dict[str, float]) -> Calibration:
    """``calib`` whose by_gpu entry for ``gpu`` is ``values``."""
    rest = tuple(e for e in calib.by_gpu if e[0] != gpu)
    return dataclasses.replace(calib, by_gpu=tuple(sorted(rest + ((gpu, tuple(sorted(values.items()))),))))


def start_values(calib: Calibration, gpu: str) -> dict[str, float]:
    params = PARAMS + (NVLINK_PARAMS if GPUS[gpu].nvlink else PCIE_PARAMS)
    have = dict(next((v for g, v in calib.by_gpu if g == gpu), ()))
    shared = {name: getattr(calib, name) for name, _, _ in params}
    shared["mfu_prefill_attn"] = calib.mfu_prefill_attn or calib.mfu_prefill
    shared["t_layer_us"] = calib.t_layer_us or 5.0
    shared["pcie_allreduce_tp_decay"] = calib.pcie_allreduce_tp_decay or 1.0
    return {name: have.get(name, shared[name]) for name, _, _ in params}


def fit_gpu(gpu: str, rows, calib: Calibration = CALIBRATION, rounds: int = 6, log=print) -> dict[str, float]:
    """Coordinate search (multiplicative steps, halving) of one GPU's constants on its rows."""
    mine = [r for r in rows if r.gpu == gpu]
    params = PARAMS + (NVLINK_PARAMS if GPUS[gpu].nvlink else PCIE_PARAMS)
    vals = start_values(calib, gpu)
    best = objective(mine, with_gpu(calib, gpu, vals))
    step = 0.3
    for rnd in range(rounds):
        for name, lo, hi in params:
            for direction in (1, -1):
                while True:
                    cur = vals[name]
                    new = min(hi, max(lo, cur * (1 + step) ** direction if cur > 0 else (lo + hi) / 20))
                    if new == cur:
                        break
                    trial = dict(vals, **{name: new})
                    got = objective(mine, with_gpu(calib, gpu, trial))
                    if got < best - 1e-9:
                        vals, best = trial, got
                    else:
                        break
        log(f"  {gpu} round {rnd + 1}: objective {best:.4f}")
        step /= 2
    return {k: float(f"{v:.3g}") for k, v in vals.items()}


