"""The pulumi-kubernetes program under Pulumi mocks: per cluster a provider on its kubeconfig
context, every manifest object as a resource with the same body, the Secret from Pulumi secrets
only, and the outputs registered."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

pulumi = pytest.importorskip("pulumi")
pytest.importorskip("pulumi_kubernetes")

from hetinfra.document import Plan
from hetinfra.stacks.common import FleetSecrets  # noqa: E402

API_KEY = "sk-hetinfra-TOPSECRET"
SECRET_SIG = "4dabf18193072939515e22adb298388d"


def _plan(three_cloud_plan: dict) -> dict:
    plan = copy.deepcopy(three_cloud_plan)
    plan["deploy"].update(target="kubernetes", gateway={"port": 8080, "package": "hetinfra", "kind": "hetinfra"},
                          kubernetes={"clusters": {"aws/us-east-1": {"context": "prod-use1", "namespace": "llm"}},
                                      "kubeconfig": None, "scaler": "hpa", "prometheus_url": "http://p:9090"})
    return plan


def _run(plan: dict) -> dict:
    from hetinfra.stacks.kubernetes import build

    resolved: dict = {}

    @pulumi.runtime.test
    def run():
        clusters = build(plan, FleetSecrets(api_key=pulumi.Output.secret(API_KEY)))
        return pulumi.Output.from_input({k: v for c in clusters for k, v in c.endpoints.items()}).apply(resolved.update)

    run()
    return resolved


def test_every_manifest_object_is_a_resource_of_its_cluster(mocks, three_cloud_plan, tmp_path):
    from hetinfra.compile.artifacts import sky_units
    from hetinfra.compile.kubernetes import render_clusters

    plan = _plan(three_cloud_plan)
    endpoints = _run(plan)
    files = render_clusters(plan, sky_units(Plan.parse(plan), include_mixed=True))
    expected = [(c, o) for c, texts in files.items() for name, text in texts.items() if name != "kustomization.yaml"
                for o in yaml.safe_load_all(text) if o]
    created = [a for a in mocks.created if a.typ.startswith("kubernetes:") and a.typ != "pulumi:providers:kubernetes"
               and not a.typ.endswith(":Secret")]
    assert len(created) == len(expected)
    by_name = {a.name: (a.typ, a.inputs) for a in created}
    for c, obj in expected:
        res = f"demo-{c}-ns" if obj["kind"] == "Namespace" else \
            f"demo-{c}-{obj['kind'].lower()}-{obj['metadata']['name']}"
        typ, inputs = by_name[res]
        assert typ == f"kubernetes:{obj['apiVersion'] if '/' in obj['apiVersion'] else 'core/' + obj['apiVersion']}:" \
                      f"{obj['kind']}"
        assert inputs["metadata"]["name"] == obj["metadata"]["name"]
        assert inputs.get("spec", inputs.get("data")) == obj.get("spec", obj.get("data")), res
    kinds = {a.typ for a in created}
    assert "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet" in kinds  # the gcp 2-node pipeline
    assert "kubernetes:karpenter.sh/v1:NodePool" in kinds and "kubernetes:cloud.google.com/v1:ComputeClass" in kinds
    providers = {a.name: a.inputs for a in mocks.created if a.typ == "pulumi:providers:kubernetes"}
    assert providers["demo-aws-us-east-1-provider"]["context"] == "prod-use1"
    assert providers["demo-aws-us-east-1-provider"]["enableServerSideApply"] in (True, "true")  # providers get strings
    assert len(providers) == len(files)
    assert set(endpoints) == {a["deployment_unit"] for a in plan["allocations"]}
    assert endpoints[plan["allocations"][0]["deployment_unit"]][0].startswith("http://")
    assert ".llm.svc:8000/v1" in endpoints[plan["allocations"][0]["deployment_unit"]][0]


def test_the_secret_comes_from_pulumi_secrets_only(mocks, three_cloud_plan):
    plan = _plan(three_cloud_plan)
    _run(plan)
    secrets = [a for a in mocks.created if a.typ == "kubernetes:core/v1:Secret"]
    assert len(secrets) == 4  # one per cluster: aws us-east-1 and us-west-2, gcp, azure
    for s in secrets:
        data = s.inputs["stringData"]
        assert SECRET_SIG in data, "the Secret's data must travel as a Pulumi secret"
        assert data["value"] == {"VLLM_API_KEY": API_KEY}
    for a in mocks.created:
        if a.typ != "kubernetes:core/v1:Secret" and a.typ.startswith("kubernetes:"):
            assert API_KEY not in repr(a.inputs)


def test_the_generated_project_runs_the_program(mocks, tmp_path, monkeypatch):
    """`hetinfra plan` of a kubernetes spec writes OUT/pulumi/kubernetes/, whose __main__ runs main()."""
    from click.testing import CliRunner

    from hetinfra.cli import cli

    repo = Path(__file__).resolve().parents[2]
    spec = yaml.safe_load((repo / "services" / "chat.yaml").read_text())
    spec["deploy"] = {"target": "kubernetes", "kubernetes": {"clusters": {"aws/us-east-1": {"context": "c1"}}}}
    spec.setdefault("planning", {})["confidence"] = "expected"  # the estimates' middle: chat's fleet on aws/us-east-1
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    res = CliRunner().invoke(cli, ["plan", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "out"),
                                   "--no-verify", "--no-baselines"])
    assert res.exit_code == 0, res.output
    project = tmp_path / "out" / "pulumi" / "kubernetes"
    assert (project / "__main__.py").read_text() == "from hetinfra.stacks.kubernetes import main\nmain()\n"
    assert "pulumi-kubernetes==" in (project / "requirements.txt").read_text()
    monkeypatch.chdir(project)
    pulumi.runtime.set_all_config({"hetinfra:apiKey": API_KEY}, secret_keys=["hetinfra:apiKey"])
    from hetinfra.stacks.kubernetes import main

    try:
        pulumi.runtime.test(main)()
    finally:
        pulumi.runtime.set_all_config({})  # leave no config to the next test
    assert [a.inputs["context"] for a in mocks.created if a.typ == "pulumi:providers:kubernetes"] == ["c1"]
    assert any(a.typ == "kubernetes:apps/v1:Deployment" for a in mocks.created)


def test_each_cluster_says_where_status_reads_and_keeps_its_namespace(mocks, three_cloud_plan, monkeypatch):
    """The ``clusters`` export (hetinfra apply records it in state.json for status/replan) and the
    namespace's ``retain_on_delete`` (`pulumi destroy` leaves what the cluster's owner put there)."""
    import hetinfra.stacks.kubernetes as program

    kept: dict[str, bool] = {}
    real = program._resource

    def spy(obj, name, opts):
        kept[obj["kind"]] = kept.get(obj["kind"], False) or bool(opts.retain_on_delete)
        return real(obj, name, opts)

    monkeypatch.setattr(program, "_resource", spy)
    plan = _plan(three_cloud_plan)
    clusters: dict = {}

    @pulumi.runtime.test
    def run():
        built = program.build(plan, FleetSecrets(api_key=pulumi.Output.secret(API_KEY)))
        clusters.update({c.key: c.cluster for c in built})

    run()
    assert clusters["aws-us-east-1"] == {"context": "prod-use1", "kubeconfig": None, "namespace": "llm"}
    assert len(clusters) == 4
    assert kept.pop("Namespace") is True and not any(kept.values())
