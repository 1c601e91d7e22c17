"""The built-in estimator against public measurements vendored in hetinfra/perf/data: the kernel
table it is fitted on (aiconfigurator-core's measured kernels) and the end-to-end checks (measured
vLLM runs, MLPerf). These need nothing but the repository."""

from __future__ import annotations

import dataclasses
import importlib.util
import statistics
import sys
from pathlib import Path

import pytest

from hetinfra.catalog.gpus import GPUS
from hetinfra.catalog.models import MODELS
from hetinfra.perf.calibration import CALIBRATION, GPU_KERNELS, V0_ENGINE, for_engine, for_gpu
from hetinfra.perf.e2e_checks import plausible_rows, silicon_checks
from hetinfra.perf.estimator import decode_step_ms, estimate
from hetinfra.perf.published import MLPERF, PENDING, PUBLISHED, kernel_rows, silicon_rows, size_table
from hetinfra.sim.benchmark_run import policy_for, published_check, published_checks, request_sizes

REPO = Path(__file__).resolve().parents[2]


def _fit_tool():
    if "fit_kernels" not in sys.modules:
        spec = importlib.util.spec_from_file_location("fit_kernels", REPO / "tools" / "fit_kernels.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["fit_kernels"] = mod
        spec.loader.exec_module(mod)
    return sys.modules["fit_kernels"]


def test_the_vendored_tables_load_and_name_catalog_entries():
    assert len(kernel_rows()) > 900 and len(silicon_rows()) > 200
    for r in kernel_rows():
        assert r.gpu in GPUS and r.model in MODELS and r.ms > 0
    for r in silicon_rows():
        assert r.gpu in GPUS and r.model in MODELS and r.rate > 0


@pytest.mark.parametrize("gpu", sorted(GPU_KERNELS))
def test_kernel_residuals_per_regime_are_small_and_not_optimistic(gpu):
    """Per step kind and precision the fitted step model is within 15% of the measured kernels at the
    median, and its p10 (optimistic tail) within 30%."""
    fk = _fit_tool()
    groups: dict[tuple, list[float]] = {}
    for r, e in fk.errors([r for r in fk.fit_rows() if r.gpu == gpu], CALIBRATION):
        groups.setdefault((r.kind, r.precision), []).append(e)
    for key, errs in groups.items():
        errs.sort()
        assert abs(statistics.median(errs)) < 0.15, (gpu, key)
        assert errs[len(errs) // 10] > -0.3, (gpu, key)


def test_a_planted_fault_in_the_kernel_constants_fails_the_residual_check():
    fk = _fit_tool()
    bad = dataclasses.replace(CALIBRATION, by_gpu=tuple(
        (g, tuple((k, v * 1.6 if k == "eta_bw" else v) for k, v in vals)) for g, vals in CALIBRATION.by_gpu))
    errs = sorted(e for r, e in fk.errors(fk.fit_rows(), bad) if r.kind == "decode" and r.gpu == "H100")
    assert statistics.median(errs) < -0.15  # weights read 1.6x too fast: optimistic decode steps


def test_the_kernel_constants_apply_to_their_gpu_and_its_aliases_only():
    h100 = for_gpu(CALIBRATION, "H100")
    assert h100.eta_bw == GPU_KERNELS["H100"]["eta_bw"] and h100.by_gpu == ()
    assert for_gpu(CALIBRATION, "H100-MEGA") == h100
    assert for_gpu(CALIBRATION, "A100") == for_gpu(CALIBRATION, "A100-80GB")
    assert for_gpu(CALIBRATION, "L4") is CALIBRATION  # no kernel data: the shared constants


def test_the_small_model_decode_step_follows_the_measured_kernels():
    """Issue 35: the 8B batch-1 decode step was 9.9 ms against the kernels' 6.2 ms."""
    rows = [r for r in kernel_rows() if (r.gpu, r.model, r.precision, r.tp, r.kind, r.batch, r.context)
            == ("H100", "llama-3.1-8b", "bf16", 1, "decode", 1, 1024)]
    gpu_only = decode_step_ms(MODELS["llama-3.1-8b"], GPUS["H100"], tp=1, batch=1, context=1024, overheads=False)
    assert gpu_only == pytest.approx(rows[0].ms, rel=0.15)
    assert decode_step_ms(MODELS["llama-3.1-8b"], GPUS["H100"], tp=1, batch=1, context=1024) < 8.0


def test_measured_vllm_runs_median_within_10_percent():
    checks = silicon_checks()
    errs = [c.error for c in checks]
    assert len(checks) > 200
    assert abs(statistics.median(errs)) < 0.10
    assert statistics.median(abs(e) for e in errs) < 0.10
    assert sum(abs(e) <= 0.15 for e in errs) >= 0.8 * len(errs)


def test_runs_beyond_the_measured_prefill_rate_are_left_out_as_prefix_cached():
    dropped = [r for r in silicon_rows() if r not in plausible_rows()]
    assert dropped and all(r.model == "llama-3.1-8b" for r in dropped)


# The published checks' errors today (docs/calibration.md, "End-to-end checks"; each run replayed on the
# simulator under its benchmark's procedure, sizes, engine's scheduler and engine's constants,
# hetinfra.sim.benchmark_run): MLPerf v5.0 server -0.1% (vLLM 0.7.3), +4.5% (0.6.4), offline -0.9%, +0.8%;
# vLLM v0.6.0 blog (ShareGPT first turns at the post's means, --num-scheduler-steps 10) H100 8B -14.5%, 70B
# TP4 +2.0%; A100 8B -0.5%, 70B TP4 +13.2% (these eight on the V0 engine's constants, calibration.V0_ENGINE,
# fitted on them by tools/fit_v0_engine.py; leave-one-out the same figures: the fit is 110 us / 0.4 in every
# fold); MLPerf v6.0 (vLLM 0.15-dev: asynchronous scheduling, calibration.ASYNC_SCHEDULING; inputs in Llama 3
# tokens, published.LLAMA3_PER_LLAMA2_TOKEN) server -11.8%, offline -20.3%. The bands hold them against drift (the v6.0 runs, pessimistic, in their own: a replay on
# the 0.12 engine's constants falls out of it); the acceptance is split: the median (met: -0.3%,
# median |error| 3.2%) passes, "each within 15%" (one run misses, KNOWN_MISSES) is a strict xfail.
BAND = (-0.20, 0.20)
BANDS = {"6.0": (-0.32, -0.10)}  # MLPerf round -> band
KNOWN_MISSES = {  # outside 15%, and why (docs/calibration.md)
    # the GPU step at 350-600 sequences of short context, 1.1-1.3x slow by these runs and the four pending
    # vLLM 0.9.2 runs (tools/fit_large_batch.py; the CPU cost, overlapped in vLLM 0.15, is not it); the
    # measured kernels are faster there too (81.5 ms against our 109 ms at 450 x 370 tokens) but scatter by
    # up to 2x between neighbouring batches; fitted with such rows every plan moves
    "MLPerf Inference v6.0 open, Llama-3.1-70B offline, 8 x H200, vLLM 0.15.0-dev",
}


def _band(pub):
    return next((b for r, b in BANDS.items() if f"v{r} " in pub.name), BAND)


@pytest.mark.parametrize("pub", PUBLISHED, ids=lambda p: p.name)
def test_each_published_check_records_its_source_and_stays_in_its_band(pub):
    assert "Apache-2.0" in pub.source and pub.vllm_version and pub.isl > 0 and pub.osl > 0
    check = next(c for c in published_checks() if c.label == pub.name)
    lo, hi = _band(pub)
    assert lo < check.error < hi, check


def test_published_checks_median_within_10_percent():
    """Issue 35's acceptance, its median half: over the published runs, the median rate error."""
    checks = published_checks()
    assert len(checks) >= 10
    assert abs(statistics.median(c.error for c in checks)) <= 0.10
    assert statistics.median(abs(c.error) for c in checks) <= 0.10


@pytest.mark.xfail(strict=True, reason="not met: MLPerf v6.0's vLLM 0.15 offline run (-20%; its server run -12%): the step "
                   "model's GPU step at 350-600 short sequences, 1.1-1.3x slow there by these runs and MLPerf v5.1's four "
                   "vLLM 0.9.2 runs (tools/fit_large_batch.py), where the measured kernels scatter by up to 2x; no "
                   "supported constant meets them (docs/calibration.md, 'The current engine at 350-600 sequences')")
def test_each_published_check_within_15_percent():
    assert all(abs(c.error) <= 0.15 for c in published_checks())


def _large_batch_tool():
    spec = importlib.util.spec_from_file_location("fit_large_batch", REPO / "tools" / "fit_large_batch.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


@pytest.mark.parametrize("pub", PENDING, ids=lambda p: p.name)
def test_the_pending_v1_runs_are_recorded_and_read_slow_with_or_without_the_cpu_cost(pub):
    """MLPerf v5.1's vLLM 0.9.2 runs (the current engine at 350-600 sequences; docs/calibration.md, "The
    current engine at 350-600 sequences"): replayed -36% to -46% on the shipped constants, and -14% to -34%
    with the engine's CPU-side step cost removed: the CPU cost alone brings one of the four within 15%
    (the H100 pair's server run), not the others. A change that brings one within 15% on the shipped
    constants fails here: make it a check then."""
    assert "Apache-2.0" in pub.source and "v5.1" in pub.source and pub.vllm_version == "0.9.2"
    from hetinfra.sim.policy import VLLMv0

    assert pub not in PUBLISHED and pub.scheduler == "v1" and not isinstance(policy_for(pub), VLLMv0)
    assert -0.55 < published_check(pub).error < -0.35
    assert -0.40 < published_check(pub, _large_batch_tool().without_cpu()).error < -0.10


def test_the_gemm_factor_the_v1_runs_need_is_beyond_the_fp8_peak_with_the_shipped_cpu_cost():
    """tools/fit_large_batch.py's third report, at its sharpest run: with the engine's CPU cost as shipped
    (84 us a sequence, added to the GPU's in vLLM 0.9.2) MLPerf v5.1's H200 server run needs the fp8 GEMMs
    about twice as fast (beyond the fp8 peak: fp8_gemm_scale 0.589 x 1.98 > 1); without it, about 1.3x, as
    vLLM 0.15's run (whose CPU work overlaps the GPU's) needs 1.16x."""
    tool = _large_batch_tool()
    h200 = next(p for p in PENDING if p.gpu == "H200" and p.procedure == "server")
    v6 = next(p for p in PUBLISHED if p.vllm_version.startswith("0.15") and p.procedure == "server")
    assert tool.gemm_factor(h200, CALIBRATION) > 1.0 / GPU_KERNELS["H200"]["fp8_gemm_scale"]

    def between(p, calib, lo: float, hi: float) -> bool:
        """Whether the factor gemm_factor bisects for lies in (lo, hi): the replay is still slow at lo
        and no longer at hi (the replay speeds up with the factor, as the bisection assumes); two
        replays where the bisection runs nine"""
        slow = [published_check(p, tool.with_gemm_factor(calib, p.gpu, f)).error < 0.0 for f in (lo, hi)]
        return slow == [True, False]

    assert between(h200, tool.without_cpu(), 1.2, 1.6)
    assert between(v6, CALIBRATION, 1.05, 1.35)


def test_the_runs_outside_15_percent_are_the_known_ones():
    """The xfail above names its runs: a run that newly misses, or one that comes within, fails here."""
    assert {c.label for c in published_checks() if abs(c.error) > 0.15} == KNOWN_MISSES


def test_each_run_replays_under_its_engines_scheduler():
    """vLLM 0.6-0.7 without chunked prefill: prefill-only steps (hetinfra.sim.policy.VLLMv0); from 0.8 on V1."""
    from hetinfra.perf.calibration import _version_key
    from hetinfra.sim.policy import VLLMv0

    for p in PUBLISHED:
        v0 = _version_key(p.vllm_version) < (0, 8)
        assert (p.scheduler == "v0") == v0 and isinstance(policy_for(p), VLLMv0) == v0, p.name
        assert (for_engine(CALIBRATION, p.vllm_version).vllm_version == "0.6") == v0, p.name  # and its constants
        if v0:  # without chunking a prompt must fit one step's budget (vLLM ignores longer ones)
            table = size_table(p.sizes) if p.sizes else ()
            everyone = request_sizes(p, len(table)) if p.sampler == "vllm" else table  # scaled inputs
            longest = max((a for a, _ in everyone), default=p.isl)
            assert p.max_num_batched_tokens >= longest


def test_the_v0_engine_constants_are_the_fit_tools_and_it_rewrites_only_them(tmp_path):
    """calibration.V0_ENGINE is a point of tools/fit_v0_engine.py's grid, and its --write replaces that
    one line (a re-run reproduces what ships; figures in docs/calibration.md, "The V0 engine")."""
    spec = importlib.util.spec_from_file_location("fit_v0_engine", REPO / "tools" / "fit_v0_engine.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert V0_ENGINE["t_per_seq_us"] in tool.PER_SEQ_US and V0_ENGINE["multi_step_share"] in tool.SHARES
    assert {p.name for p in tool.v0_runs()} == {p.name for p in PUBLISHED if p.scheduler == "v0"}
    text = (REPO / "hetinfra" / "perf" / "calibration.py").read_text()
    copy = tmp_path / "calibration.py"
    copy.write_text(text)
    tool.write(95.0, 0.7, copy)
    changed = [(a, b) for a, b in zip(text.splitlines(), copy.read_text().splitlines()) if a != b]
    assert len(changed) == 1 and '"t_per_seq_us": 95.0, "multi_step_share": 0.7' in changed[0][1]


def test_the_mlperf_inputs_are_the_data_sets_published_mean():
    """Estimator-v3's first check took a 684-token mean input (-26%); the data set's is 222."""
    assert MLPERF[0].isl == 222 and MLPERF[0].osl == 298


def test_a_llama_3_runs_inputs_are_counted_in_llama_3_tokens():
    """The OpenOrca table's lengths are Llama 2 tokens; a Llama 3.1 run's prompts were tokenised by
    Llama 3's tokenizer (3.17 / 3.94 of the tokens on English text): its replayed inputs scale by that,
    its outputs (the run's own measured tokens per sample) do not, and a Llama 2 run's are the table's."""
    from hetinfra.perf.published import LLAMA3_PER_LLAMA2_TOKEN

    llama2, llama3 = MLPERF[0], next(p for p in MLPERF + PENDING if p.model.startswith("llama-3"))
    table = size_table("openorca")
    mean_in = sum(a for a, _ in table) / len(table)
    for run, scale in ((llama2, 1.0), (llama3, LLAMA3_PER_LLAMA2_TOKEN)):
        sizes = request_sizes(run, 20000)
        assert run.input_scale == scale and run.isl == round(222 * scale)
        assert statistics.mean(a for a, _ in sizes) == pytest.approx(mean_in * scale, rel=0.02)
        assert statistics.mean(o for _, o in sizes) == pytest.approx(run.osl, rel=0.03)


@pytest.mark.parametrize("keys,factor", [(("mfu_prefill", "mfu_decode"), 2.0), (("mfu_decode",), 1.6)])
def test_published_checks_fail_when_the_gpu_is_made_faster(keys, factor):
    fast = dataclasses.replace(CALIBRATION, by_gpu=tuple(
        (g, tuple((k, v * factor if k in keys else v) for k, v in vals)) for g, vals in CALIBRATION.by_gpu))
    bursts = [(p, published_check(p, fast)) for p in PUBLISHED if p.procedure == "burst"]  # the fast replays
    assert any(not _band(p)[0] < c.error < _band(p)[1] for p, c in bursts)


def test_tight_tpot_chat_fits_more_load_on_an_h100_than_estimator_v2():
    """An 8B chat model at TPOT 15 ms: estimator-v2's 3.6 ms fixed step cost left less room for the
    batch than the measured runs' 1 ms."""
    kw = dict(tp=1, input_tokens=200, output_tokens=200, ttft_ms=1000, tpot_ms=15)
    v2 = dataclasses.replace(CALIBRATION, by_gpu=(), t_fixed_ms=3.6, t_per_seq_us=67.1)
    now = estimate(MODELS["llama-3.1-8b"], GPUS["H100"], **kw)
    old = estimate(MODELS["llama-3.1-8b"], GPUS["H100"], calib=v2, **kw)
    assert now.max_rps > 1.05 * old.max_rps
