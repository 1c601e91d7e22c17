"""The performance model the planner uses: measured profiles first, the analytical estimator else.

``RateSource`` records where each number came from; plan.json carries it per template and class.
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from pathlib import Path

from hetinfra.catalog.gpus import get_gpu
from hetinfra.catalog.models import MODELS, ModelArch, get_model
from hetinfra.errors import InvalidInputError, did_you_mean
from hetinfra.perf.profiles import ProfileTable
from hetinfra.spec.demand import RequestClass
from hetinfra.spec.models import ModelSpec

ESTIMATOR_VERSION = "estimator-v3"
#: the reason a layout has no rate at all (neither a profile row nor the estimator applies): the GPU or the
#: model's architecture is unknown to the estimator (hetinfra.plan.staging warns of a GPU offered so)
NO_RATE = "no profile row applies and the estimator needs"
#: what a rate rated at best-effort bounds has in front of its source (templates[].sources[class]): the planner
#: sets it (hetinfra.plan.tail), the simulator's run sizing reads it (hetinfra.sim.replications)
BEST_EFFORT_SOURCE = "best-effort:"
#: how plan.json names the measured engine's figure when it widens the interval of an engine whose
#: constants assume more (calibration.MEASURED_AS: vLLM 0.14 on, asynchronous scheduling)
MEASURED_ENGINE_SOURCE = "vLLM 0.12 as measured (CPU work added to the GPU's)"


@dataclass(frozen=True)
class RateResult:
    """Max request rate (req/s) of ONE engine of tp x pp GPUs for one class, or why there is none."""

    max_rps: float
    source: str  # "profile:<file>:<line>" or ESTIMATOR_VERSION
    reason: str | None = None  # why max_rps is 0
    tpot_floor_ms: float | None = None  # fastest TPOT the layout can reach (estimator only)
    ttft_floor_ms: float | None = None
    batch: int = 0  # concurrent sequences at max_rps (estimator only; its confidence depends on it)
    #: another source's rate for the same setting as a factor of max_rps, and its name (the built-in
    #: estimator under the kernel backend; published end-to-end runs of the layout under the built-in
    #: one): hetinfra.perf.confidence widens the template's interval where they disagree
    other: tuple[float, str] | None = None


@dataclass(frozen=True)
class ModelContext:
    """What the performance model needs to know about one planned model."""

    names: tuple[str, ...]  # names a profile row may use: service name, catalog name, source
    arch: ModelArch | None
    precision: str
    ttft_ms: float
    tpot_ms: float
    vllm_version: str | None = None  # the engine planned for (deploy.vllm_version); None: the current one
    estimator: str = "builtin"  # planning.estimator: builtin, aiconfigurator or auto (hetinfra.perf.aic_backend)


class PerformanceModel:
    def __init__(self, profiles: ProfileTable):
        self.profiles = profiles
        self._cache: dict[tuple, RateResult] = {}

    def rate(self, ctx: ModelContext, gpu: str, tp: int, pp: int, cls: RequestClass, nodes: int | None = None
             ) -> RateResult:
        """``nodes``: nodes the pp stages span (None: one per stage; 1: a pipeline inside one node)."""
        if nodes is not None and nodes == pp:
            nodes = None
        key = (ctx.names, ctx.precision, ctx.ttft_ms, ctx.tpot_ms, ctx.vllm_version, ctx.estimator, gpu, tp, pp, nodes,
               cls.input_tokens, cls.output_tokens)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._rate(ctx, gpu, tp, pp, cls, nodes)
        return hit

    def _rate(self, ctx: ModelContext, gpu: str, tp: int, pp: int, cls: RequestClass, nodes: int | None = None
              ) -> RateResult:
        row = self.profiles.lookup(ctx.names, gpu, tp, pp, cls.input_tokens, cls.output_tokens, ctx.ttft_ms, ctx.tpot_ms)
        spec = get_gpu(gpu)
        if row is not None:
            reason = None if row.max_rps > 0 else f"profile {row.origin} gives 0 req/s"
            return RateResult(min(row.max_rps, _physical_bound(ctx, spec, tp, pp, cls)), f"profile:{row.origin}", reason)
        if ctx.arch is None or spec is None:
            what = "the model's architecture" if ctx.arch is None else f"GPU {gpu} in the catalog"
            return RateResult(0.0, "none", f"{NO_RATE} {what}")
        from hetinfra.perf.calibration import CALIBRATION, CALIBRATIONS, MEASURED_AS, calibration_for
        from hetinfra.perf.estimator import estimate  # local: keeps `hetinfra --help` light

        calib, source = calibration_for(ctx.vllm_version), ESTIMATOR_VERSION
        kernels = kernel_calibration(ctx, spec.name, tp, pp, nodes, calib)
        if kernels is not None:
            calib, source = kernels, ESTIMATOR_VERSION + KERNELS_SUFFIX
        kw = dict(tp=tp, pp=pp, input_tokens=cls.input_tokens, output_tokens=cls.output_tokens, ttft_ms=ctx.ttft_ms,
                  tpot_ms=ctx.tpot_ms, precision=ctx.precision, nodes=nodes)
        est = estimate(ctx.arch, spec, calib=calib, **kw)
        if not est.feasible:
            return RateResult(0.0, source, est.reason, est.min_tpot_ms, est.min_ttft_ms, est.batch)
        other = None
        if kernels is not None:  # the kernels against the built-in constants
            base = estimate(ctx.arch, spec, calib=calibration_for(ctx.vllm_version), **kw)
            other = (base.max_rps / est.max_rps, "the built-in estimator") if base.feasible else None
        elif calib.vllm_version in MEASURED_AS:  # an engine's assumed overlap against the measured engine's
            # (where the measured engine cannot meet the SLOs at all there is no figure to widen to: the
            # interval stays the regime's, docs/calibration.md)
            base = estimate(ctx.arch, spec, calib=CALIBRATIONS[MEASURED_AS[calib.vllm_version]], **kw)
            if base.feasible:
                other = (base.max_rps / est.max_rps, MEASURED_ENGINE_SOURCE)
        elif calib is CALIBRATION and pp == 1:  # the built-in constants against the layout's published runs
            from hetinfra.perf.e2e_checks import E2E_SOURCE, layout_factors

            f = layout_factors().get((ctx.arch.name, spec.name, tp, ctx.precision))
            if f is not None and f.covers(cls.input_tokens, cls.output_tokens):  # runs of this class's sizes
                other = (f.factor, E2E_SOURCE)
        return RateResult(est.max_rps, source, None, est.min_tpot_ms, est.min_ttft_ms, est.batch, other)


def _physical_bound(ctx: ModelContext, spec, tp: int, pp: int, cls: RequestClass) -> float:
    """The most req/s a measured row may claim (hetinfra.perf.roofline.profile_bound: each decode step
    reads the engine's weights once), inf where the model's architecture or the GPU is unknown. A row past
    it is planned at it (and said: plausible.implausible_profile_rows): rates of 1e8 req/s put coefficients
    of 1e-8 in the ILP's capacity rows, and HiGHS answered a plan that loaded an L4 unit 22x past its
    replicas (the solver's re-check refused it: exit 1)."""
    if ctx.arch is None or spec is None:
        return math.inf
    from hetinfra.perf.roofline import profile_bound

    return profile_bound(ctx.arch, spec, tp, pp, ctx.precision, cls.output_tokens)[0]


def kernel_calibration(ctx: ModelContext, gpu: str, tp: int, pp: int, nodes: int | None, calib):
    """The measured-kernel constants of this layout under planning.estimator aiconfigurator / auto
    (hetinfra.perf.aic_backend), or None: the built-in ones (builtin; a pipeline; a layout, model or
    GPU the kernel database lacks; auto without aiconfigurator installed)."""
    if ctx.estimator == "builtin" or ctx.arch is None or pp > 1 or nodes is not None:
        return None
    from hetinfra.perf import aic_backend

    if ctx.estimator == "aiconfigurator":
        aic_backend.require()
    return aic_backend.layout_calibration(ctx.arch.name, gpu, tp, ctx.precision, calib)


KERNELS_SUFFIX = "+aiconfigurator"


def step_calibration(sources: list[str], model: str, gpu: str, tp: int, pp: int, precision: str, calib):
    """The constants a plan's rates came from, for the simulator that verifies it (one hook: a rate
    whose source is ESTIMATOR_VERSION + KERNELS_SUFFIX was estimated on the layout's measured-kernel
    constants, hetinfra.perf.aic_backend, and its unit is simulated on the same step times). ``sources``:
    templates[].sources of the unit's classes; ``calib``: the plan's engine constants."""
    if pp > 1 or not any(s.endswith(KERNELS_SUFFIX) for s in sources):
        return calib
    from hetinfra.perf import aic_backend

    aic_backend.require()
    got = aic_backend.layout_calibration(model, gpu, tp, precision, calib)
    if got is None:
        raise InvalidInputError(f"the plan's {model} on {gpu} tp={tp} ({precision}) was estimated on aiconfigurator's "
                                "kernels, which do not cover that layout here",
                                hint="install aiconfigurator-core (pip install 'hetinfra[aiconfigurator]'), or re-plan with "
                                     "planning.estimator: builtin")
    return got


def model_arch(m: ModelSpec, where: str, base: Path | None = None) -> ModelArch:
    """The architecture of a spec model: its `architecture:` block or config.json file (relative to
    ``base``, the spec's folder), else the built-in catalog entry, else a Hugging Face repo's
    config.json (``hetinfra.catalog.hf``; ``where`` names the spec field in errors)."""
    if isinstance(m.architecture, str):
        from hetinfra.catalog.hf import arch_from_file

        from hetinfra.spec.files import spec_file  # the one resolver of a spec's file fields

        try:
            return arch_from_file(spec_file("architecture", m.architecture, base), m.name)
        except InvalidInputError as exc:  # the file's own error, after the spec line that names it
            raise InvalidInputError(f"{where}: {exc.message}", hint=exc.hint) from None
    if m.architecture is not None:
        a = m.architecture
        return ModelArch(name=m.name, layers=a.layers, hidden_size=a.hidden_size, heads=a.heads, kv_heads=a.kv_heads,
                         head_dim=a.head_dim, params=a.params, active_params=a.active_params,
                         vocab_size=a.vocab_size, max_context=a.max_context)
    return resolve_model_name(m.model or "", where)


def resolve_model_name(name: str, where: str) -> ModelArch:
    """A built-in catalog name (or alias), else a Hugging Face repo id read through the HF cache."""
    arch = get_model(name)
    if arch is not None:
        return arch
    from hetinfra.catalog.hf import MAX_REPO_PART, arch_from_hub, is_repo_id

    if is_repo_id(name):
        try:
            return arch_from_hub(name)
        except InvalidInputError as exc:
            raise InvalidInputError(f"{where}: {exc.message}", hint=exc.hint) from None
    if "/" in name:
        shown = repr(name) if len(name) <= 80 else f"{name[:60]!r}... ({len(name)} characters)"
        raise InvalidInputError(f"{where}: {shown} is not a Hugging Face repo id",
                                hint=f"write OWNER/NAME, each 1-{MAX_REPO_PART} letters, digits, '.', '_' or '-' "
                                     "(a letter or digit first), as the hub names repos")
    raise InvalidInputError(f"{where}: unknown model '{name}'; {did_you_mean(name, list(MODELS))}",
                            hint="give a Hugging Face repo id (org/name), `architecture: path/to/config.json`, or "
                                 "an `architecture:` block (layers, hidden_size, heads, kv_heads, head_dim, params)")
