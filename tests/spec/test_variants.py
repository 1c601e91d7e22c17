"""Spec validation of `variants:` and `slo.min_accuracy`: bad input exits 2 with a located message."""

from __future__ import annotations

import copy

import pytest
import yaml

from hetinfra.spec.models import ServiceSpec

MODEL = {
    "name": "chat", "model": "llama-3.1-8b", "source": "meta-llama/Llama-3.1-8B-Instruct",
    "slo": {"ttft_ms": 2000, "tpot_ms": 100, "min_accuracy": 99.5},
    "variants": [{"name": "bf16"},
                 {"name": "fp8", "precision": "fp8", "source": "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic"}],
    "demand": {"rate_rps": 2, "sizes": {"classes": [{"name": "a", "input_tokens": 500, "output_tokens": 200,
                                                     "share": 1}]}},
}


def _spec(**changes) -> dict:
    m = copy.deepcopy(MODEL)
    for key, value in changes.items():
        if value is None:
            m.pop(key, None)
        else:
            m[key] = value
    return {"name": "v", "models": [m], "infrastructure": {"clouds": ["aws"], "regions": ["us-east-1"], "gpus": ["L4"]}}


def test_a_spec_without_variants_keeps_its_meaning():
    spec = ServiceSpec.model_validate(_spec(variants=None, slo={"ttft_ms": 2000, "tpot_ms": 100}))
    m = spec.models[0]
    assert m.variants is None and m.slo.min_accuracy is None and m.precision == "bf16"


def test_variant_spec_fills_in_the_models_fields():
    m = ServiceSpec.model_validate(_spec()).models[0]
    bf16, fp8 = m.variant_spec("bf16"), m.variant_spec("fp8")
    assert (bf16.source, bf16.precision, bf16.model) == ("meta-llama/Llama-3.1-8B-Instruct", "bf16", "llama-3.1-8b")
    assert (fp8.source, fp8.precision) == ("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic", "fp8")
    assert fp8.variants is None and fp8.slo.min_accuracy is None and fp8.name == "chat"


BAD = [
    ("floor without variants", dict(variants=None), "slo.min_accuracy needs `variants`"),
    ("repeated names", dict(variants=[{"name": "a"}, {"name": "a", "precision": "fp8"}]), "repeated: a"),
    ("name not a slug", dict(variants=[{"name": "FP8", "precision": "fp8"}]), "lowercase letters, digits"),
    ("unknown precision", dict(variants=[{"name": "fp4", "precision": "fp4"}]), "precision"),
    ("typo in a key", dict(variants=[{"name": "a", "acuracy": 1}]), "did you mean 'accuracy'"),
    ("model and architecture", dict(variants=[{"name": "a", "model": "llama-3.1-8b", "architecture": "c.json"}]),
     "at most one of `model` and `architecture`"),
    ("same checkpoint twice", dict(variants=[{"name": "a"}, {"name": "b", "precision": "bf16"}]),
     "variants a and b serve the same checkpoint"),
    ("unknown variant model", dict(variants=[{"name": "a", "model": "llama-9"}]), "variants[0].model: unknown model"),
    ("accuracy on some variants only", dict(variants=[{"name": "a", "accuracy": 0.8}, {"name": "b", "precision": "fp8"}]),
     "give `accuracy` for every variant of the model or for none"),
    ("no score known", dict(variants=[{"name": "a", "precision": "int4", "source": "me/my-own-awq"}]),
     "no accuracy score for me/my-own-awq: give `accuracy:`"),
]


@pytest.mark.parametrize("case, changes, message", BAD, ids=[c[0] for c in BAD])
def test_bad_variants_exit_2(case, changes, message, tmp_path, run_cli):
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(_spec(**changes), sort_keys=False))
    code, _, err = run_cli("plan", str(tmp_path / "s.yaml"), "--no-verify", "--no-baselines")
    assert code == 2, err
    assert message in err and "Traceback" not in err
    assert "s.yaml:" in err  # located in the file
