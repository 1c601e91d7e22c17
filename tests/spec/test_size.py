"""hetinfra.spec.size: a spec plans at most MAX_PLANNED_CLASSES (model, variant, class) triples. At
the maximum of each dimension (histogram buckets, explicit classes, models, variants, a dataset's
grid) the spec is accepted; one step past, it is refused at load (exit 2) naming the field, the
limit and the fix. The specs are tools/schema_maxima.py's, which times `plan` on them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from pydantic import ValidationError

from hetinfra.errors import InvalidInputError
from hetinfra.spec.load import parse_spec_text
from hetinfra.spec.models import ServiceSpec
from hetinfra.spec.size import MAX_PLANNED_CLASSES

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import schema_maxima as maxima  # noqa: E402


def _dataset_spec(rows: int, cols: int) -> dict:
    spec = maxima.classes_spec(1)
    spec["models"][0]["demand"]["sizes"] = {"dataset": {
        "path": "sizes.csv", "input_edges": list(range(0, 10 * rows + 1, 10)),
        "output_edges": list(range(0, 10 * cols + 1, 10))}}
    return spec


FAMILIES = {**maxima.FAMILIES, "dataset": (lambda: _dataset_spec(32, 32), lambda: _dataset_spec(33, 32))}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_spec_at_the_maximum_is_accepted_and_one_past_it_is_refused_naming_the_limit(family):
    """The schema's check on the data (PyYAML's pure-Python scanner would spend a second on a spec of
    1,000 classes); the loader's located message on the small families."""
    at_max, past = FAMILIES[family]
    ServiceSpec.model_validate(at_max())
    if past is None:
        return
    with pytest.raises(ValidationError) as info:
        ServiceSpec.model_validate(past())
    msg = str(info.value)
    assert f"more than the {MAX_PLANNED_CLASSES}" in msg and "coarsen demand.sizes" in msg, msg
    if family in ("histogram", "models", "dataset"):
        with pytest.raises(InvalidInputError) as located:
            parse_spec_text(yaml.safe_dump(past(), sort_keys=False), "s.yaml")
        assert str(located.value).startswith("s.yaml:") and len(str(located.value).splitlines()) <= 2


def test_empty_buckets_are_not_classes():
    """A 64 x 64 histogram with MAX_PLANNED_CLASSES non-empty buckets plans that many: accepted."""
    spec = maxima.histogram_spec(64, 64)
    weights = spec["models"][0]["demand"]["sizes"]["histogram"]["weights"]
    for i, row in enumerate(weights):
        for j in range(64):
            row[j] = row[j] if (i * 64 + j) % 4 == 0 else 0.0
    ServiceSpec.model_validate(spec)


def test_the_largest_histogram_plans(run_cli, tmp_path):
    """The maximum is one a plan can hold: 1,024 classes on one GPU type of one region plan (1.5 s of
    CPU; the three clouds' 300-odd templates take 39 s with verification, tools/schema_maxima.py)."""
    spec = maxima.histogram_spec()
    spec["infrastructure"] = {"clouds": ["aws"], "regions": ["us-east-1"], "gpus": ["L4"], "spot": False}
    path = tmp_path / "max.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    code, out, err = run_cli("plan", str(path), "--no-verify", "--no-baselines", "--no-template-cache", "--json")
    assert code == 0, err
    assert '"status": "optimal"' in out
