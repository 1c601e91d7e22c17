"""The simulator's step times come from the source the planner's rates came from (issue 35): a unit
whose template was estimated on aiconfigurator's measured kernels (sources "estimator-v3+aiconfigurator")
is simulated on that layout's kernel constants, every other unit on the plan's built-in ones."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.catalog.gpus import GPUS
from hetinfra.catalog.models import MODELS
from hetinfra.errors import InvalidInputError
from hetinfra.facts import GPU_MEMORY_UTILIZATION, MAX_NUM_SEQS
from hetinfra.perf import aic_backend
from hetinfra.perf.calibration import CALIBRATION
from hetinfra.perf.estimator import build_engine
from hetinfra.perf.kernel_fit import with_gpu
from hetinfra.perf.model import ESTIMATOR_VERSION, KERNELS_SUFFIX
from hetinfra.sim.engines import measured_capacity, measured_rate, unit_engine
from hetinfra.sim.plan_sim import SimPlan

GOLDEN = Path(__file__).resolve().parents[1] / "plan" / "golden" / "chat.json"


def _unit(sources_suffix: str = ""):
    """chat.json's first unit (Llama-3.1-8B bf16 on one L40S) with its template's sources as given."""
    plan = SimPlan.of(json.loads(GOLDEN.read_text()))
    alloc = plan.allocations[0]
    t = {t.id: t for t in plan.templates}[alloc.template]
    t = t.model_copy(update={"sources": {c: ESTIMATOR_VERSION + sources_suffix for c in t.sources}})
    m = next(m for m in plan.models if m.name == alloc.model)
    return alloc, t, m


def _step_ms(alloc, template, m) -> float:
    ue = unit_engine(alloc, MODELS["llama-3.1-8b"], "bf16", m.classes, {}, template, m.slo)
    return ue.engine.step_s(512.0, 512.0 * 256, 32.0, 32.0 * 1500) * 1e3


def _marked_kernels():
    """A stand-in for the layout's kernel constants, plainly different from the shipped ones."""
    slow = dataclasses.replace(CALIBRATION, by_gpu=(), eta_bw=0.4, mfu_prefill=0.3, mfu_decode=0.3)
    return with_gpu(CALIBRATION, "L40S", {k: getattr(slow, k) for k in ("eta_bw", "mfu_prefill", "mfu_decode")})


def test_a_unit_estimated_on_the_kernels_is_simulated_on_them(monkeypatch):
    alloc, builtin_t, m = _unit()
    _, kernel_t, _ = _unit(KERNELS_SUFFIX)
    asked = []

    def fake(model, gpu, tp, precision, calib=CALIBRATION):
        asked.append((model, gpu, tp, precision))
        return _marked_kernels()

    monkeypatch.setattr(aic_backend, "available", lambda: True)
    monkeypatch.setattr(aic_backend, "layout_calibration", fake)
    builtin, kernels = _step_ms(alloc, builtin_t, m), _step_ms(alloc, kernel_t, m)
    assert asked == [("llama-3.1-8b", "L40S", 1, "bf16")]  # the built-in unit never asks
    assert kernels > 1.3 * builtin
    big = max(m.classes, key=lambda c: (c.input_tokens + c.output_tokens, c.input_tokens))
    ref = build_engine(MODELS["llama-3.1-8b"], GPUS["L40S"], 1, 1, big.input_tokens, big.output_tokens, "bf16",
                       GPU_MEMORY_UTILIZATION, MAX_NUM_SEQS, None, None, _marked_kernels())
    assert kernels == pytest.approx(ref.step_s(512.0, 512.0 * 256, 32.0, 32.0 * 1500) * 1e3)


def test_a_kernel_estimated_plan_without_the_kernels_is_a_clear_error(monkeypatch):
    alloc, kernel_t, m = _unit(KERNELS_SUFFIX)
    monkeypatch.setattr(aic_backend, "available", lambda: False)
    with pytest.raises(InvalidInputError, match="aiconfigurator"):
        _step_ms(alloc, kernel_t, m)
    monkeypatch.setattr(aic_backend, "available", lambda: True)
    monkeypatch.setattr(aic_backend, "layout_calibration", lambda *a, **k: None)
    with pytest.raises(InvalidInputError, match="do not cover"):
        _step_ms(alloc, kernel_t, m)


# its layout's kernel fit is one of test_aic_backend's spread: made once, on their worker (tests/xdist_groups.py)
@pytest.mark.xdist_group("kernel-fits")
def test_with_aiconfigurator_the_simulated_steps_are_the_layouts_kernel_fit():
    """Over 2 s on a loaded machine (about 1.2 s quiet): one real kernel fit of the layout, the only way
    to check the hook against aiconfigurator itself; runs only where the extra is installed."""
    pytest.importorskip("aiconfigurator_core", reason="aiconfigurator-core is not installed (the extra)")
    alloc, builtin_t, m = _unit()
    _, kernel_t, _ = _unit(KERNELS_SUFFIX)
    kernels = aic_backend.layout_calibration("llama-3.1-8b", "L40S", 1, "bf16", CALIBRATION)
    assert kernels is not None and kernels != CALIBRATION
    assert _step_ms(alloc, kernel_t, m) != pytest.approx(_step_ms(alloc, builtin_t, m), rel=1e-6)


_CLASS = st.text(alphabet="abcxyz_", min_size=1, max_size=4)


@settings(max_examples=200, deadline=None)
@given(caps=st.dictionaries(_CLASS, st.one_of(st.none(), st.floats(0, 1e4)), max_size=6),
       kinds=st.dictionaries(_CLASS, st.sampled_from(["profile:a.csv", "estimator-v3", "", "profile:"]), max_size=6),
       derate=st.one_of(st.none(), st.floats(0.05, 2.0)))
def test_one_class_rate_is_the_capacity_tables(caps, kinds, derate):
    """A unit's profiled rate is read one class at a time (measured_rate: a fleet's templates carry dozens
    of classes, and reading the whole table per class was quadratic); it is exactly the table's entry
    (measured_capacity), None where the class's rate is not a profile's."""
    factor = float(derate or 1.0)  # the table as measured_capacity wrote it before measured_rate existed
    before = {w: cap / factor for w, cap in sorted(caps.items()) if cap and str(kinds.get(w, "")).startswith("profile:")}
    assert measured_capacity(caps, kinds, derate) == before
    for cls in set(caps) | set(kinds) | {"absent"}:
        assert measured_rate(caps, kinds, derate, cls) == before.get(cls)
