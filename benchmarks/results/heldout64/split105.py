"""h105 / h105b probe: OUT/plan.json's one unit split in two by class: N1 instances in us-east-1 serve only cls, N2 in us-east-2 only draft
(same template g6e.xlarge TP1, same price), so no 3k-token prefill lands on a replica decoding a 12-token answer."""
import json, sys, copy
sys.path.insert(0, "/work/wt/heldout64")
from hetinfra.document.consistency import unit_cost
out, dest, n1, n2 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])  # OUT DESTDIR N1 N2
d = json.load(open(out + "/plan.json"))
a = d["allocations"][0]; b = copy.deepcopy(a)
p = a["price_per_instance_usd_per_hour"]
a.update(count=n1, instances=n1, cost_usd_per_hour=round(unit_cost(p, n1, 1, None), 4), routed_rps=d["routing"]["dual"]["cls"][0]["rps"])
ub = a["unit"].replace("us-east-1", "us-east-2")
b.update(unit=ub, region="us-east-2", count=n2, instances=n2, cost_usd_per_hour=round(unit_cost(p, n2, 1, None), 4), routed_rps=d["routing"]["dual"]["draft"][0]["rps"],
         deployment_unit=b["deployment_unit"].replace("us-east-1", "us-east-2"), skypilot_task=b["skypilot_task"].replace("us-east-1", "us-east-2"))
d["allocations"] = [a, b]
d["routing"] = {"dual": {"cls": [{"unit": a["unit"], "share": 1.0, "rps": a["routed_rps"]}], "draft": [{"unit": ub, "share": 1.0, "rps": b["routed_rps"]}]}}
tot = round(a["cost_usd_per_hour"] + b["cost_usd_per_hour"], 4)
d["models"][0]["cost_usd_per_hour"] = tot; d["cost_usd_per_hour"] = tot; d["gpus"] = n1 + n2
d["breakdown"] = {"by_model": {"dual": {"cost_usd_per_hour": tot, "gpus": n1 + n2, "instances": n1 + n2}},
                  "by_region": {"aws/us-east-1": {"cost_usd_per_hour": a["cost_usd_per_hour"], "gpus": n1, "instances": n1, "models": ["dual"]},
                                "aws/us-east-2": {"cost_usd_per_hour": b["cost_usd_per_hour"], "gpus": n2, "instances": n2, "models": ["dual"]}}}
json.dump(d, open(f"{dest}/plan_{n1}_{n2}.json", "w"), indent=1)
print(tot)
