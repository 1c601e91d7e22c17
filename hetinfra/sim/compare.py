"""Measured beats estimated: a plan's predicted capacity per unit and class against a measured
profile (``hetinfra profile`` / ``profile-import`` CSV), as a signed error."""

from __future__ import annotations

from pathlib import Path


def profile_comparison(plan, profile_csv: str | Path) -> list[dict]:
    """Per unit and class of ``plan`` (plan.json's dict or its model): the plan's predicted capacity
    per engine (templates[].capacity_rps / engines) against a measured profile row, and the signed
    error (predicted - measured) / measured (> 0: the plan over-promises)."""
    from hetinfra.document.simulation import SimPlan
    from hetinfra.perf.profiles import ProfileTable, load_profiles

    plan = SimPlan.of(plan)
    table = ProfileTable(load_profiles(Path(profile_csv)))
    templates = {t.id: t for t in plan.templates}
    models = {m.name: m for m in plan.models}
    rows = []
    for a in plan.allocations:
        t, m = templates.get(a.template), models.get(a.model)
        if t is None or m is None:
            continue
        names = tuple(dict.fromkeys(n.lower() for n in (m.name, m.model or "", m.source or "") if n))
        engines = max(a.engines_per_instance, 1)
        for c in m.classes:
            cap = t.capacity_rps.get(c.name)
            if cap is None:
                continue
            row = table.lookup(names, a.gpu, a.tp, a.pp, c.input_tokens, c.output_tokens, float(m.slo.ttft_ms),
                               float(m.slo.tpot_ms))
            pred = cap / engines
            rows.append({"unit": a.unit, "class": c.name, "predicted_rps": round(pred, 5),
                         "source": t.sources.get(c.name),
                         "measured_rps": None if row is None else row.max_rps,
                         "profile_row": None if row is None else row.origin,
                         "signed_error": None if row is None or row.max_rps <= 0
                         else round((pred - row.max_rps) / row.max_rps, 5)})
    return rows
