"""Plan a held-out spec kept with its audit (benchmarks/results/heldout64*/NAME.yaml), verified, without
baselines: the regression tests of the cases the held-out audits found."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def planned_held_out(name: str, tmp_path: Path, folder: str = "heldout64") -> dict:
    """plan.json's dict of held-out ``name`` (in benchmarks/results/``folder``), planned from a copy in
    ``tmp_path``."""
    import yaml

    from hetinfra.plan.pipeline import plan_document

    spec = yaml.safe_load((REPO / "benchmarks" / "results" / folder / f"{name}.yaml").read_text())
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return plan_document(path, with_baselines=False)[1].to_dict()
