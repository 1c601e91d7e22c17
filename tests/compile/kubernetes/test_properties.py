"""For any unit a plan can hold (cloud, purchase option, TP/PP/DP layout, nodes, replicas, autoscaling,
scaler, gateway kind), the manifests validate and keep their invariants: a LeaderWorkerSet exactly
when a replica spans nodes, GPUs requested as planned, the pool on the unit's instance type and
purchase option with room for its autoscaling bound."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetinfra.compile.kubernetes.render import KubePlan, cluster_objects
from hetinfra.compile.unit import DeployedUnit
from hetinfra.plan.naming import unit_name
from tests.compile.kubernetes.validate import validate

OFFERS = {"aws": ("us-east-1", [("g6.xlarge", "L4", 1), ("p4d.24xlarge", "A100", 8), ("g6e.12xlarge", "L40S", 4)]),
          "gcp": ("us-central1", [("g2-standard-4", "L4", 1), ("a3-highgpu-8g", "H100", 8)]),
          "azure": ("eastus", [("Standard_NC24ads_A100_v4", "A100-80GB", 1),
                               ("Standard_NC96ads_A100_v4", "A100-80GB", 4)])}


@st.composite
def units(draw) -> DeployedUnit:
    cloud = draw(st.sampled_from(sorted(OFFERS)))
    region, offers = OFFERS[cloud]
    itype, gpu, gpus = draw(st.sampled_from(offers))
    nodes = draw(st.sampled_from([1, 1, 2, 4]))
    spot = draw(st.booleans())
    if nodes == 1:
        pp = draw(st.sampled_from([p for p in (1, 2) if gpus % p == 0]))
        eng = draw(st.sampled_from([e for e in (1, 2) if gpus % (pp * e) == 0]))
        tp = gpus // (pp * eng)
    else:
        pp, eng, tp = nodes, 1, gpus
    return DeployedUnit(name=unit_name("m", cloud, region, itype, spot=spot), service_model="m", source="org/m",
                   cloud=cloud, region=region, instance_type=itype, gpu=gpu, gpus_per_instance=gpus, tp=tp, pp=pp,
                   engines_per_instance=eng, replicas=draw(st.integers(1, 6)), spot=spot, precision="fp16",
                   max_model_len=4096, nodes=nodes, runtime="container", vllm_version="0.12.0",
                   target_qps_per_replica=draw(st.sampled_from([None, 1.5])))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unit=units(), scaler=st.sampled_from(["hpa", "keda"]),
       gateway=st.sampled_from(["hetinfra", "inference-extension"]))
def test_manifests_of_any_unit_validate(unit, scaler, gateway):
    plan = {"service": "svc", "deploy": {"gateway": {"port": 8080, "package": "hetinfra", "kind": gateway}}}
    kube = {"clusters": {}, "kubeconfig": None, "scaler": scaler, "prometheus_url": "http://prom:9090"}
    kp = KubePlan("svc", [unit], [], {"m": "m"}, kube, plan, plan["deploy"]["gateway"], 8000)
    files = cluster_objects(kp, unit.cloud, unit.region)
    objs = [o for f in files.values() for o in f]
    for o in objs:
        validate(o)
    (w,) = files[f"units/{unit.name}.yaml"][:1]
    assert w["kind"] == ("Deployment" if unit.num_nodes == 1 else "LeaderWorkerSet")
    pods = [w["spec"]["template"]] if w["kind"] == "Deployment" else \
        [w["spec"]["leaderWorkerTemplate"][k] for k in ("leaderTemplate", "workerTemplate")]
    if w["kind"] == "LeaderWorkerSet":
        assert w["spec"]["leaderWorkerTemplate"]["size"] == unit.num_nodes
    for pod in pods:
        c = pod["spec"]["containers"][0]
        assert c["resources"]["limits"]["nvidia.com/gpu"] == unit.gpus_per_instance
        assert pod["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"] == unit.instance_type
    assert ("replicas" in w["spec"]) == (not unit.autoscaling)  # an autoscaled count is its scaler's
    scalers = [o for o in objs if o["kind"] in ("HorizontalPodAutoscaler", "ScaledObject")]
    assert len(scalers) == (1 if unit.autoscaling else 0)
    for s in scalers:
        lo, hi = (s["spec"]["minReplicas"], s["spec"]["maxReplicas"]) if s["kind"] == "HorizontalPodAutoscaler" \
            else (s["spec"]["minReplicaCount"], s["spec"]["maxReplicaCount"])
        assert (lo, hi) == (unit.replicas, unit.max_replicas)
    pools = [o for o in objs if o["kind"] == "NodePool"]
    for p in pools:
        assert int(p["spec"]["limits"]["nvidia.com/gpu"]) == unit.gpus_per_instance * unit.num_nodes * unit.max_replicas
