"""Units of a model's variants launch the variant's checkpoint and precision flags under the model's
one served name, and their disks hold that checkpoint."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from hetinfra.compile.artifacts import sky_units
from hetinfra.compile.checkpoint import served_checkpoint
from hetinfra.compile.disk import disk_need_gb
from hetinfra.compile.skypilot import render_all
from hetinfra.document import Allocation, Plan
from hetinfra.document.sections import ModelEntry
from hetinfra.errors import InvalidInputError
from tests.plan.golden_plans import filled_golden, routed_to_allocations

REPO = Path(__file__).resolve().parents[2]

VARIANTS = [
    {"name": "bf16", "model": "llama-3.1-8b", "source": "meta-llama/Llama-3.1-8B-Instruct", "precision": "bf16",
     "params": 8.03e9, "accuracy": 100.0, "accuracy_from": "builtin", "meets_floor": True},
    {"name": "fp8", "model": "llama-3.1-8b", "source": "meta-llama/Llama-3.1-8B-Instruct", "precision": "fp8",
     "params": 8.03e9, "accuracy": 99.5, "accuracy_from": "spec", "meets_floor": True},
    {"name": "int4", "model": "llama-3.1-8b", "source": "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16",
     "precision": "int4", "params": 8.03e9, "accuracy": 98.9, "accuracy_from": "builtin", "meets_floor": True},
]


def _alloc(variant: str | None) -> dict:
    unit = "chat-8b-aws-us-east-1-g6e-xlarge" + (f"-{variant}" if variant else "")
    return dict(filled_golden("variants")["allocations"][0], **{
        "unit": f"chat-8b|aws|g6e.xlarge|tp1x1|{variant}|us-east-1|ondemand", "model": "chat-8b",
        "variant": variant, "cloud": "aws", "region": "us-east-1", "instance_type": "g6e.xlarge", "gpu": "L40S",
        "gpus_per_instance": 1, "tp": 1, "pp": 1, "engines_per_instance": 1, "nodes_per_replica": 1,
        "count": 1, "instances": 1, "spot": False, "deployment_unit": unit, "skypilot_task": f"skypilot/{unit}.yaml",
        "layer_partition": None, "custom_cloud": False,
        "cost_usd_per_hour": filled_golden("variants")["allocations"][0]["price_per_instance_usd_per_hour"]})


def _plan(*variants: str | None) -> dict:
    """A plan.json (the golden variants plan's other keys) with one unit per variant."""
    base = filled_golden("variants")
    model = dict(base["models"][0], **{
        "name": "chat-8b", "model": "llama-3.1-8b", "source": "meta-llama/Llama-3.1-8B-Instruct",
        "precision": "bf16", "params": 8.03e9, "max_model_len": 4096, "variants": copy.deepcopy(VARIANTS)})
    return routed_to_allocations(dict(base, service="v", models=[model], allocations=[_alloc(v) for v in variants]))


def test_each_variant_unit_runs_its_checkpoint_and_flags():
    plan = _plan("bf16", "fp8", "int4")
    units = {u.name.rsplit("-", 1)[1]: u for u in sky_units(Plan.parse(plan))}
    assert {k: (u.source, u.precision, u.service_model) for k, u in units.items()} == {
        "bf16": ("meta-llama/Llama-3.1-8B-Instruct", "bf16", "chat-8b"),
        "fp8": ("meta-llama/Llama-3.1-8B-Instruct", "fp8", "chat-8b"),
        "int4": ("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16", "int4", "chat-8b")}
    tasks = {name.rsplit("-", 1)[1].removesuffix(".yaml"): yaml.safe_load(text)
             for name, text in render_all(list(units.values())).items()}
    assert tasks["bf16"]["envs"]["MODEL_ID"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert "--dtype bfloat16" in tasks["bf16"]["run"]
    # fp8 of a 16-bit checkpoint: vLLM's online FP8 quantization
    assert "--quantization fp8" in tasks["fp8"]["run"] and "--dtype" not in tasks["fp8"]["run"]
    assert tasks["int4"]["envs"]["MODEL_ID"] == "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16"
    assert "--quantization" not in tasks["int4"]["run"] and "--dtype" not in tasks["int4"]["run"]
    for t in tasks.values():  # one endpoint: every variant answers to the served name
        assert "--served-model-name chat-8b " in t["run"]


def test_disks_hold_the_variants_checkpoint():
    plan = Plan.parse(_plan("bf16", "int4"), "plan.json")
    bf16, int4 = (disk_need_gb(plan, a) for a in plan.allocations)
    assert "weights 16 GB" in bf16[1] and "weights 4 GB" in int4[1] and int4[0] < bf16[0]


def test_a_variant_the_model_does_not_list_is_refused():
    plan = _plan("fp4")
    with pytest.raises(InvalidInputError, match=r"allocations\[0\]\.variant 'fp4' is not among model chat-8b's"):
        Plan.parse(plan)  # the plan's invariant
    model = ModelEntry.model_validate(plan["models"][0])
    with pytest.raises(InvalidInputError, match="names variant 'fp4'"):  # an entry and allocation taken apart
        served_checkpoint(model, Allocation.model_validate(plan["allocations"][0]))
    assert served_checkpoint(model, Allocation.model_validate(_alloc(None))) is model


def test_the_example_plans_tasks_load_the_variants_checkpoints(tmp_path, run_cli):
    out = tmp_path / "out"
    code, _, err = run_cli("plan", str(REPO / "services" / "variants.yaml"), "--out", str(out), "--no-verify",
                           "--no-baselines")
    assert code == 0, err
    plan = json.loads((out / "plan.json").read_text())
    source = {v["name"]: v["source"] for v in plan["models"][0]["variants"]}
    assert plan["allocations"] and all(a["variant"] in ("bf16", "fp8") for a in plan["allocations"])  # floor 99.5
    for a in plan["allocations"]:
        assert a["deployment_unit"].endswith(f"-{a['variant']}")
        task = yaml.safe_load((out / a["skypilot_task"]).read_text())
        assert task["envs"]["MODEL_ID"] == source[a["variant"]]
    from hetinfra.deploy.preflight import validate_plan

    validate_plan(Plan.parse(plan), out / "plan.json", catalog=lambda: {
        (a["cloud"], a["instance_type"]): {(a["gpu"], a["gpus_per_instance"], a["region"])} for a in plan["allocations"]})
