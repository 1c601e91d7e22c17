"""h124's plan without its L4 unit and minus k A10G replicas (hetinfra.sim.minimal's own removals, figures recomputed as
minimal_check.py does), simulated on the 10 audit seeds at the plan's load and at 5x requests on seed 1032."""
import json, subprocess, sys, tempfile
from pathlib import Path
sys.path.insert(0, "/work/wt/heldout64b")
from hetinfra.sim.minimal import without_allocation, without_one_replica
exec(open("/work/ho64b/minimal_check.py").read().split("print(\"trim:")[0].split("out = Path")[0])  # imports only
from hetinfra.document.consistency import unit_cost
def refigure(d):
    d["allocations"] = [dict(a, cost_usd_per_hour=round(unit_cost(float(a["price_per_instance_usd_per_hour"]), int(a["instances"]),
                        int(a.get("nodes_per_replica") or 1), a.get("counts_by_period")), 4)) for a in d["allocations"]]
    d["models"] = [dict(m, cost_usd_per_hour=round(sum(a["cost_usd_per_hour"] for a in d["allocations"] if a["model"] == m["name"]), 4)) for m in d["models"]]
    d["cost_usd_per_hour"] = round(sum(a["cost_usd_per_hour"] for a in d["allocations"]), 4)
out = Path("/work/ho64b/h124-melange-v1-55rps-l4-a10g.out"); spec = "/work/ho64b/h124-melange-v1-55rps-l4-a10g.yaml"
doc = json.loads((out / "plan.json").read_text()); fid = doc["fidelity"]
k = int(sys.argv[1])
a10 = [a["unit"] for a in doc["allocations"] if "a10g" in a["unit"]][0]
l4 = [a["unit"] for a in doc["allocations"] if "l4-node" in a["unit"]][0]
d = without_allocation(doc, l4)
for _ in range(k):
    d = without_one_replica(d, a10)
refigure(d)
Path(f"/work/ho64b/h124_less/plan_minus{k}.json").write_text(json.dumps(d))
print("k", k, "cost", d["cost_usd_per_hour"], [ (a["unit"], a["count"]) for a in d["allocations"]], flush=True)
