"""The LiteLLM config lists each LoRA adapter as a model deployed only on the units holding it."""

from __future__ import annotations

import yaml

from hetinfra.compile.router import litellm_config

WEIGHTS = {"models": {"chat": {"endpoints": {"u1": {"share": 0.6}, "u2": {"share": 0.4}}}}}


def test_adapters_are_models_of_their_holders_only():
    doc = yaml.safe_load(litellm_config(WEIGHTS, {"u1": ["http://10.0.0.1:8000/v1"]},
                                        adapters={"sql": ("chat", ["u2"]), "law": ("chat", ["u1", "u2"])}))
    by_name: dict[str, set] = {}
    for entry in doc["model_list"]:
        by_name.setdefault(entry["model_name"], set()).add(entry["model_info"]["hetinfra_unit"])
    assert by_name == {"chat": {"u1", "u2"}, "sql": {"u2"}, "law": {"u1", "u2"}}
    sql = next(e for e in doc["model_list"] if e["model_name"] == "sql")
    assert sql["litellm_params"]["model"] == "hosted_vllm/sql" and sql["litellm_params"]["weight"] == 400


def test_without_adapters_the_config_is_as_before():
    assert litellm_config(WEIGHTS) == litellm_config(WEIGHTS, adapters={})
