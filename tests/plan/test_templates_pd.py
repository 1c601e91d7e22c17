"""xPyD bundles as templates (hetinfra.plan.templates_pd, issue 37): offered only where the KV
transfer fits TTFT, across nodes only over RDMA, chosen only where cheaper; the acceptance plans."""

from __future__ import annotations

import pytest
import yaml

from hetinfra.catalog.gpus import get_gpu
from hetinfra.catalog.models import get_model
from hetinfra.document import Plan
from hetinfra.perf.disagg import decode_rate, prefill_rate
from hetinfra.plan import templates_pd
from hetinfra.plan.planner import prepare
from hetinfra.plan.templates_pd import PD_MARGIN, FIRST_STEP_WAIT
from hetinfra.spec.load import parse_spec_text
from tests.conftest import write_offers


def _spec(input_tokens=4000, output_tokens=500, ttft_ms=300, disaggregation="auto", rate=40.0, offers=None,
          verify=None) -> dict:
    spec = {
        "name": "pd",
        "models": [{"name": "qwen32", "model": "qwen3-32b", "source": "Qwen/Qwen3-32B-FP8", "precision": "fp8",
                    "slo": {"ttft_ms": ttft_ms, "tpot_ms": 10},
                    "demand": {"rate_rps": rate, "sizes": {"classes": [
                        {"name": "c", "input_tokens": input_tokens, "output_tokens": output_tokens, "share": 1}]}}}],
        "infrastructure": {"clouds": ["aws"], "regions": ["us-east-1"], "gpus": ["H200"], "spot": False},
        "planning": {"disaggregation": disaggregation, **({"verify": verify} if verify else {})},
    }
    if offers:
        spec["infrastructure"] = {"clouds": ["lab"], "spot": False}
        spec["offers"] = [offers]
    return spec


def _bundles(tmp_path, spec):
    path = tmp_path / "service.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    staged = prepare(path, template_cache=False)
    return [u.template for u in staged.units if u.template.bundle is not None]


def test_a_bundle_rate_is_its_slower_phase_less_the_margin_and_its_transfer_fits(tmp_path):
    bundles = {t.id: t for t in _bundles(tmp_path, _spec())}
    assert bundles
    qwen, h200 = get_model("qwen3-32b"), get_gpu("H200")
    for t in bundles.values():
        b = t.bundle
        assert b.prefill_engines * b.prefill_tp + b.decode_engines * b.decode_tp == t.gpus  # every GPU has a role
        dec = decode_rate(qwen, h200, tp=b.decode_tp, input_tokens=4000, output_tokens=500, tpot_ms=10, precision="fp8")
        budget = 300 - b.transfer_ms["c"] - FIRST_STEP_WAIT * dec.latency_ms
        assert b.transfer_ms["c"] < budget  # prefill + queue + transfer + first step <= TTFT
        pre = prefill_rate(qwen, h200, tp=b.prefill_tp, input_tokens=4000, budget_ms=budget, precision="fp8")
        want = min(b.prefill_engines * pre.rps, b.decode_engines * dec.rps)
        assert t.rates["c"] <= want * (1 - PD_MARGIN) * (1 + 1e-9)
    one_node = bundles["qwen32|aws|p5en.48xlarge|pd2xtp2+1xtp4"]
    assert one_node.bundle.link == "nvlink" and one_node.nodes == 1
    assert one_node.rates["c"] == pytest.approx(min(2 * prefill_rate(
        qwen, h200, tp=2, input_tokens=4000, precision="fp8",
        budget_ms=300 - one_node.bundle.transfer_ms["c"] - FIRST_STEP_WAIT * 10.0).rps,
        decode_rate(qwen, h200, tp=4, input_tokens=4000, output_tokens=500, tpot_ms=10, precision="fp8").rps)
        * (1 - PD_MARGIN), rel=1e-3)


def test_no_bundle_where_prefill_and_transfer_cannot_fit_ttft(tmp_path):
    spec = _spec(ttft_ms=60)
    spec["planning"]["allow_unmet"] = True
    assert not _bundles(tmp_path, spec)  # 4000 tokens do not prefill in 60 ms on any TP


def test_the_deploy_target_gates_bundles_across_nodes():
    """AWS by the Pulumi stack (deploy.target vms, not a SkyPilot cloud) or by EKS runs them; SkyPilot,
    GCP and Azure (whose stacks, GKE and AKS refuse them) and custom clouds do not, each with its reason."""
    for deploy, cloud, custom, offered, says in (
            ({}, "aws", False, True, ""), ({"skypilot_clouds": ["aws"]}, "aws", False, False, "SkyPilot"),
            ({"skypilot_clouds": ["aws"]}, "gcp", False, False, "only AWS"), ({}, "azure", False, False, "only AWS"),
            ({"target": "kubernetes"}, "gcp", False, False, "only AWS"),
            ({"skypilot_clouds": ["aws"], "target": "kubernetes"}, "aws", False, True, ""),
            ({}, "lab", True, False, "custom cloud")):
        spec = parse_spec_text(yaml.safe_dump(dict(_spec(), deploy=deploy)))
        why = templates_pd.across_nodes_gate(spec, cloud, custom)
        assert (why is None) == offered, (deploy, cloud, why)
        assert offered or says in why


def test_kubernetes_bundles_have_one_prefill_node(tmp_path):
    """A bundle replica on Kubernetes is one LeaderWorkerSet group: the leader runs the prefill engines,
    the one worker template the decode nodes, so no bundle with two prefill nodes is offered there."""
    spec = dict(_spec(), deploy={"target": "kubernetes"})
    spec["planning"]["max_nodes_per_template"] = 4
    across = [t for t in _bundles(tmp_path, spec) if t.bundle.across_nodes]
    assert across and all(t.bundle.prefill_nodes == 1 for t in across)
    spec["deploy"] = {}
    assert any(t.bundle.prefill_nodes > 1 for t in _bundles(tmp_path, spec) if t.bundle.across_nodes)


def test_skypilot_clouds_get_one_node_bundles_and_the_reason_says_why(tmp_path, plan_json):
    spec = dict(_spec(), deploy={"skypilot_clouds": ["aws"]})
    assert all(t.nodes == 1 and not t.bundle.across_nodes for t in _bundles(tmp_path, spec))
    plan = plan_json(tmp_path, spec, "--no-baselines")
    reason = plan["models"][0]["disaggregation"]["reason"]
    assert "across nodes: none on offer," in reason and "not offered where aws is deployed by SkyPilot" in reason
    plan = plan_json(tmp_path, _spec(input_tokens=200, output_tokens=200), "--no-baselines")  # deployed by Pulumi
    assert "heterogeneous: none on offer (needs two GPU types" in plan["models"][0]["disaggregation"]["reason"]


def test_across_nodes_only_over_rdma(tmp_path):
    """p5en (EFA) gets multi-node bundles; the same H200 node of an unlisted type (TCP) only one-node ones."""
    aws = _bundles(tmp_path, _spec())
    assert any(t.nodes > 1 and t.bundle.link == "efa" for t in aws)
    write_offers(tmp_path / "offers.csv", [
        {"cloud": "lab", "region": "r1", "instance_type": "h200-tcp", "gpu": "H200", "gpu_count": 8,
         "gpu_memory_gb": 141, "vcpus": 192, "memory_gb": 2048, "price_per_hour": 60.0}])
    lab = _bundles(tmp_path, _spec(offers="offers.csv"))
    assert lab and all(t.nodes == 1 and t.bundle.link == "nvlink" for t in lab)


def test_off_is_the_default_and_adds_nothing(tmp_path, plan_json):
    spec = _spec()
    del spec["planning"]
    plan = plan_json(tmp_path, spec, "--no-baselines")
    assert "disaggregation" not in plan["models"][0]
    assert all("disaggregation" not in a for a in plan["allocations"])


def _gpus(plan: dict) -> int:
    return sum(a["instances"] * a["gpus_per_instance"] for a in plan["allocations"])


@pytest.mark.heavy
@pytest.mark.xdist_group("pd-acceptance")
def test_acceptance_long_prompts_split_and_serve_more_per_gpu(tmp_path, plan_json):
    """Qwen3-32B fp8, H200 only, 4000/500, TTFT 300 / TPOT 10 ms, verified (p99 at 1.2x): the plan
    splits, and serves the same demand on >= 1.2x fewer GPUs than with the split off. At 20 req/s and
    2000 requests per replication (to keep the suite short) 72 GPUs colocated, 56 split (1.29x); at
    40 req/s 144 and 96 (1.50x, docs/concepts/disaggregation.md; benchmarks/results/promise_pd37.txt)."""
    short = {"requests": 2000}
    # one-node bundles (as on a SkyPilot cloud): bundles across nodes also reach 96 GPUs here, but their
    # 24 engines take the pools' Python event loop ~2 s longer (benchmarks/results/promise_pd37.txt has them)
    split = plan_json(tmp_path, dict(_spec(rate=20.0, verify=short), deploy={"skypilot_clouds": ["aws"]}),
                      "--no-baselines", verify=True)
    (tmp_path / "off").mkdir()
    colocated = plan_json(tmp_path / "off", _spec(rate=20.0, disaggregation="off", verify=short), "--no-baselines",
                          verify=True)
    Plan.parse(split)
    assert split["fidelity"]["met"] and colocated["fidelity"]["met"]
    assert split["models"][0]["disaggregation"]["split"]
    (a,) = split["allocations"]
    d = a["disaggregation"]
    assert [r["role"] for r in d["roles"]] == ["prefill", "decode"] and d["classes"][0]["transfer_ms"] > 0
    assert _gpus(colocated) / _gpus(split) >= 1.2


def test_short_chat_never_splits(tmp_path, plan_json):
    plan = plan_json(tmp_path, _spec(input_tokens=200, output_tokens=200), "--no-baselines", verify=True)
    assert plan["fidelity"]["met"]
    assert not plan["models"][0]["disaggregation"]["split"]
    assert all("disaggregation" not in a for a in plan["allocations"])


# ---- heterogeneous P/D (Splitwise, HexGen-2): prefill on type A, decode on type B ------------------------

HETERO = "benchmarks/specs/llama70-hetero-pd.yaml"


def _hetero_staged(tmp_path, **infra):
    spec = yaml.safe_load(open(HETERO))
    spec["infrastructure"].update(infra)
    path = tmp_path / "hetero.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return prepare(path, template_cache=False)


def test_a_heterogeneous_bundle_is_priced_and_capped_as_both_its_node_types(tmp_path):
    """H100 (p5) prefill + H200 (p5en) decode: the price is the sum of its nodes', it takes GPUs from
    both GPUs' caps, a transfer gets the smaller of the two EFA bandwidths, and the same bundle the
    other way round (H200 prefill, H100 decode) is a template of its own."""
    from hetinfra.catalog.interconnect import interconnect

    staged = _hetero_staged(tmp_path)
    price = {o.instance_type: o.price_per_hour for o in staged.inputs.offers if o.region == "us-east-1"}
    hetero = [u for u in staged.units if u.template.bundle is not None and u.template.bundle.heterogeneous]
    assert {(u.template.gpu, u.template.bundle.decode_gpu) for u in hetero} == {("H100", "H200"), ("H200", "H100")}
    for u in hetero:
        t, b = u.template, u.template.bundle
        assert b.across_nodes and b.link == "efa" and t.nodes == b.prefill_nodes + b.decode_nodes <= 4  # max_nodes
        assert u.cost == pytest.approx(b.prefill_nodes * price[t.instance_type] + b.decode_nodes * price[b.decode_instance_type])
        assert u.gpu_use == {("aws", "us-east-1", t.gpu): 8 * b.prefill_nodes,
                             ("aws", "us-east-1", b.decode_gpu): 8 * b.decode_nodes}
        assert t.gpus == 8 * t.nodes
        slower = min(interconnect("aws", t.instance_type, t.gpu).network_bytes_s(),
                     interconnect("aws", b.decode_instance_type, b.decode_gpu).network_bytes_s())
        assert b.link_bytes_s == pytest.approx(slower / (8 // b.prefill_tp))


def _offer_types(staged, keep: dict[str, dict]):
    """The staged offers of the instance types in ``keep``, each with ``keep[type]``'s fields replaced."""
    from dataclasses import replace

    return tuple(replace(o, **keep[o.instance_type]) for o in staged.inputs.offers if o.instance_type in keep)


@pytest.mark.parametrize("planted, why", [
    ({"p5.48xlarge": {"region": "us-east-1"}, "p5en.48xlarge": {"region": "us-west-2"}}, "across regions"),
    ({"p5.48xlarge": {}, "p5en.48xlarge": {"instance_type": "p5en-tcp.48xlarge"}}, "decode type without RDMA"),
    ({"p5.48xlarge": {"instance_type": "p5-tcp.48xlarge"}, "p5en.48xlarge": {}}, "prefill type without RDMA"),
])
def test_a_planted_heterogeneous_bundle_across_regions_or_without_rdma_is_refused(tmp_path, planted, why):
    """The same two GPU types, once in two regions and once with one type on plain TCP (an unlisted
    type): no heterogeneous bundle, and no bundle across nodes of the TCP type; with both types as
    sold (EFA, one region) there are some (the control)."""
    from dataclasses import replace

    from hetinfra.plan.templates import tp_options
    from hetinfra.plan.templates_pd import bundle_templates

    staged = _hetero_staged(tmp_path, regions=["us-east-1", "us-west-2"])
    pm = staged.inputs.models[0]
    control = bundle_templates(replace(staged.inputs, offers=_offer_types(staged, {"p5.48xlarge": {}, "p5en.48xlarge": {}})),
                               pm, tp_options)
    assert any(t.bundle.heterogeneous for t in control)
    inputs = replace(staged.inputs, offers=_offer_types(staged, planted))
    out = bundle_templates(inputs, pm, tp_options)
    assert out, why  # one-node bundles stay
    assert not any(t.bundle.heterogeneous for t in out), why
    assert all(t.bundle.link == "efa" for t in out if t.bundle.across_nodes), why


def test_the_hetero_spec_splits_across_types_and_says_why(tmp_path, plan_json):
    """benchmarks/specs/llama70-hetero-pd.yaml (rates as estimated): H100 prefill + H200 decode wins,
    and plan.json counts its instances, GPUs and cost role by role."""
    plan = plan_json(tmp_path, yaml.safe_load(open(HETERO)), "--no-baselines")
    d = plan["models"][0]["disaggregation"]
    assert d["split"] and "heterogeneous: 1.1" in d["reason"], d["reason"]
    (a,) = [a for a in plan["allocations"] if a.get("disaggregation")]
    pre, dec = a["disaggregation"]["roles"]
    assert (a["gpu"], dec["gpu"], dec["instance_type"]) == ("H100", "H200", "p5en.48xlarge") and "gpu" not in pre
    assert a["skypilot_task"] is None  # Pulumi or Kubernetes only
    (t,) = [t for t in plan["templates"] if t["id"] == a["template"]]
    assert [(n["instance_type"], n["gpu"]) for n in t["placement"]["stage_nodes"]] == [
        (a["instance_type"], "H100"), ("p5en.48xlarge", "H200")] and t["placement"]["stages_per_node"] == 1
    assert a["instances"] == a["count"] * (pre["nodes"] + dec["nodes"])
    assert a["cost_usd_per_hour"] == pytest.approx(a["count"] * (pre["nodes"] * pre["price_per_node_usd_per_hour"]
                                                                 + dec["nodes"] * dec["price_per_node_usd_per_hour"]), rel=1e-4)
    groups = Plan.parse(plan).allocations
    assert plan["gpus"] == sum(g.gpus_per_instance * g.instances for x in groups for g in x.instance_groups())
    assert plan["gpus"] == sum(x.gpus_per_replica() * x.count for x in groups)


def test_staging_and_the_diff_count_a_hetero_bundle_role_by_role(tmp_path, plan_json):
    """replan's staging (a plan at other counts) keeps cost = the sum of the roles' nodes, and the
    instance diff shows each role's instance type with its own instances and cost."""
    from hetinfra.deploy.apply import changes
    from hetinfra.replan.safe import stage_plan

    plan = plan_json(tmp_path, yaml.safe_load(open(HETERO)), "--no-baselines")
    a = next(x for x in plan["allocations"] if x.get("disaggregation"))
    pre, dec = a["disaggregation"]["roles"]
    replica = pre["nodes"] * pre["price_per_node_usd_per_hour"] + dec["nodes"] * dec["price_per_node_usd_per_hour"]
    staged = stage_plan(plan, [], {a["unit"]: 7})
    (b,) = staged["allocations"]
    assert b["instances"] == 7 * (pre["nodes"] + dec["nodes"])
    assert b["cost_usd_per_hour"] == pytest.approx(7 * replica, rel=1e-4)
    after = Plan.parse(staged).allocations
    rows = {c.instance_type: c for c in changes([], after, label=lambda x: "pulumi")}
    assert {k: (c.gpu, c.after) for k, c in rows.items()} == {
        a["instance_type"]: (a["gpu"], 7 * pre["nodes"]), dec["instance_type"]: (dec["gpu"], 7 * dec["nodes"])}
    assert rows[dec["instance_type"]].after_cost == pytest.approx(7 * dec["nodes"] * dec["price_per_node_usd_per_hour"])


def test_a_hetero_bundle_takes_both_gpu_types_from_their_caps(tmp_path, plan_json):
    """With 16 H200 in the region, the plan holds at most 16 H200 counted role by role (each hetero
    replica's decode node takes 8 of them) and still serves the demand on the H100s."""
    spec = yaml.safe_load(open(HETERO))
    spec["infrastructure"]["availability"] = [{"cloud": "aws", "region": "us-east-1", "gpu": "H200", "max_gpus": 16}]
    plan = plan_json(tmp_path, spec, "--no-baselines")
    used: dict[str, int] = {}
    for a in Plan.parse(plan).allocations:
        for g in a.instance_groups():
            used[g.gpu] = used.get(g.gpu, 0) + g.gpus_per_instance * g.instances
    assert 0 < used.get("H200", 0) <= 16 and used["H100"] > 0, used
    assert any(a.get("disaggregation", {}).get("roles", [{}, {}])[1].get("gpu") == "H200" for a in plan["allocations"])
