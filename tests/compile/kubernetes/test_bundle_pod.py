"""A prefill/decode bundle on Kubernetes (hetinfra.compile.kubernetes.workloads._bundle_pod): one pod per
replica (its engines share a node's NVLink, as planned), a container per engine with its own GPUs and
port, the hop on the unit's port that the Service addresses; validated offline as every manifest is,
and a golden file."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest
import yaml

from hetinfra.compile.artifacts import sky_units
from hetinfra.compile.bundle import engines
from hetinfra.compile.kubernetes import render_clusters
from hetinfra.document import Plan
from tests.compile.kubernetes.validate import validate
from tests.compile.split_plan import UNIT, split_plan

GOLDEN = Path(__file__).with_name("golden") / "eks-bundle-2p1d"
KUBE = {"clusters": {}, "kubeconfig": None, "scaler": "hpa", "prometheus_url": "http://prom:9090"}


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    plan = split_plan("2P1D", target="kubernetes", kubernetes=KUBE)
    (files,) = render_clusters(plan, sky_units(Plan.parse(plan), include_mixed=True)).values()
    return files


def test_a_bundle_replica_is_one_pod_of_its_engines_and_the_hop(rendered):
    objs = [o for o in yaml.safe_load_all(rendered[f"units/{UNIT}.yaml"]) if o]
    for o in objs:
        validate(o)
    (dep,) = [o for o in objs if o["kind"] == "Deployment"]
    pod = dep["spec"]["template"]["spec"]
    unit = sky_units(Plan.parse(split_plan("2P1D")))[0]
    assert dep["spec"]["replicas"] == unit.replicas
    names = [c["name"] for c in pod["containers"]]
    assert names == ["prefill-0", "prefill-1", "decode-2", "hop"]
    gpus = [c["resources"]["limits"].get("nvidia.com/gpu", 0) for c in pod["containers"]]
    assert gpus == [2, 2, 4, 0] and sum(gpus) == unit.gpus_per_instance  # the node's GPUs, nothing else asks
    ports = [c["ports"][0]["containerPort"] for c in pod["containers"]]
    assert ports == [e.port for e in engines(unit)] + [unit.port] and len(set(ports)) == 4
    for c, e in zip(pod["containers"], engines(unit)):
        argv = shlex.split(c["command"][-1].removeprefix("exec "))
        assert argv[argv.index("--port") + 1] == str(e.port) and "--kv-transfer-config" in argv
    hop = pod["containers"][-1]["command"][-1]
    assert f"--endpoint {UNIT}/prefill=http://127.0.0.1:{unit.port + 1}/v1" in hop
    assert f"--endpoint {UNIT}=http://127.0.0.1:{unit.port + 3}/v1" in hop
    (svc,) = [o for f, t in rendered.items() for o in yaml.safe_load_all(t) if o and o["kind"] == "Service"
              and o["metadata"]["name"] == UNIT]
    assert svc["spec"]["ports"][0]["targetPort"] == "http"  # the hop's port, not an engine's


def test_golden(rendered):
    for fname in (f"units/{UNIT}.yaml",):
        path = GOLDEN / fname
        if os.environ.get("HETINFRA_UPDATE_GOLDEN") == "1":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(rendered[fname])
        assert path.read_text() == rendered[fname]
