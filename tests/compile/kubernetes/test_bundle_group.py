"""A prefill/decode bundle across nodes on Kubernetes (hetinfra.compile.kubernetes.bundle_group): one
LeaderWorkerSet group per replica, its leader (prefill engines + the hop) on instance type A and its
worker (decode engines) on type B, each with its EFA devices, placed together; validated offline with
kubernetes-validate and the vendored LeaderWorkerSet CRD schema, and a golden file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from hetinfra.compile.artifacts import sky_units
from hetinfra.compile.bundle_nodes import node_engines
from hetinfra.compile.kubernetes import render_clusters
from hetinfra.compile.kubernetes.bundle_group import AWS_NEAREST_NETWORK_NODE, EXCLUSIVE_TOPOLOGY
from hetinfra.document import Plan
from hetinfra.errors import InvalidInputError
from tests.compile.kubernetes.validate import validate
from tests.compile.split_plan import UNIT, split_plan

GOLDEN = Path(__file__).with_name("golden") / "eks-bundle-hetero"
KUBE = {"clusters": {}, "kubeconfig": None, "scaler": "hpa", "prometheus_url": "http://prom:9090"}


def _render(plan: dict) -> dict[str, str]:
    (files,) = render_clusters(plan, sky_units(Plan.parse(plan), include_mixed=True)).values()
    return files


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    return _render(split_plan("hetero", target="kubernetes", kubernetes=KUBE))


def test_a_replica_is_one_group_of_a_prefill_leader_and_a_decode_worker_on_their_own_types(rendered):
    objs = [o for f, t in rendered.items() if f != "kustomization.yaml" for o in yaml.safe_load_all(t) if o]
    for o in objs:
        validate(o)  # built-in kinds strict; LeaderWorkerSet and Karpenter against their CRDs
    (lws,) = [o for o in objs if o["kind"] == "LeaderWorkerSet"]
    unit = sky_units(Plan.parse(split_plan("hetero")), include_mixed=True)[0]
    assert lws["spec"]["replicas"] == unit.replicas and lws["metadata"]["annotations"] == {
        EXCLUSIVE_TOPOLOGY: AWS_NEAREST_NETWORK_NODE}
    group = lws["spec"]["leaderWorkerTemplate"]
    assert group["size"] == 2 and group["restartPolicy"] == "RecreateGroupOnPodRestart"
    leader, worker = group["leaderTemplate"]["spec"], group["workerTemplate"]["spec"]
    assert leader["nodeSelector"]["node.kubernetes.io/instance-type"] == "p5en.48xlarge"
    assert worker["nodeSelector"]["node.kubernetes.io/instance-type"] == "p4de.24xlarge"
    assert [c["name"] for c in leader["containers"]] == ["prefill-0", "prefill-1", "hop"]
    assert [c["name"] for c in worker["containers"]] == ["decode-0", "decode-1"]
    # each engine's share of its node's GPUs and EFA interfaces (16 on p5en, 4 on p4de)
    assert [c["resources"]["limits"] for c in worker["containers"]] == [
        {"nvidia.com/gpu": 4, "vpc.amazonaws.com/efa": 2}] * 2
    assert leader["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"] == 8
    nixl = {e["name"]: e for e in worker["containers"][0]["env"]}["VLLM_NIXL_SIDE_CHANNEL_HOST"]
    assert nixl["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    hop = leader["containers"][-1]["command"][-1]
    for e in node_engines(unit, 1):  # the hop reaches the worker's engines by its pod's DNS name
        assert f'--endpoint "{UNIT}=http://$POD_NAME-1.{UNIT}.hetinfra:{e.port}/v1"' in hop
    pools = {o["metadata"]["name"]: o for o in objs if o["kind"] == "NodePool"}
    assert sorted(pools) == ["pd-p4de-24xlarge-od", "pd-p5en-48xlarge-od"]
    assert pools["pd-p4de-24xlarge-od"]["spec"]["limits"]["nvidia.com/gpu"] == str(8 * unit.replicas)
    (svc,) = [o for o in objs if o["kind"] == "Service" and o["metadata"]["name"] == UNIT]
    assert svc["spec"]["selector"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0"  # the hop, not a worker


@pytest.mark.parametrize("cloud, why", [("gcp", "RDMA multi-networking"), ("azure", "one scale set")])
def test_gke_and_aks_refuse_a_bundle_across_nodes(cloud, why):
    plan = split_plan("across", target="kubernetes", kubernetes=KUBE)
    unit = sky_units(Plan.parse(plan), include_mixed=True)[0]
    from dataclasses import replace

    from hetinfra.compile.kubernetes.workloads import workload

    with pytest.raises(InvalidInputError, match=why):
        workload("pd", "hetinfra", replace(unit, cloud=cloud, alternates=()), "qwen32")


def test_golden(rendered):
    for fname in (f"units/{UNIT}.yaml", "nodes.yaml"):
        path = GOLDEN / fname
        if os.environ.get("HETINFRA_UPDATE_GOLDEN") == "1":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(rendered[fname])
        assert path.read_text() == rendered[fname]
