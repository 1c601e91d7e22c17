"""h108 probe: the plan rewritten as 7 x a3-highgpu-1g (H100 TP1, $10.9791/h each: a3-highgpu-4g's price / 4), routing unchanged (one unit)."""
import json, sys
sys.path.insert(0, "/work/wt/heldout64")
from hetinfra.document.consistency import unit_cost
d = json.load(open("h108-8b-rag-20k-p50.out/plan.json"))
n = int(sys.argv[1]) if len(sys.argv) > 1 else 7
a = d["allocations"][0]; t = d["templates"][0]
old_u, old_t = a["unit"], a["template"]
new_t = old_t.replace("a3-highgpu-4g|tp1x4", "a3-highgpu-1g|tp1x1"); new_u = old_u.replace("a3-highgpu-4g|tp1x4", "a3-highgpu-1g|tp1x1")
t.update(id=new_t, instance_type="a3-highgpu-1g", gpus_per_instance=1, engines_per_instance=1)
t["placement"]["stage_nodes"] = [{"instance_type": "a3-highgpu-1g", "gpu": "H100"}]
price = round(a["price_per_instance_usd_per_hour"] / 4, 4)
a.update(unit=new_u, template=new_t, instance_type="a3-highgpu-1g", gpus_per_instance=1, engines_per_instance=1, count=n, instances=n,
         price_per_instance_usd_per_hour=price, cost_usd_per_hour=round(unit_cost(price, n, 1, None), 4))
s = json.dumps(d).replace(old_u, new_u).replace(old_t, new_t); d = json.loads(s)
d["models"] = [dict(m, cost_usd_per_hour=a["cost_usd_per_hour"]) for m in d["models"]]
d["cost_usd_per_hour"] = a["cost_usd_per_hour"]; d["gpus"] = n
json.dump(d, open(f"h108_7x1g/plan{n}.json", "w"), indent=1)
