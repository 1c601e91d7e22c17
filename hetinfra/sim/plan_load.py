"""A plan and its spec as the simulator reads them: plan.json (or an out folder), the spec it names
(or ``--spec``), and each spec model's architecture resolved as planning resolves it.
``hetinfra.sim.plan_sim`` re-exports :func:`load_plan` and :func:`load_inputs`."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from hetinfra.document.simulation import SimPlan
from hetinfra.errors import InvalidInputError

__all__ = ["load_inputs", "load_plan", "resolve_models"]


def load_plan(path: str | Path) -> tuple[dict, Path]:
    """plan.json (or an out dir holding it): the dict and its path; wrong version -> InvalidInputError."""
    p = Path(path)
    if p.is_dir():
        p = p / "plan.json"
    from hetinfra.document import load_plan as load_document

    return load_document(p).to_dict(), p


def resolve_models(spec, base: Path | None = None) -> dict[str, SimpleNamespace]:
    """Each spec model with its architecture, resolved as planning resolves it (``base``: the spec's folder)."""
    from hetinfra.perf.model import model_arch

    return {m.name: SimpleNamespace(
        spec=m, arch=model_arch(m, f"models[{i}].model", base),
        variants={v.name: model_arch(m.variant_spec(v.name), f"models[{i}].variants[{j}]", base)
                  for j, v in enumerate(m.variants or ())})
        for i, m in enumerate(spec.models)}


def load_inputs(plan_path: str | Path, spec_path: str | Path | None = None) -> tuple[SimPlan, object, Path]:
    """A plan (out dir or plan.json) as a SimPlan, its spec (``inputs.spec_path`` unless given) and
    the spec's path."""
    from hetinfra.spec.load import load_spec

    doc, p = load_plan(plan_path)  # every check of plan.json (an unmarked GPU outside the catalog among them)
    plan = SimPlan.of(doc, str(p))
    sp = Path(spec_path) if spec_path else Path(plan.spec_path or "")
    if not spec_path and not sp.is_absolute() and not sp.exists():
        sp = p.parent / sp
    if not str(sp) or not sp.is_file():
        raise InvalidInputError(f"the plan's spec {sp} is not found", hint="pass it with --spec")
    spec, _, _ = load_spec(sp)
    return plan, spec, sp
