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


_GPU_NAMES = st.sampled_from(sorted(GPUS)) | st.text(min_size=1, max_size=12)


@settings(max_examples=60, derandomize=True, deadline=None)
@given(gpu=_GPU_NAMES, custom=st.booleans(), stages=st.lists(_GPU_NAMES, max_size=3),
       roles=st.lists(st.none() | _GPU_NAMES, max_size=2))
def test_a_plan_gpu_is_refused_iff_outside_the_catalog_and_not_marked_custom(gpu, custom, stages, roles):
    """Property of catalog.custom.plan_gpu_problem, the one check the simulator runs on every GPU a
    plan.json allocation names: accepted iff every named GPU is a catalog GPU, except the unit's own
    GPU where the plan marks it custom_gpu (a mixed pipeline's stage GPUs and a bundle role's GPUs
    are catalog GPUs only, and a pipeline's ``gpu`` is its stages' joined name, not read); the
    refusal names the first field that fails."""
    from types import SimpleNamespace as Ns

    from hetinfra.catalog.custom import plan_gpu_problem

    alloc = Ns(gpu=gpu, custom_gpu=custom, stages=[Ns(gpu=g) for g in stages] or None,
               disaggregation=Ns(roles=[Ns(gpu=g) for g in roles]) if roles else None)
    named = [(f"stages[{k}].gpu", g, False) for k, g in enumerate(stages)] or [("gpu", gpu, custom)]
    named += [(f"disaggregation.roles[{j}].gpu", g, False) for j, g in enumerate(roles) if g is not None]
    bad = [field for field, g, marked in named if not marked and g not in GPUS]
    problem = plan_gpu_problem(alloc)
    assert (problem is None) == (not bad), (named, problem)
    assert problem is None or problem.startswith(bad[0] + " "), (bad, problem)
