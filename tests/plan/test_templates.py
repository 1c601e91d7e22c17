"""Template generation: TP layouts, engines side by side, multi-node pipelines, pruning."""

from __future__ import annotations

import pytest
import yaml

from hetinfra.plan.templates import layer_partition, tp_options


@pytest.mark.parametrize("gpus,heads,expected", [(1, 32, [1]), (8, 32, [1, 2, 4, 8]), (4, 40, [1, 2, 4]),
                                                 (8, 40, [1, 2, 4, 8]), (8, 12, [1, 2, 4]), (2, None, [1, 2])])
def test_tp_options_divide_gpus_and_heads(gpus, heads, expected):
    assert tp_options(gpus, heads) == expected


@pytest.mark.parametrize("gpus,heads,kv_heads,expected", [
    (8, 40, 10, [1, 2]),        # phi-4: its 10 KV heads split 2 ways, not 4 or 8 (vLLM asserts at start-up)
    (8, 32, 8, [1, 2, 4, 8]),   # llama-3.1-8b: 8 KV heads, one per GPU at TP8
    (8, 32, 4, [1, 2, 4, 8]),   # qwen3-30b-a3b: 4 KV heads, each replicated on 2 GPUs at TP8
    (8, 64, 6, [1, 2]),         # 6 KV heads: TP4 and TP8 neither divide them nor are multiples of them
])
def test_tp_options_are_the_layouts_vllm_can_shard_the_kv_heads_over(gpus, heads, kv_heads, expected):
    """vLLM's attention layers assert tp | kv_heads where kv_heads >= tp, else kv_heads | tp: the
    planner offered phi-4 at TP4 and TP8, engines that stop at start-up."""
    assert tp_options(gpus, heads, kv_heads) == expected


def test_no_planned_unit_shards_a_models_kv_heads_in_a_way_vllm_refuses():
    """Every template of every catalog model on an 8-GPU node (the planner's TP layouts, bundles' too)
    keeps to the rule, and the estimator calls the others' layout infeasible, naming the KV heads."""
    from hetinfra.architecture import tp_problem
    from hetinfra.catalog.gpus import get_gpu
    from hetinfra.catalog.models import MODELS
    from hetinfra.perf.estimator import estimate

    for name, m in sorted(MODELS.items()):
        for tp in tp_options(8, m.heads, m.kv_heads):
            assert tp_problem(name, m.heads, m.kv_heads, tp) is None, (name, tp)
    e = estimate(MODELS["phi-4"], get_gpu("H100"), tp=4, input_tokens=500, output_tokens=100, ttft_ms=2000,
                 tpot_ms=100)
    assert not e.feasible and e.reason == "phi-4's 10 KV heads are not divisible by tp=4"


def test_layer_partition_matches_vllm_default():
    assert layer_partition(80, 2) == (40, 40)
    assert layer_partition(32, 3) == (10, 11, 11)
    assert sum(layer_partition(61, 4)) == 61


# GCP's largest L4 machine in the snapshot has 4 x 24 GB: a 70B bf16 model needs two of them.
PP_SPEC = {"name": "pp", "models": [{
    "name": "big", "model": "llama-3.1-70b", "source": "meta-llama/Llama-3.1-70B-Instruct",
    "slo": {"ttft_ms": 5000, "tpot_ms": 250},
    "demand": {"rate_rps": 0.5, "sizes": {"classes": [
        {"name": "a", "input_tokens": 500, "output_tokens": 200, "share": 1}]}}}],
    "infrastructure": {"clouds": ["gcp"], "gpus": ["L4"]}}


def test_model_too_big_for_one_node_gets_a_pipeline(tmp_path, plan_json):
    spec = PP_SPEC
    plan = plan_json(tmp_path, spec, "--no-baselines")
    (a,) = plan["allocations"]
    assert (a["instance_type"], a["tp"], a["pp"], a["nodes_per_replica"], a["count"]) == ("g2-standard-48", 4, 2, 2, 1)
    assert a["layer_partition"] == [40, 40] and a["instances"] == 2 and plan["gpus"] == 8
    assert a["cost_usd_per_hour"] == pytest.approx(2 * a["price_per_instance_usd_per_hour"], abs=1e-3)


def test_pipeline_task_has_num_nodes(tmp_path, run_cli):
    spec = PP_SPEC
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    code, _, err = run_cli("plan", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "out"), "--no-baselines", "--no-verify")
    assert code == 0, err
    (task,) = list((tmp_path / "out" / "skypilot").iterdir())
    doc = yaml.safe_load(task.read_text())
    assert doc["num_nodes"] == 2 and doc["envs"]["VLLM_PP_LAYER_PARTITION"] == "40,40"
    assert "--pipeline-parallel-size 2" in doc["run"] and "--distributed-executor-backend ray" in doc["run"]


def _unit(uid, gpu, gpus, cost, rate, region="r1", spot=False, model="m"):
    from hetinfra.plan.library import Template, TemplateUnit

    t = Template(f"{uid}-t", model, "lab", f"{gpu}-x{gpus}", gpu, gpus, 1, 1, gpus, {"c": rate}, {"c": "test"})
    return TemplateUnit(uid, t, region, spot, cost, 80, 8, 64, True)


def test_pruning_by_copies_and_caps():
    from hetinfra.plan.prune import prune_dominated

    x1 = _unit("x1", "L4", 1, 1.0, 10)
    x4 = _unit("x4", "L4", 4, 4.4, 40)  # four x1 do the same for $4
    x4_cheap = _unit("x4c", "L4", 4, 3.6, 40)  # cheaper per GPU: kept
    far = _unit("far", "L4", 1, 1.2, 10, region="r2")  # same GPU, dearer region
    assert [u.id for u in prune_dominated([x1, x4, x4_cheap, far])] == ["x1", "x4c"]
    # a capped r1 group cannot stand in for r2 (and vice versa): both regions stay
    assert [u.id for u in prune_dominated([x1, far], capped={("lab", "r1", "L4")})] == ["far", "x1"]
    # with locality, regions are never merged
    assert [u.id for u in prune_dominated([x1, far], regional=True)] == ["far", "x1"]
    # running units stay even when dominated
    assert [u.id for u in prune_dominated([x1, x4], keep={"x4"})] == ["x1", "x4"]
    # spot never stands in for on-demand
    spot = _unit("s1", "L4", 1, 0.3, 10, spot=True)
    assert [u.id for u in prune_dominated([x1, spot])] == ["s1", "x1"]


def test_pruning_breaks_exact_ties_deterministically():
    from hetinfra.plan.prune import prune_dominated

    a, b = _unit("a", "L4", 1, 1.0, 10, "r1"), _unit("b", "L4", 1, 1.0, 10, "r2")
    assert [u.id for u in prune_dominated([b, a])] == ["a"]
