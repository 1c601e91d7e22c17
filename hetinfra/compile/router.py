"""Router weights: how a front router should split each model's traffic over the plan's endpoints.

``OUT/router/weights.json`` (``router_version`` 1)::

    {"router_version": 1, "service": "chat", "plan_cost_usd_per_hour": 6.589,
     "models": {"chat-8b": {
        "endpoints": {"<deployment unit>": {"cloud", "region", "gpu", "instance_type", "replicas",
                                            "target_qps_per_replica", "rps", "share"}},
        "classes": {"in<=250,out<=100": {"input_tokens": 250, "output_tokens": 100, "rate_rps": 2.4,
                                         "weights": {"<deployment unit>": 1.0}}},
        "target_qps_per_gpu": {"A10G": 3.1, "L40S": 5.2}}}}

``classes[...].weights`` is the plan's routing y[t,r,w] normalised per class (they sum to 1):
route a request by its size class, then pick an endpoint with these probabilities.
``endpoints[...].share`` is the endpoint's share of all the model's requests, for a router
that cannot classify. ``target_qps_per_gpu`` is SkyServe's per-accelerator target QPS, for a
service that spans several GPU types (the most conservative value where units of one GPU type
differ). Endpoint URLs are known only after deploy: ``hetinfra apply`` records them in
``OUT/state.json`` under the same unit names.
"""

from __future__ import annotations


from hetinfra.plan.plan_json import rounded

ROUTER_VERSION = 1


def router_weights(plan: dict) -> dict:
    units = {a["unit"]: a for a in plan["allocations"]}
    models: dict[str, dict] = {}
    for m in plan["models"]:
        name = m["name"]
        entry: dict = {"endpoints": {}, "classes": {}, "target_qps_per_gpu": {}}
        total = sum(f["rps"] for flows in plan["routing"].get(name, {}).values() for f in flows) or 0.0
        for a in plan["allocations"]:
            if a["model"] != name:
                continue
            entry["endpoints"][a["deployment_unit"]] = {
                "cloud": a["cloud"], "region": a["region"], "gpu": a["gpu"], "instance_type": a["instance_type"],
                "replicas": a["count"], "target_qps_per_replica": a.get("target_qps_per_replica"),
                "rps": a.get("routed_rps"), "share": rounded((a.get("routed_rps") or 0.0) / total, 6) if total else 0.0,
            }
            q = a.get("target_qps_per_replica")
            if q is not None:
                prev = entry["target_qps_per_gpu"].get(a["gpu"])
                entry["target_qps_per_gpu"][a["gpu"]] = q if prev is None else min(prev, q)
        for c in m["classes"]:
            flows = plan["routing"].get(name, {}).get(c["name"], [])
            served = sum(f["rps"] for f in flows)
            entry["classes"][c["name"]] = {
                "input_tokens": c["input_tokens"], "output_tokens": c["output_tokens"], "rate_rps": c["rate_rps"],
                "weights": {units[f["unit"]]["deployment_unit"]: rounded(f["rps"] / served, 6)
                            for f in flows if served > 0 and f["unit"] in units},
            }
        models[name] = entry
    return {"router_version": ROUTER_VERSION, "service": plan["service"],
            "plan_cost_usd_per_hour": plan.get("cost_usd_per_hour"), "models": models}
