"""The Kubernetes manifests: every example's validate offline (kubernetes-validate for built-in kinds,
the vendored CRD schemas for the rest), multi-node pipelines become LeaderWorkerSets, spot units
land on spot capacity, and the image and vLLM command line are the VM paths'."""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path

import pytest
import yaml

from hetinfra.document import Plan
from hetinfra.compile.artifacts import sky_units
from hetinfra.compile.kubernetes import render_clusters
from hetinfra.compile.kubernetes.nodes import node_objects, placement
from hetinfra.compile.kubernetes.render import KubePlan, cluster_objects
from hetinfra.compile.kubernetes.workloads import workload
from hetinfra.compile.engine import vllm_serve_command
from hetinfra.compile.skypilot import task_config
from hetinfra.compile.unit import DeployedUnit
from hetinfra.plan.naming import unit_name
from tests.compile.kubernetes.validate import validate

GOLDEN = Path(__file__).with_name("golden")
KUBE = {"clusters": {}, "kubeconfig": None, "scaler": "hpa", "prometheus_url": "http://prom:9090"}


def _unit(cloud, region, itype, gpu, gpus, tp, pp, replicas, spot, **kw) -> DeployedUnit:
    return DeployedUnit(name=unit_name("chat-7b", cloud, region, itype, spot=spot), service_model="chat-7b",
                   source="meta-llama/Llama-2-7b-chat-hf", cloud=cloud, region=region, instance_type=itype, gpu=gpu,
                   gpus_per_instance=gpus, tp=tp, pp=pp, engines_per_instance=kw.pop("eng", 1), replicas=replicas,
                   spot=spot, precision="bf16", max_model_len=4096, runtime="container", vllm_version="0.12.0", **kw)


L4_AWS_SPOT = _unit("aws", "us-east-1", "g6.xlarge", "L4", 1, 1, 1, 2, True, disk_size=130,
                    target_qps_per_replica=1.5)
A100_AZ_PP2 = _unit("azure", "westus3", "Standard_NC96ads_A100_v4", "A100-80GB", 4, 4, 2, 1, False,
                    layer_partition=(16, 16))
H100_GCP_SPOT = _unit("gcp", "us-central1", "a3-highgpu-8g", "H100", 8, 8, 1, 1, True)


def _kube_plan(units: list[DeployedUnit], **kube) -> KubePlan:
    plan = {"service": "chat", "deploy": {"gateway": {"port": 8080, "package": "hetinfra==0.1.0"}},
            "allocations": [{"deployment_unit": u.name} for u in units]}
    return KubePlan("chat", units, [], {"chat-7b": "chat-7b"}, dict(KUBE, **kube), plan, plan["deploy"]["gateway"],
                    8000)


def _objects(files: dict[str, str]) -> list[dict]:
    # libyaml's safe loader (same documents as yaml.safe_load_all, several times faster on the examples' manifests)
    return [o for name, text in files.items() if name != "kustomization.yaml"
            for o in yaml.load_all(text, Loader=yaml.CSafeLoader) if o]


def test_every_example_validates(kube_planned):
    seen = set()
    for name, (out, plan) in kube_planned.items():
        variants = [plan]
        for scaler, kind in (("keda", "inference-extension"),):
            v = copy.deepcopy(plan)
            v["deploy"]["kubernetes"]["scaler"], v["deploy"]["gateway"]["kind"] = scaler, kind
            variants.append(v)
        rendered = []
        for p in variants:
            clusters = render_clusters(p, sky_units(Plan.parse(p), include_mixed=True))
            assert clusters, name
            rendered.append(clusters)
            for cluster, files in clusters.items():
                kust = yaml.safe_load(files["kustomization.yaml"])
                assert kust["resources"] == [f for f in files if f != "kustomization.yaml"], (name, cluster)
                for obj in _objects(files):
                    validate(obj)
                    seen.add(obj["kind"])
        # the files `hetinfra plan` wrote are what render_clusters gives (the plan's own render: rendered[0])
        for cluster, files in rendered[0].items():
            for fname, text in files.items():
                assert (out / "kubernetes" / cluster / fname).read_text() == text
    assert {"Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler", "ScaledObject", "NodePool",
            "EC2NodeClass", "InferencePool", "HTTPRoute", "ConfigMap"} <= seen


def test_validator_rejects_what_a_cluster_would():
    dep = workload("chat", "ns", L4_AWS_SPOT, "chat-7b")
    validate(dep)
    bad = copy.deepcopy(dep)
    bad["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = 3
    with pytest.raises(AssertionError, match="Deployment"):
        validate(bad)
    lws = workload("chat", "ns", A100_AZ_PP2, "chat-7b")
    validate(lws)
    bad = copy.deepcopy(lws)
    bad["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "Sometimes"
    with pytest.raises(AssertionError, match="LeaderWorkerSet"):
        validate(bad)
    bad = copy.deepcopy(lws)
    bad["spec"]["leaderWorkerTemplate"]["groupSize"] = 2  # unknown field
    with pytest.raises(AssertionError, match="groupSize"):
        validate(bad)


def test_multi_node_pipeline_is_a_leader_worker_set():
    lws = workload("chat", "ns", A100_AZ_PP2, "chat-7b")
    assert lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1" and lws["kind"] == "LeaderWorkerSet"
    tmpl = lws["spec"]["leaderWorkerTemplate"]
    assert tmpl["size"] == A100_AZ_PP2.num_nodes == 2
    assert tmpl["restartPolicy"] == "RecreateGroupOnPodRestart"
    assert lws["spec"]["replicas"] == 1
    for role in ("leaderTemplate", "workerTemplate"):
        c = tmpl[role]["spec"]["containers"][0]
        assert c["resources"]["limits"]["nvidia.com/gpu"] == 4
        assert tmpl[role]["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"] == "Standard_NC96ads_A100_v4"
    assert "readinessProbe" in tmpl["leaderTemplate"]["spec"]["containers"][0]
    assert "readinessProbe" not in tmpl["workerTemplate"]["spec"]["containers"][0]
    # single-node units (TP x PP inside a node included) stay Deployments
    assert workload("chat", "ns", L4_AWS_SPOT, "chat-7b")["kind"] == "Deployment"


@pytest.mark.parametrize("unit", [L4_AWS_SPOT, H100_GCP_SPOT, A100_AZ_PP2], ids=["aws", "gcp", "azure"])
def test_spot_units_land_on_spot_capacity(unit):
    for spot in (True, False):
        u = DeployedUnit(**{**unit.__dict__, "spot": spot, "name": unit.name + ("" if spot else "-od")})
        sel = placement("chat", u).node_selector
        nodes = node_objects("chat", u.cloud, [u], {})
        pool = next(o for o in nodes if o["kind"] in ("NodePool", "ComputeClass"))
        if u.cloud == "gcp":
            assert pool["spec"]["priorities"] == [{"machineType": u.instance_type, "spot": spot,
                                                   "gpu": {"type": "nvidia-h100-80gb", "count": 8}}]
            assert sel["cloud.google.com/compute-class"] == pool["metadata"]["name"]
            assert (sel.get("cloud.google.com/gke-spot") == "true") == spot
        else:
            req = {r["key"]: r["values"] for r in pool["spec"]["template"]["spec"]["requirements"]}
            assert req["karpenter.sh/capacity-type"] == ["spot" if spot else "on-demand"]
            assert req["node.kubernetes.io/instance-type"] == [u.instance_type]
            assert sel["karpenter.sh/capacity-type"] == ("spot" if spot else "on-demand")
            assert sel["karpenter.sh/nodepool"] == pool["metadata"]["name"]
            # the pool may hold what the unit uses at its autoscaling bound, no more
            assert pool["spec"]["limits"]["nvidia.com/gpu"] == str(u.gpus_per_instance * u.num_nodes * u.max_replicas)


def _serve_line(script: str) -> str:
    return next(ln.strip() for ln in script.splitlines() if ln.strip().startswith("exec vllm serve")
                or ln.strip().startswith("vllm serve"))


def test_image_and_vllm_flags_equal_the_vm_paths(kube_planned):
    from hetinfra.stacks.startup import RuntimeConfig, serve_script

    checked = 0
    for name, (out, plan) in kube_planned.items():
        for u in sky_units(Plan.parse(plan), include_mixed=True):
            docs = list(yaml.safe_load_all((out / "kubernetes" / f"{u.cloud}-{u.region}" / "units" /
                                            f"{u.name}.yaml").read_text()))
            w = docs[0]
            pod = w["spec"]["template"] if w["kind"] == "Deployment" else \
                w["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
            c = pod["spec"]["containers"][0]
            assert c["image"] == RuntimeConfig("container", u.vllm_version).image
            vm = _serve_line(serve_script(u))  # the Pulumi VM's serve script (rank 0's line)
            assert _serve_line(c["command"][2]) == vm, (name, u.name)
            if not u.mixed:  # a mixed pipeline has no SkyPilot task (whose single-node run has no exec)
                assert vm == "exec " + _serve_line(task_config(u)["run"]).removeprefix("exec "), (name, u.name)
            assert vm == "exec " + vllm_serve_command(u)
            env = {e["name"]: e.get("value") for e in c["env"]}
            assert env["MODEL_ID"] == u.source
            assert all("value" not in e for e in c["env"] if e["name"] in ("VLLM_API_KEY", "HF_TOKEN"))
            checked += 1
    assert checked >= len(kube_planned)
    # and for a pipeline leader
    lws = workload("chat", "ns", A100_AZ_PP2, "chat-7b")
    leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    assert _serve_line(leader["command"][2]) == _serve_line(serve_script(A100_AZ_PP2))


def test_no_secret_values_in_manifests(kube_planned):
    for name, (out, _plan) in kube_planned.items():
        for path in (out / "kubernetes").rglob("*.yaml"):
            for obj in yaml.safe_load_all(path.read_text()):
                assert not obj or obj.get("kind") != "Secret", path


CASES = {"eks-spot-autoscale": ([L4_AWS_SPOT], {}), "aks-pipeline-keda": ([A100_AZ_PP2], {"scaler": "keda"}),
         "gke-spot": ([H100_GCP_SPOT], {})}


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case):
    units, kube = CASES[case]
    kp = _kube_plan(units, **kube)
    u = units[0]
    from hetinfra.compile.kubernetes.render import _dump

    files = {name: _dump(objs) for name, objs in cluster_objects(kp, u.cloud, u.region).items() if objs}
    for fname, text in files.items():
        path = GOLDEN / case / fname
        if os.environ.get("HETINFRA_UPDATE_GOLDEN") == "1":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        assert path.exists(), f"missing golden file {path}; run with HETINFRA_UPDATE_GOLDEN=1"
        assert path.read_text() == text, f"{path} differs; if intended, rerun with HETINFRA_UPDATE_GOLDEN=1"
    for obj in (o for objs in cluster_objects(kp, u.cloud, u.region).values() for o in objs):
        validate(obj)


def test_a_mixed_pipeline_is_a_leader_worker_set_when_its_later_stages_match():
    """Stage 0 on the leader's instance type, the others on the workers' (vLLM's mp backend with the
    VM path's command line; workers headless); a pipeline of three kinds is left to the VM stacks."""
    from hetinfra.stacks.startup import serve_script

    mixed = DeployedUnit(name="big-aws-us-east-1-mixed", service_model="chat-7b", source="org/big", cloud="aws",
                    region="us-east-1", instance_type="g5.xlarge+p5.4xlarge+p5.4xlarge", gpu="A10G+H100+H100",
                    gpus_per_instance=1, tp=1, pp=3, engines_per_instance=1, replicas=1, spot=False,
                    precision="fp16", max_model_len=2048, layer_partition=(5, 38, 37), runtime="container",
                    vllm_version="0.12.0", stages=(("g5.xlarge", "A10G"), ("p5.4xlarge", "H100"), ("p5.4xlarge", "H100")))
    lws = workload("chat", "ns", mixed, "chat-7b")
    validate(lws)
    tmpl = lws["spec"]["leaderWorkerTemplate"]
    assert tmpl["size"] == 3
    leader, worker = (tmpl[k]["spec"] for k in ("leaderTemplate", "workerTemplate"))
    assert leader["nodeSelector"]["node.kubernetes.io/instance-type"] == "g5.xlarge"
    assert worker["nodeSelector"]["node.kubernetes.io/instance-type"] == "p5.4xlarge"
    assert _serve_line(leader["containers"][0]["command"][2]) == _serve_line(serve_script(mixed))
    assert _serve_line(worker["containers"][0]["command"][2]) == _serve_line(serve_script(mixed)) + " --headless"
    pools = {o["metadata"]["name"]: o for o in node_objects("chat", "aws", [mixed], {}) if o["kind"] == "NodePool"}
    assert pools["chat-g5-xlarge-od"]["spec"]["limits"]["nvidia.com/gpu"] == "1"
    assert pools["chat-p5-4xlarge-od"]["spec"]["limits"]["nvidia.com/gpu"] == "2"

    three = DeployedUnit(**{**mixed.__dict__, "stages": (("g5.xlarge", "A10G"), ("p5.4xlarge", "H100"),
                                                    ("p4d.24xlarge", "A100"))})
    with pytest.raises(ValueError, match="share an instance type"):
        workload("chat", "ns", three, "chat-7b")
    from hetinfra.compile.kubernetes.render import kube_units

    plan = {"service": "chat", "models": [{"name": "chat-7b"}], "deploy": {"kubernetes": KUBE, "gateway": {}}}
    kp = kube_units(plan, [three])
    assert kp.units == [] and "deploy it with the Pulumi stacks" in kp.skipped[0][2]


def test_other_targets_write_what_they_wrote_before(tmp_path, run_cli):
    """Without deploy.target kubernetes nothing of it is written: no kubernetes/ tree, no project, no
    new plan.json keys (the examples' outputs stay byte-identical)."""
    from tests.conftest import REPO

    code, _out, err = run_cli("plan", str(REPO / "services" / "chat.yaml"), "--out", str(tmp_path / "out"),
                              "--no-verify", "--no-baselines")
    assert code == 0, err
    assert not (tmp_path / "out" / "kubernetes").exists() and not (tmp_path / "out" / "pulumi" / "kubernetes").exists()
    import json

    deploy = json.loads((tmp_path / "out" / "plan.json").read_text())["deploy"]
    assert not {"target", "kubernetes"} & set(deploy) and "kind" not in deploy["gateway"]
