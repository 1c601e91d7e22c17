"""Whether the spec ``simulate`` reads is the one the plan was made from, and if not, what differs.

The simulator takes each model's objectives (``slo``) and demand (``rate_rps``, ``classes``) and the
service name from plan.json, and only each model's architecture (and adapters, sizes' sources) from
the spec: a spec edited after planning (a tighter TPOT, three times the rate) changed nothing in the
simulation, and ``simulate --check`` passed against objectives the user no longer had. So the spec's
sha256 is compared with plan.json ``inputs.spec_sha256``; where they differ, the record below says
so, and names the objectives, demand and name that differ from the plan's (a best-effort reading:
other edits, e.g. the GPUs allowed or a comment, change the hash alone).
"""

from __future__ import annotations

import math
from pathlib import Path

__all__ = ["spec_drift", "drift_words"]


def spec_drift(document, spec, spec_path: Path, text: str) -> dict | None:
    """None where ``text``, the spec file's, hashes to plan.json ``inputs.spec_sha256`` (``document``:
    the plan read by hetinfra.document); else simulation.json's ``spec_changed``: {spec_file,
    spec_file_sha256, plan_spec_sha256,
    differs (a list of "objectives of M: tpot_ms 120 -> 70", "demand of M: ...", "name: ...",
    "models: ..."; empty where none of these differ)}."""
    from hetinfra.fileio import sha256_text

    planned = document.inputs.spec_sha256
    sha = sha256_text(text)
    if sha == planned:
        return None
    return {"spec_file": str(spec_path), "spec_file_sha256": sha, "plan_spec_sha256": planned,
            "differs": _differences(document, spec, spec_path)}


def drift_words(drift: dict) -> str:
    """The warning's words: which spec, what differs, and what the simulation checks instead."""
    what = ("it differs in: " + "; ".join(drift["differs"]) if drift["differs"] else
            "no difference found in its name or its models' slo and demand: other content changed")
    return (f"the spec {drift['spec_file']} is not the one the plan was made from (its sha256 "
            f"{drift['spec_file_sha256'][:12]} is not plan.json inputs.spec_sha256 {drift['plan_spec_sha256'][:12]}); "
            f"{what}. The simulation checks the plan's promise: plan.json's own objectives and "
            "demand, not the spec's. Re-plan the spec to check its objectives")


def _differences(document, spec, spec_path: Path) -> list[str]:
    out = []
    if spec.name != document.service:
        out.append(f"name: {document.service!r} -> {spec.name!r}")
    planned = {m.name: m for m in document.models}
    mine = {m.name: m for m in spec.models}
    gone, new = sorted(set(planned) - set(mine)), sorted(set(mine) - set(planned))
    if gone or new:
        out.append("models: " + ", ".join([f"{n} removed" for n in gone] + [f"{n} added" for n in new]))
    for name in (n for n in planned if n in mine):
        out += _model_differences(planned[name], mine[name], spec, spec_path)
    return out


def _model_differences(pm, m, spec, spec_path: Path) -> list[str]:
    """The objectives and demand of spec model ``m`` against plan.json's entry ``pm`` for it, as
    hetinfra.plan.models_json writes them (rates at the profile's peak, adapters' own rates added)."""
    from hetinfra.spec.demand import request_classes

    out = []
    keys = ("ttft_ms", "tpot_ms", "percentile", "attainment")
    moved = [f"{k} {_g(getattr(pm.slo, k))} -> {_g(getattr(m.slo, k))}" for k in keys
             if not _same(getattr(pm.slo, k), getattr(m.slo, k))]
    if moved:
        out.append(f"objectives of {m.name}: " + ", ".join(moved))
    adapters = [a for a in getattr(spec, "adapters", None) or [] if a.base == m.name]
    # as models_json writes it: rate_rps adapters add to the base's rate (plan.adapters.split_classes), all
    # at the profile's peak
    rate = (m.demand.rate_rps + sum(a.demand.rate_rps or 0.0 for a in adapters)) * m.demand.peak
    demand = [] if _same(pm.rate_rps, rate) else [f"rate_rps {_g(pm.rate_rps)} -> {_g(rate)}"]
    if not adapters:  # an adapter splits the classes (hetinfra.plan.adapters.split_classes): rate only
        sizes = [(c.name, c.input_tokens, c.output_tokens, c.share) for c in request_classes(m, spec_path.parent)]
        had = [(c.name, c.input_tokens, c.output_tokens, c.share) for c in pm.classes or []]
        if len(sizes) != len(had) or any(a[:3] != b[:3] or not _same(a[3], b[3], 1e-5) for a, b in zip(sizes, had)):
            demand.append("request sizes (classes)")
    if demand:
        out.append(f"demand of {m.name}: " + ", ".join(demand))
    return out


def _same(a, b, tol: float = 1e-6) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=tol, abs_tol=tol)
    return a == b


def _g(v) -> str:
    return format(v, "g") if isinstance(v, (int, float)) else str(v)
