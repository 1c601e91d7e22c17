"""apply, status and destroy of deploy.target kubernetes against a loopback stand-in API server:
apply and destroy run the Pulumi project OUT/pulumi/kubernetes/ through the Automation API (the
recording `pulumi` stand-in plays the pulumi-kubernetes provider: tests/deploy/fake_pulumi_kube.py),
status and replan read the cluster through a real kubeconfig and the official client. A pod lost or
pending shows in status, and pods pending for capacity stall the unit so that a re-plan moves its
replicas."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from hetinfra.deploy.apply import apply_plan
from hetinfra.deploy.destroy import destroy
from hetinfra.deploy.drift import PATIENCE_S, read_live
from hetinfra.deploy.live_read import live_lines, running_now
from hetinfra.deploy.state import DeployState
from hetinfra.errors import InvalidInputError
from hetinfra.document import Plan  # apply_plan takes the typed plan
from tests.conftest import copied_plan, loopback_server
from tests.deploy.kube_stand_in import KubeStore, handler_for

REPO = Path(__file__).resolve().parents[2]
#: the chat example (one unit, on aws/us-east-1) on a cluster
SPEC = dict(yaml.safe_load((REPO / "services" / "chat.yaml").read_text()), name="kchat")
SPEC["infrastructure"] = dict(SPEC["infrastructure"], clouds=["aws"])
SPEC["deploy"] = {"target": "kubernetes",
                  "kubernetes": {"clusters": {"aws/us-east-1": {"context": "stand-in", "namespace": "llm"}}}}


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    store = KubeStore()
    with loopback_server(handler_for(store)) as (_srv, url):
        cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "stand-in",
               "clusters": [{"name": "c", "cluster": {"server": url}}],
               "users": [{"name": "u", "user": {"token": "t0ken"}}],
               "contexts": [{"name": "stand-in", "context": {"cluster": "c", "user": "u"}}]}
        (tmp_path / "kubeconfig").write_text(yaml.safe_dump(cfg))
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
        yield store


def _plan(tmp_path, run_cli, spec: dict):
    (tmp_path / "service.yaml").write_text(yaml.safe_dump(spec))
    code, out, err = run_cli("plan", str(tmp_path / "service.yaml"), "--out", str(tmp_path / "out"), "--no-verify",
                             "--no-baselines")
    assert code == 0, err + out
    return tmp_path / "out", json.loads((tmp_path / "out" / "plan.json").read_text())


@pytest.fixture
def planned(tmp_path, shared_plan):
    """SPEC planned once per run (tests/conftest.py shared_plan), copied into this test's OUT."""
    out = copied_plan(shared_plan(SPEC, "--no-verify", "--no-baselines"), tmp_path / "out")
    return out, json.loads((out / "plan.json").read_text())


ENV = {"VLLM_API_KEY": "sk-test", "HF_TOKEN": "hf-test", "PULUMI_CONFIG_PASSPHRASE": "test-passphrase"}
SECRETS = {"VLLM_API_KEY": "sk-test", "HF_TOKEN": "hf-test"}
SECRET_PATH = "/api/v1/namespaces/llm/secrets/kchat-secrets"
PROJECT_PREFIX = "kchat-aws-us-east-1"  # the program's KubeCluster component of the cluster


def _argvs(calls) -> list[list[str]]:
    return [[a for a in c["argv"] if a != "--non-interactive"] for c in calls if c["cwd"].endswith("/kubernetes")]


@pytest.fixture
def deploy_env(cloud_env, fake_pulumi, monkeypatch):
    """The stand-in `pulumi` (in-process) with a passphrase, and the secrets apply reads."""
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    return fake_pulumi


def test_apply_status_destroy(cluster, planned, deploy_env, pulumi_stacks):
    out, plan = planned
    (alloc,) = plan["allocations"]
    unit, count = alloc["deployment_unit"], alloc["count"]
    lines: list[str] = []
    state = apply_plan(out, Plan.parse(plan), target="all", yes=True, echo=lines.append, env=ENV)
    ops = [a[:2] for a in _argvs(deploy_env())]
    # as for a VM stack: the secrets on stdin, Pulumi's preview shown, then `up --refresh`
    assert ["config", "set"] in ops and ops.index(["preview", "--json"]) < ops.index(["up", "--yes"])
    up = next(a for a in _argvs(deploy_env()) if a[0] == "up")
    assert "--refresh" in up
    assert "Pulumi preview, per stack:" in "\n".join(lines)
    assert not any("sk-test" in " ".join(a) for a in _argvs(deploy_env()))  # never on a command line
    dep = f"/apis/apps/v1/namespaces/llm/deployments/{unit}"
    assert cluster.objects[dep]["spec"]["replicas"] == count
    assert cluster.objects[SECRET_PATH]["stringData"] == SECRETS  # sent to the cluster, never written under OUT
    assert "sk-test" not in "".join(p.read_text() for p in out.rglob("*") if p.is_file())
    assert any(p.startswith("/apis/karpenter.sh/v1/nodepools/") for p in cluster.objects)
    assert {a.path for a in state.running} == {"kubernetes"}
    assert state.doc["pulumi"]["kubernetes"]["stack"] == "prod"
    assert state.doc["pulumi"]["kubernetes"]["outputs"]["units"][unit]["kind"] == "Deployment"
    assert state.doc["kubernetes"]["aws-us-east-1"] == {"context": "stand-in", "kubeconfig": None, "namespace": "llm"}
    assert state.doc["endpoints"][unit] == [f"http://{unit}.llm.svc:{plan['deploy'].get('port', 8000)}/v1"]
    declared = pulumi_stacks()["kubernetes"]["prod"]["declared"]
    assert any(u.endswith(f"kubernetes:apps/v1:Deployment::{PROJECT_PREFIX}-deployment-{unit}") for u in declared)

    # the controllers: all but one replica ready; one pod lost (not recreated yet), none pending
    cluster.objects[dep]["status"] = {"replicas": count, "readyReplicas": count - 1}
    labels = {"hetinfra.dev/unit": unit}
    for i in range(count - 1):
        cluster.add_pod("llm", f"{unit}-{i}", labels, phase="Running", ready=True)
    live = read_live(out, DeployState.load(out))["units"][unit]
    assert (live["desired"], live["live"], live["replacing"], live["stalled"]) == (count, count - 1, 1, 0)

    # the replacement pod is pending: the autoscaler found no node for it an hour ago -> stalled
    cluster.add_pod("llm", f"{unit}-new", labels, phase="Pending", unschedulable_since="2020-01-01T00:00:00Z")
    doc = read_live(out, DeployState.load(out))
    u = doc["units"][unit]
    assert (u["live"], u["replacing"], u["stalled"]) == (count - 1, 1, 1)
    assert any("pending" in line for line in live_lines(doc))
    # a re-plan takes the stalled replica out of what runs and says why
    running, forced, _notes = running_now(DeployState.load(out).doc["allocations"], doc)
    assert forced and "planned elsewhere" in forced[0]
    assert sum(a["count"] for a in running) == count - 1

    report: dict = {}
    destroy(out, target="kubernetes", yes=True, echo=lambda _l: None, env=ENV, report=report)
    assert any(a[0] == "destroy" for a in _argvs(deploy_env()))  # `pulumi destroy` of the project
    assert report["destroyed"] is True and report["running"] == [] and report["stacks"] == {}
    assert dep not in cluster.objects and SECRET_PATH not in cluster.objects
    assert not any(p.startswith("/apis/karpenter.sh/v1/nodepools/") for p in cluster.objects)
    state = DeployState.load(out)
    assert state.running == [] and state.doc["endpoints"] == {} and not state.doc.get("kubernetes")
    assert "/api/v1/namespaces/llm" in cluster.objects  # the namespace is the owner's to remove (retained)


def test_a_workload_deleted_outside_is_lost_and_the_next_apply_restores_it(cluster, planned, deploy_env):
    out, plan = planned
    (alloc,) = plan["allocations"]
    unit = alloc["deployment_unit"]
    apply_plan(out, Plan.parse(plan), target="kubernetes", yes=True, echo=lambda _l: None, env=ENV)
    dep = f"/apis/apps/v1/namespaces/llm/deployments/{unit}"
    del cluster.objects[dep]  # kubectl delete, behind Pulumi's back
    u = read_live(out, DeployState.load(out))["units"][unit]
    assert (u["live"], u["lost"]) == (0, alloc["count"])
    report: dict = {}
    apply_plan(out, Plan.parse(plan), target="kubernetes", yes=True, echo=lambda _l: None, env=ENV, report=report)
    assert cluster.objects[dep]["spec"]["replicas"] == alloc["count"]  # `up --refresh` saw it gone
    assert report["stacks"]["kubernetes"]["status"] == "done"


def test_a_fresh_pending_pod_is_replacing_not_stalled(cluster, planned, deploy_env):
    out, plan = planned
    (alloc,) = plan["allocations"]
    unit = alloc["deployment_unit"]
    apply_plan(out, Plan.parse(plan), target="kubernetes", yes=True, echo=lambda _l: None, env=ENV)
    from hetinfra.deploy.state import now

    cluster.add_pod("llm", f"{unit}-0", {"hetinfra.dev/unit": unit}, phase="Pending", unschedulable_since=now())
    u = read_live(out, DeployState.load(out))["units"][unit]
    assert u["replacing"] >= 1 and u["stalled"] == 0
    assert PATIENCE_S > 0


def test_apply_without_the_api_key_changes_nothing(cluster, planned, deploy_env):
    out, plan = planned
    with pytest.raises(InvalidInputError, match="VLLM_API_KEY"):
        apply_plan(out, Plan.parse(plan), target="kubernetes", yes=True, echo=lambda _l: None, env={})
    assert not any(m == "PATCH" for m, _p, _c in cluster.requests)
    assert _argvs(deploy_env()) == []


def test_a_failed_preview_changes_nothing(cluster, planned, deploy_env, monkeypatch):
    from hetinfra.errors import ProviderError

    out, plan = planned
    monkeypatch.setenv("FAKE_PULUMI_FAIL", "preview:kubernetes")
    with pytest.raises(ProviderError, match="pulumi preview of the kubernetes stack failed"):
        apply_plan(out, Plan.parse(plan), target="kubernetes", yes=True, echo=lambda _l: None, env=ENV)
    assert not any(m == "PATCH" for m, _p, _c in cluster.requests)
    assert not (out / "state.json").exists() or DeployState.load(out).running == []


def test_a_failed_up_stops_resumably_and_the_next_apply_finishes(cluster, planned, deploy_env, monkeypatch):
    from hetinfra.errors import ProviderError

    out, plan = planned
    monkeypatch.setenv("FAKE_PULUMI_FAIL", "up:kubernetes")
    with pytest.raises(ProviderError, match="apply stopped at step pulumi:kubernetes"):
        apply_plan(out, Plan.parse(plan), target="kubernetes", yes=True, echo=lambda _l: None, env=ENV)
    state = DeployState.load(out)
    assert state.operation.status == "failed" and state.running == []
    monkeypatch.delenv("FAKE_PULUMI_FAIL")
    state = apply_plan(out, Plan.parse(plan), target="kubernetes", yes=True, echo=lambda _l: None, env=ENV)
    assert state.operation.status == "done" and {a.path for a in state.running} == {"kubernetes"}


def test_destroy_of_objects_applied_without_pulumi_says_how_to_adopt_them(cluster, planned, deploy_env):
    out, plan = planned
    apply_plan(out, Plan.parse(plan), target="kubernetes", yes=True, echo=lambda _l: None, env=ENV)
    doc = json.loads((out / "state.json").read_text())
    del doc["pulumi"]["kubernetes"]  # as the direct-client apply of an earlier hetinfra left it
    (out / "state.json").write_text(json.dumps(doc))
    with pytest.raises(InvalidInputError, match="applied without Pulumi") as err:
        destroy(out, target="kubernetes", yes=True, echo=lambda _l: None, env=ENV)
    assert "--target kubernetes" in err.value.hint


def test_a_missing_cluster_context_is_a_clear_error(tmp_path, run_cli, cluster, deploy_env):
    spec = json.loads(json.dumps(SPEC))
    spec["deploy"]["kubernetes"]["clusters"] = {}
    out, plan = _plan(tmp_path, run_cli, spec)
    with pytest.raises(InvalidInputError, match="no cluster for aws-us-east-1"):
        apply_plan(out, Plan.parse(plan), target="kubernetes", yes=True, echo=lambda _l: None, env=ENV)
    assert _argvs(deploy_env()) == []


def test_replan_moves_replicas_pending_for_capacity(cluster, tmp_path, run_cli, deploy_env):
    """Through the CLI: apply (its --json document shaped as the VM path's), a pod pending for
    capacity since long ago, `replan` proposes a forced move, `replan --apply` makes the new unit
    (ready per its workload), then removes the stalled one; destroy removes all."""
    spec = json.loads(json.dumps(SPEC))
    spec["infrastructure"]["regions"] = ["us-east-1"]  # one cluster: the move stays in it
    # replan verifies by simulation otherwise (seconds; not what is tested here)
    spec["planning"] = dict(spec.get("planning") or {}, verify={"enabled": False})
    out, plan = _plan(tmp_path, run_cli, spec)
    (alloc,) = plan["allocations"]
    unit = alloc["deployment_unit"]
    cluster.ready_on_apply = True
    code, stdout, err = run_cli("apply", str(out), "--yes", "--json")
    assert code == 0, err
    doc = json.loads(stdout)
    assert doc["applied"] is True and doc["target"] == "kubernetes"
    assert set(doc) == {"command", "out", "target", "applied", "changes", "notes", "steps", "stacks", "services",
                        "endpoints", "gateways", "running", "state"}  # as apply --json of the VM stacks
    assert set(doc["changes"]) == {"instances", "instances_added", "instances_removed", "cost_usd_per_hour",
                                   "pulumi", "skypilot"}
    k8s = doc["changes"]["pulumi"]["kubernetes"]
    assert {"op": "create", "type": "kubernetes:apps/v1:Deployment", "name": f"{PROJECT_PREFIX}-deployment-{unit}"} \
        .items() <= next(c for c in k8s["changes"] if c["type"] == "kubernetes:apps/v1:Deployment").items()
    assert k8s["counts"]["create"] == len(k8s["changes"])
    assert doc["changes"]["instances_added"] == alloc["count"]
    assert [(s["id"], s["status"]) for s in doc["steps"]] == [("pulumi:kubernetes", "done")]
    assert doc["stacks"]["kubernetes"]["status"] == "done" and unit in doc["stacks"]["kubernetes"]["outputs"]["units"]
    code, stdout, err = run_cli("status", str(out))
    assert code == 0 and f"kubernetes {unit}" in " ".join(stdout.split()), stdout + err

    dep = f"/apis/apps/v1/namespaces/llm/deployments/{unit}"
    count = alloc["count"]
    cluster.objects[dep]["status"] = {"replicas": count, "readyReplicas": count - 1}
    for i in range(count - 1):
        cluster.add_pod("llm", f"{unit}-{i}", {"hetinfra.dev/unit": unit}, phase="Running", ready=True)
    cluster.add_pod("llm", f"{unit}-x", {"hetinfra.dev/unit": unit}, phase="Pending",
                    unschedulable_since="2020-01-01T00:00:00Z")
    code, stdout, err = run_cli("status", str(out))
    assert "pending" in stdout, stdout + err
    code, stdout, err = run_cli("replan", str(tmp_path / "service.yaml"), "--state", str(out))
    assert code == 10, stdout + err
    assert stdout.startswith("replan: forced move")
    assert "planned elsewhere" in (out / "replan.log").read_text()

    code, stdout, err = run_cli("replan", str(tmp_path / "service.yaml"), "--state", str(out), "--apply",
                                "--health-timeout-s", "5")
    assert code == 11, stdout + err
    running = json.loads((out / "state.json").read_text())["allocations"]
    assert {a["path"] for a in running} == {"kubernetes"}
    new_units = {a["deployment_unit"] for a in running} - {unit}
    assert new_units, running  # the stalled replica runs elsewhere now
    for u in new_units:
        assert f"/apis/apps/v1/namespaces/llm/deployments/{u}" in cluster.objects
    ups = [a for a in _argvs(deploy_env()) if a[0] == "up"]
    assert len(ups) >= 2  # the first apply, then each stage of replan --apply: a `pulumi up`

    code, stdout, err = run_cli("destroy", str(out), "--yes", "--json")
    assert code == 0, stdout + err
    assert json.loads(stdout)["running"] == []
    assert not any("/deployments/" in p for p in cluster.objects)


@pytest.mark.parametrize("api_version, kind, path", [
    ("apps/v1", "Deployment", "/apis/apps/v1/namespaces/ns/deployments/x"),
    ("v1", "Service", "/api/v1/namespaces/ns/services/x"),
    ("v1", "Namespace", "/api/v1/namespaces/x"),
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "/apis/leaderworkerset.x-k8s.io/v1/namespaces/ns/leaderworkersets/x"),
    ("karpenter.sh/v1", "NodePool", "/apis/karpenter.sh/v1/nodepools/x"),
    ("karpenter.k8s.aws/v1", "EC2NodeClass", "/apis/karpenter.k8s.aws/v1/ec2nodeclasses/x"),
    ("cloud.google.com/v1", "ComputeClass", "/apis/cloud.google.com/v1/computeclasses/x"),
    ("inference.networking.k8s.io/v1", "InferencePool", "/apis/inference.networking.k8s.io/v1/namespaces/ns/inferencepools/x"),
    ("gateway.networking.k8s.io/v1", "HTTPRoute", "/apis/gateway.networking.k8s.io/v1/namespaces/ns/httproutes/x"),
    ("keda.sh/v1alpha1", "ScaledObject", "/apis/keda.sh/v1alpha1/namespaces/ns/scaledobjects/x"),
    ("autoscaling/v2", "HorizontalPodAutoscaler", "/apis/autoscaling/v2/namespaces/ns/horizontalpodautoscalers/x"),
    ("policy/v1", "PodDisruptionBudget", "/apis/policy/v1/namespaces/ns/poddisruptionbudgets/x"),
])
def test_object_paths_are_the_api_servers(api_version, kind, path):
    """The plural and scope of every kind hetinfra writes (the CRDs' spec.names.plural and scope)."""
    from hetinfra.deploy.kube_api import object_path

    assert object_path(api_version, kind, "ns", "x") == path
