"""A plan and its spec as the simulator reads them: plan.json (or an out folder), the spec it names
(or ``--spec``), and each spec model's architecture resolved as planning resolves it.
``hetinfra.sim.plan_sim`` re-exports :func:`load_plan` and :func:`load_inputs`."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from hetinfra.document.simulation import SimPlan
from hetinfra.errors import InvalidInputError
from hetinfra.facts import MAX_SIMULATED_ENGINES

__all__ = ["load_inputs", "load_plan", "plan_file", "resolve_models"]


def load_plan(path: str | Path) -> tuple[dict, Path]:
    """plan.json (or an out dir holding it): the dict and its path; wrong version -> InvalidInputError."""
    from hetinfra.document import load_plan as load_document

    p = plan_file(path)
    return load_document(p).to_dict(), p


def plan_file(path: str | Path) -> Path:
    """plan.json itself, or the one in the out folder ``path``."""
    p = Path(path)
    return p / "plan.json" if p.is_dir() else p


def resolve_models(spec, base: Path | None = None) -> dict[str, SimpleNamespace]:
    """Each spec model with its architecture, resolved as planning resolves it (``base``: the spec's folder)."""
    from hetinfra.perf.model import model_arch

    return {m.name: SimpleNamespace(
        spec=m, arch=model_arch(m, f"models[{i}].model", base),
        variants={v.name: model_arch(m.variant_spec(v.name), f"models[{i}].variants[{j}]", base)
                  for j, v in enumerate(m.variants or ())})
        for i, m in enumerate(spec.models)}


def load_inputs(plan_path: str | Path, spec_path: str | Path | None = None,
                period: int | None = None) -> tuple[SimPlan, object, Path]:
    """A plan (out dir or plan.json) as a SimPlan, its spec (``inputs.spec_path`` unless given) and
    the spec's path; with ``period``, the fleet of that profile period at its demand
    (hetinfra.sim.period)."""
    return read_inputs(plan_path, spec_path, period)[:3]


def read_inputs(plan_path: str | Path, spec_path: str | Path | None = None,
                period: int | None = None) -> tuple[SimPlan, object, Path, object, str]:
    """:func:`load_inputs`' three, then the plan.json document they came from (hetinfra.document) and
    the spec file's text (what hetinfra.sim.spec_drift compares with the plan's, each read once)."""
    from hetinfra.spec.load import load_spec

    from hetinfra.document import load_plan as load_document
    from hetinfra.sim.period import period_view

    p = plan_file(plan_path)
    document = load_document(p)  # every check of plan.json (an unmarked GPU outside the catalog among them)
    engines = sum(a.engine_count for a in document.allocations)
    if engines > MAX_SIMULATED_ENGINES:
        raise InvalidInputError(f"{p}: the plan runs {engines:,} vLLM engines, more than the simulator holds "
                                f"({MAX_SIMULATED_ENGINES:,})", hint="split the service into several specs and "
                                "simulate each plan")
    plan = SimPlan.of(document.to_dict() if period is None else period_view(document, period, str(p)), str(p))
    if spec_path:
        sp = Path(spec_path)
        if not sp.is_file():
            raise InvalidInputError(f"--spec {sp}: no such file", hint="pass the service YAML the plan was made from")
    else:
        sp = _plan_spec(p, document.inputs.spec_path, document.inputs.spec_sha256)
    spec, text, _ = load_spec(sp)
    return plan, spec, sp, document, text


def _plan_spec(plan_file: Path, stored: str, sha256: str) -> Path:
    """The spec plan.json names (``inputs.spec_path``, found as hetinfra.document.spec_location says)."""
    from hetinfra.document.spec_location import spec_file

    found, looked = spec_file(plan_file, stored, sha256)
    if found is None:
        places = looked[0].parent if len(looked) == 1 else f"{len(looked)} places: {looked[0]}, ..., {looked[-1]}"
        raise InvalidInputError(f"{plan_file}: the plan's spec {stored!r} (inputs.spec_path) is not found "
                                f"(looked in {places})", hint="pass the spec the plan was made from with --spec")
    return found
