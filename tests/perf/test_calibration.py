"""The shipped estimator constants against the measured data sets (tools/fit_calibration.py's
evaluation, not its search): median |error| of each data set's TPOT-like quantity <= 25% on fit rows
and on held-out rows. Data sets live in ../shared (outside the repository); a missing one is skipped."""

from __future__ import annotations

import math
import shutil

import pytest

from hetinfra.catalog.gpus import GPUS
from hetinfra.catalog.models import MODELS
from hetinfra.perf.calibration import CALIBRATION
from hetinfra.perf.estimator import decode_step_ms, estimate, prefill_ms

from tests.perf.fit_tool import REPO, SHARED, load_fit_tool



fc = load_fit_tool()


@pytest.fixture(scope="module")
def result():
    rows = fc.load_rows(SHARED)
    return fc.evaluate(rows, CALIBRATION, fc.ENGINES)


def _needs(dataset: str):
    if not (SHARED / fc.DATASET_DIRS[dataset]).is_dir():
        pytest.skip(f"{SHARED / fc.DATASET_DIRS[dataset]} is absent")


@pytest.mark.parametrize("dataset", list(fc.LOADERS))
def test_tpot_median_error_within_25_percent_on_fit_and_held_out_rows(dataset, result):
    _needs(dataset)
    got = result[(dataset, fc.PRIMARY[dataset])]
    for part in ("held_out",) if dataset in fc.FITTED_ELSEWHERE else ("fit", "held_out"):
        stat = got[part]
        assert stat is not None and stat.n >= 5, (dataset, part)
        assert stat.median <= fc.TARGET, f"{dataset} {fc.PRIMARY[dataset]} {part}: median |error| {stat.median:.0%}"


@pytest.mark.parametrize("dataset, quantity", [("helix", "prefill"), ("splitwise", "prefill"),
                                               ("sageserve", "prefill"), ("silicon", "TTFT")])
def test_prefill_and_ttft_stay_within_30_percent(dataset, quantity, result):
    # not part of the acceptance target; a regression guard on the fitted TTFT side. TTFT is judged on
    # the 241 measured runs its queueing constants are fitted on (tools/fit_kernels.py: 27%), not on
    # vllm_md's 17 of them (36%, pessimistic: +14%)
    _needs(dataset)
    for part in ("held_out",) if dataset in fc.FITTED_ELSEWHERE else ("fit", "held_out"):
        assert result[(dataset, quantity)][part].median <= 0.30, (dataset, quantity, part)


def test_held_out_rows_are_not_empty_and_split_is_deterministic():
    if not SHARED.is_dir():
        pytest.skip("no ../shared")
    a, b = fc.load_rows(SHARED), fc.load_rows(SHARED)
    assert [(r.label, r.held_out) for r in a] == [(r.label, r.held_out) for r in b]
    for ds in {r.dataset for r in a}:
        held = [r for r in a if r.dataset == ds and r.held_out]
        fit = [r for r in a if r.dataset == ds and not r.held_out]
        assert held and (fit or ds in fc.FITTED_ELSEWHERE), ds


def test_the_fit_calibrates_what_estimate_uses():
    # decode_step_ms / prefill_ms are the step-time model estimate() solves with: its floors are them
    m, g = MODELS["llama-3.1-70b"], GPUS["H100"]
    e = estimate(m, g, tp=4, input_tokens=1000, output_tokens=200, ttft_ms=5000, tpot_ms=100)
    step = decode_step_ms(m, g, tp=4, batch=1, context=1000 + CALIBRATION.ctx_output_fraction * 200)
    assert e.min_tpot_ms == pytest.approx(step, rel=1e-9)
    assert e.min_ttft_ms == pytest.approx(prefill_ms(m, g, tp=4, tokens=1000) + step, rel=1e-9)  # 1 chunk
    # GPU time only (per-layer profiles) = full step less the engine's fixed and per-sequence costs
    bare = decode_step_ms(m, g, tp=4, batch=8, context=1500, overheads=False)
    full = decode_step_ms(m, g, tp=4, batch=8, context=1500)
    assert full - bare == pytest.approx(CALIBRATION.t_fixed_ms + 8 * CALIBRATION.t_per_seq_us / 1e3, rel=1e-9)
    assert prefill_ms(m, g, tp=4, tokens=1000, batch=2) > 1.9 * prefill_ms(m, g, tp=4, tokens=1000, overheads=False)


def test_write_rewrites_only_values(tmp_path):
    calib_py, script = tmp_path / "calibration.py", tmp_path / "fit_calibration.py"
    shutil.copy(fc.CALIBRATION_PY, calib_py)
    shutil.copy(REPO / "tools" / "fit_calibration.py", script)
    fc.write_calibration(CALIBRATION, fc.ENGINES, calib_py, script)
    strip = lambda t: [ln for ln in t.splitlines() if not ln.startswith("FIT: ")]  # noqa: E731
    assert strip(calib_py.read_text()) == strip(fc.CALIBRATION_PY.read_text())
    assert script.read_text() == (REPO / "tools" / "fit_calibration.py").read_text()
    changed, engines = fc.set_param("mfu_scale:L4", 0.5, *fc.set_param("t_fixed_ms", 9.5, CALIBRATION, fc.ENGINES))
    engines = {**engines, "splitwise-2023": {**engines["splitwise-2023"], "t_fixed_ms": 7.25}}
    fc.write_calibration(changed, engines, calib_py, script)
    text = calib_py.read_text()
    assert "    t_fixed_ms: float = 9.5\n" in text and '("L4", 0.5)' in text
    assert '"t_fixed_ms": 7.25' in script.read_text()


def test_objective_is_finite_for_the_shipped_constants():
    rows = [r for r in fc.load_rows(SHARED) if not r.held_out]
    if not rows:
        pytest.skip("no ../shared")
    assert math.isfinite(fc.objective(rows, CALIBRATION, fc.ENGINES))
