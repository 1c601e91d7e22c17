"""One endpoint per region on Kubernetes (issue 36): the gateway each cluster runs holds the plan's
routing for every origin and reaches every unit, its own cluster's by Service and the others' by
multi-cluster Services DNS. On loopback: the gateway.yaml of one region is run as written (its
command line parsed by the real `hetinfra gateway`), with the in-cluster URLs mapped to stand-in
backends in two "clusters" (two sets of 127.0.0.1 servers); the one endpoint serves requests routed
to both clusters, and replan reads its demand log."""

from __future__ import annotations

import csv
import shlex
from contextlib import ExitStack

import pytest
import yaml

from hetinfra.compile.artifacts import sky_units
from hetinfra.compile.kubernetes import render_clusters
from hetinfra.document import Plan
from hetinfra.price_feeds.network import continent_of
from tests.conftest import loopback_server
from tests.gateway.test_regions import ask, gateway, unit_backend
from tests.plan.test_origins import EU, US, atlantic

CLUSTERS = {"aws/us-east-1": "llm-us", "gcp/us-central1": "llm-us", "gcp/europe-west4": "llm-eu",
            "aws/eu-west-1": "llm-eu"}


@pytest.fixture(scope="module")
def two_clusters(tmp_path_factory):
    from click.testing import CliRunner

    from hetinfra.cli import cli

    spec = atlantic(eu_residency="continent")
    spec["deploy"] = {"target": "kubernetes", "kubernetes": {"clusters": {
        k: {"context": k.replace("/", "-"), "namespace": ns} for k, ns in CLUSTERS.items()}}}
    tmp = tmp_path_factory.mktemp("kube-regions")
    (tmp / "service.yaml").write_text(yaml.safe_dump(spec))
    res = CliRunner().invoke(cli, ["plan", str(tmp / "service.yaml"), "--no-verify", "--out", str(tmp / "out")])
    assert res.exit_code == 0, res.output
    plan = Plan.parse(__import__("json").loads((tmp / "out" / "plan.json").read_text()))
    rendered = render_clusters(plan.to_dict(), sky_units(plan, include_mixed=True))
    return tmp / "out", plan, rendered


def _gateway_argv(rendered: dict, cluster: str) -> list[str]:
    deployment = next(o for o in yaml.safe_load_all(rendered[cluster]["gateway.yaml"]) if o["kind"] == "Deployment")
    script = deployment["spec"]["template"]["spec"]["containers"][0]["command"][2]
    line = next(x for x in script.splitlines() if x.startswith("exec hetinfra gateway "))
    return shlex.split(line)[2:]  # after `exec hetinfra`: gateway PLAN args...


def test_each_regions_gateway_reaches_every_unit_and_exports_what_others_reach(two_clusters):
    _, plan, rendered = two_clusters
    units = {a.deployment_unit: f"{a.cloud}-{a.region}" for a in plan.allocations}
    assert len(set(units.values())) >= 2  # the plan spans clusters
    for cluster in rendered:
        argv = _gateway_argv(rendered, cluster)
        region = cluster.split("-", 1)[1]
        assert argv[argv.index("--region") + 1] == region and "--demand-log" in argv and "--no-demand-log" not in argv
        urls = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--endpoint")
        assert set(urls) == set(units)  # every unit of the plan, not only this cluster's
        for unit, url in urls.items():
            assert url.endswith(".svc:8000/v1") == (units[unit] == cluster), url  # others by clusterset.local
        exports = [o["metadata"]["name"] for o in yaml.safe_load_all(rendered[cluster]["gateway.yaml"])
                   if o["kind"] == "ServiceExport"]
        assert sorted(exports) == sorted(u for u, c in units.items() if c == cluster)


def test_one_endpoint_per_region_serves_both_clusters_and_replan_reads_its_log(two_clusters, tmp_path):
    from hetinfra.cli.gateway import gateway_command
    from hetinfra.document.crosscheck import declared_regions
    from hetinfra.gateway.table import parse_endpoint_overrides
    from hetinfra.replan.demand_log import apply_to_spec, observe_spec, read_demand_log
    from hetinfra.spec.load import load_spec

    out, plan, rendered = two_clusters
    home = next(c for c in rendered if c.endswith(US))
    argv = _gateway_argv(rendered, home)
    gateway_command.make_context("gateway", [str(out)] + argv[2:])  # the real CLI accepts the command line
    region = argv[argv.index("--region") + 1]
    cluster_of = {a.deployment_unit: f"{a.cloud}-{a.region}" for a in plan.allocations}
    with ExitStack() as stack:  # two "clusters": one loopback server per unit, grouped by cluster
        served = {u: stack.enter_context(loopback_server(unit_backend(u)))[1] + "/v1" for u in cluster_of}
        endpoints = {u: [served[u]] for u in parse_endpoint_overrides(
            [argv[i + 1] for i, a in enumerate(argv) if a == "--endpoint"])}
        with gateway(out, endpoints, region, tmp_path / "demand.csv") as url:
            local = ask(url, 12)
            from_eu = ask(url, 12, origin=EU)
    assert all(s == 200 for s, _ in local + from_eu)
    hit = {cluster_of[b] for _, b in local + from_eu}
    assert len(hit) >= 2, hit  # one endpoint, requests served in both clusters
    region_of = {a.deployment_unit: a.region for a in plan.allocations}
    assert {continent_of(region_of[b]) for _, b in from_eu} == {"Europe"}  # the EU row, in the EU cluster(s)
    with open(tmp_path / "demand.csv") as f:
        assert sorted(r["region"] for r in csv.DictReader(f)) == [EU] * 12 + [US] * 12
    log = read_demand_log(tmp_path / "demand.csv")
    spec, _, _ = load_spec(out.parent / "service.yaml")
    observed, _ = observe_spec(log, spec)
    assert set(observed["chat"].origins) == {EU, US}
    new, notes = apply_to_spec(spec, observed, declared_regions(plan))
    assert set(new.models[0].demand.origins) == {EU, US}
