"""Names hetinfra derives from the service name fit where Kubernetes puts them: for any service name the
spec accepts (a DNS label of 1-63 characters, a letter first), every label value is at most 63
characters, every Service's and EC2NodeClass's name too (a Service name is a DNS-1035 label; Karpenter
labels its nodes with the node class's), every other object's name at most 253, and an endpoint
picker's reference names a Service that can exist. `<service>-gateway` of a 60-character service was
a 68-character Service and label value that `kubectl apply` refuses; `<service>-gpu` and
`<pool>-epp` likewise."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetinfra.compile.kubernetes.render import KubePlan, cluster_objects
from hetinfra.compile.unit import DeployedUnit
from hetinfra.plan.naming import unit_name

LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?\Z")
DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?\Z")
#: kinds whose name is used as a DNS label or a label value (at most 63)
SHORT = {"Service", "EC2NodeClass", "NodePool"}

#: a DNS label of any length 1-63, a letter first (long ones drawn as often as short)
SERVICE = st.integers(1, 63).flatmap(lambda n: st.builds(
    lambda first, middle, last: (first + middle + last)[:n],
    st.sampled_from("abcdefghijklmnopqrstuvwxyz"),
    st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=max(0, n - 2), max_size=max(0, n - 2)),
    st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789"))).filter(lambda s: DNS_LABEL.match(s))


def _unit(cloud: str) -> DeployedUnit:
    region, itype, gpu = {"aws": ("us-east-1", "g6.xlarge", "L4"), "gcp": ("us-central1", "g2-standard-4", "L4"),
                          "azure": ("eastus", "Standard_NC24ads_A100_v4", "A100-80GB")}[cloud]
    return DeployedUnit(name=unit_name("m", cloud, region, itype, spot=False), service_model="m", source="org/m",
                        cloud=cloud, region=region, instance_type=itype, gpu=gpu, gpus_per_instance=1, tp=1, pp=1,
                        engines_per_instance=1, replicas=1, spot=False, precision="fp16", max_model_len=4096, nodes=1,
                        runtime="container", vllm_version="0.12.0", target_qps_per_replica=None)


def _labels(obj, at=""):
    """Every (where, label value) of ``obj``: metadata labels, selectors and matchLabels."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in ("labels", "matchLabels", "nodeSelector") and isinstance(v, dict):
                yield from ((f"{at}.{k}.{lk}", lv) for lk, lv in v.items() if isinstance(lv, str))
            elif k == "selector" and isinstance(v, dict) and all(isinstance(x, str) for x in v.values()):
                yield from ((f"{at}.selector.{lk}", lv) for lk, lv in v.items())
            else:
                yield from _labels(v, f"{at}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _labels(v, f"{at}[{i}]")


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(service=SERVICE, cloud=st.sampled_from(["aws", "gcp", "azure"]),
       gateway=st.sampled_from(["hetinfra", "inference-extension"]))
def test_every_name_derived_from_the_service_fits_kubernetes(service, cloud, gateway):
    unit = _unit(cloud)
    plan = {"service": service, "deploy": {"gateway": {"port": 8080, "package": "hetinfra", "kind": gateway}}}
    kube = {"clusters": {}, "kubeconfig": None, "scaler": "hpa", "prometheus_url": "http://prom:9090"}
    kp = KubePlan(service, [unit], [], {"m": "m"}, kube, plan, plan["deploy"]["gateway"], 8000)
    objs = [o for f in cluster_objects(kp, unit.cloud, unit.region).values() for o in f]
    for o in objs:
        name = o["metadata"]["name"]
        limit = 63 if o["kind"] in SHORT else 253
        assert len(name) <= limit, f"{o['kind']} {name!r} is {len(name)} characters (at most {limit})"
        for where, value in _labels(o):
            assert LABEL_VALUE.match(value), f"{o['kind']} {name}{where}: {value!r} is not a label value"
        ref = o.get("spec", {}).get("endpointPickerRef")
        if ref:
            assert DNS_LABEL.match(ref["name"]), f"endpoint picker Service {ref['name']!r}"
        nc = o.get("spec", {}).get("template", {}).get("spec", {}).get("nodeClassRef")
        if nc:
            assert len(nc["name"]) <= 63


def test_a_short_service_keeps_its_names():
    unit = _unit("aws")
    plan = {"service": "chat", "deploy": {"gateway": {"port": 8080, "package": "hetinfra", "kind": "hetinfra"}}}
    kube = {"clusters": {}, "kubeconfig": None, "scaler": "hpa", "prometheus_url": "http://prom:9090"}
    kp = KubePlan("chat", [unit], [], {"m": "m"}, kube, plan, plan["deploy"]["gateway"], 8000)
    names = {o["metadata"]["name"] for f in cluster_objects(kp, "aws", "us-east-1").values() for o in f}
    assert {"chat-gateway", "chat-gpu"} <= names
