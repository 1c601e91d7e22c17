"""A custom GPU may not shadow a catalog GPU (its facts would never be read), and one that no offer
has is an error at its spec line, not silently unused (issue 36)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from hetinfra.catalog.gpus import GPUS
from hetinfra.errors import InvalidInputError
from hetinfra.plan.inputs import resolve
from hetinfra.spec.load import load_spec

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "services" / "custom-gpu"


def _spec(tmp_path: Path, name: str) -> Path:
    doc = yaml.safe_load((EXAMPLE / "service.yaml").read_text())
    doc["infrastructure"]["custom_gpus"][0]["name"] = name
    for f in ("offers.csv", "profiles.csv"):
        (tmp_path / f).write_text((EXAMPLE / f).read_text())
    path = tmp_path / "service.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@settings(max_examples=25, derandomize=True, deadline=None)
@given(st.sampled_from(sorted(GPUS)), st.sampled_from([str.upper, str.lower, str]))
def test_property_no_catalog_gpu_in_any_case_is_a_custom_gpu(tmp_path_factory, gpu, case):
    path = _spec(tmp_path_factory.mktemp("c"), case(gpu))
    spec, text, locate = load_spec(path)
    with pytest.raises(InvalidInputError, match=r"service.yaml:\d+:\d+: infrastructure.custom_gpus\[0\]: custom GPU "
                                                r".* is the catalog's GPU"):
        resolve(spec, path, text, None, locate)


def test_a_custom_gpu_nothing_offers_is_an_error_at_its_line(tmp_path, run_cli):
    code, _, err = run_cli("plan", str(_spec(tmp_path, "T9")), "--no-verify", "--no-baselines")
    assert code == 2 and "infrastructure.custom_gpus[0]: no offer has the GPU 'T9'; did you mean 'T1'?" in err
    assert "service.yaml:" in err
    code, _, err = run_cli("plan", str(_spec(tmp_path, "T1")), "--no-verify", "--no-baselines")
    assert code == 0, err
