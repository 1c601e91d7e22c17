"""A single-allocation plan with its instance count set to N (figures recomputed): OUT N DEST"""
import json, sys
sys.path.insert(0, "/work/wt/heldout64")
from hetinfra.document.consistency import unit_cost
d = json.load(open(sys.argv[1] + "/plan.json")); n = int(sys.argv[2]); a = d["allocations"][0]
a.update(count=n, instances=n, cost_usd_per_hour=round(unit_cost(a["price_per_instance_usd_per_hour"], n, 1, None), 4))
d["models"][0]["cost_usd_per_hour"] = a["cost_usd_per_hour"]; d["cost_usd_per_hour"] = a["cost_usd_per_hour"]; d["gpus"] = n * a["gpus_per_instance"]
for k in ("by_model", "by_region"):
    for v in d["breakdown"][k].values():
        v.update(cost_usd_per_hour=a["cost_usd_per_hour"], gpus=d["gpus"], instances=n)
json.dump(d, open(sys.argv[3], "w"), indent=1); print(a["cost_usd_per_hour"])
