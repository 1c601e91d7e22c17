"""Served model names are free-form (vLLM --served-model-name); resources use DNS-safe slugs (issue 17)."""

from __future__ import annotations

import re

import pytest
import yaml

from hetinfra.plan.naming import model_slugs

DNS = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def _model(name: str) -> dict:
    return {"name": name, "model": "llama-3.1-8b", "source": "meta-llama/Llama-3.1-8B-Instruct",
            "slo": {"ttft_ms": 2000, "tpot_ms": 100},
            "demand": {"rate_rps": 2, "sizes": {"classes": [{"name": "a", "input_tokens": 500, "output_tokens": 200,
                                                             "share": 1}]}}}


def _spec(*names: str) -> dict:
    return {"name": "names", "models": [_model(n) for n in names],
            "infrastructure": {"clouds": ["aws"], "regions": ["us-east-1"], "gpus": ["L4"]}}


@pytest.mark.parametrize("name", ["llama-3.1-8b", "qwen2.5-72b", "Qwen/Qwen2.5-72B-Instruct", "chat_8b:v2", "7b"])
def test_served_names_are_free_form(name):
    from hetinfra.spec.models import ServiceSpec

    assert ServiceSpec.model_validate(_spec(name)).models[0].name == name


@pytest.mark.parametrize("name, message", [("my model", "whitespace"), ("a$b", "'$'"), ("it's", "quotes"),
                                           ("", "1-128"), ("x" * 129, "1-128"), ("...", "letter or digit")])
def test_served_names_that_would_break_the_artifacts_are_rejected(name, message, tmp_path, run_cli):
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(_spec(name)))
    code, _, err = run_cli("plan", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "out"))
    assert code == 2 and message in err


def test_slugs():
    s = model_slugs(["llama-3.1-8b", "qwen2.5-72b", "chat-8b", "7b"])
    # a name that is already a DNS label keeps it (plans from before keep their resource names)
    assert s["chat-8b"] == "chat-8b" and s["7b"] == "7b"
    assert s["llama-3.1-8b"] == "llama-3-1-8b" and s["qwen2.5-72b"] == "qwen2-5-72b"
    # two names that slug alike stay distinct: the literal slug keeps it, the other gets a hash
    t = model_slugs(["llama-3.1-8b", "llama-3-1-8b", "Llama-3.1-8B"])
    assert t["llama-3-1-8b"] == "llama-3-1-8b"
    assert re.fullmatch(r"llama-3-1-8b-[0-9a-f]{6}", t["llama-3.1-8b"])
    assert re.fullmatch(r"llama-3-1-8b-[0-9a-f]{6}", t["Llama-3.1-8B"])
    assert len(set(t.values())) == 3
    # stable: a slug depends on its name (and its collisions), not on order or unrelated models
    assert model_slugs(["Llama-3.1-8B", "zzz", "llama-3-1-8b", "llama-3.1-8b"])["llama-3.1-8b"] == t["llama-3.1-8b"]
    long = model_slugs(["Qwen/Qwen2.5-72B-Instruct-AWQ-with-a-very-long-suffix-name"])
    (v,) = long.values()
    assert len(v) <= 40 and DNS.match(v) and re.search(r"-[0-9a-f]{6}$", v)


def test_plan_slugs_resources_and_keeps_the_served_name(tmp_path, run_cli):
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(_spec("llama-3.1-8b", "llama-3-1-8b")))
    code, _, err = run_cli("plan", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "out"), "--no-verify",
                           "--no-baselines")
    assert code == 0, err
    import json

    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    slugs = {m["name"]: m["slug"] for m in plan["models"]}
    assert slugs["llama-3-1-8b"] == "llama-3-1-8b" and slugs["llama-3.1-8b"].startswith("llama-3-1-8b-")
    units = {a["model"]: a["deployment_unit"] for a in plan["allocations"]}
    assert units["llama-3.1-8b"].startswith(slugs["llama-3.1-8b"] + "-aws-us-east-1-")
    assert units["llama-3-1-8b"] == "llama-3-1-8b-aws-us-east-1-g6-xlarge"
    assert len(set(units.values())) == 2 and all(DNS.match(u) for u in units.values())
    for model, unit in units.items():
        task = yaml.safe_load((tmp_path / "out" / "skypilot" / f"{unit}.yaml").read_text())
        assert task["name"] == unit
        assert f"--served-model-name {model} " in task["run"]  # the client-facing name is unchanged
    assert set(plan["routing"]) == {"llama-3.1-8b", "llama-3-1-8b"}
