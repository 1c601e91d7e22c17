"""Probe tool (stop 66): merge allocations of a grafted plan.json that repeat one unit (two donor models on one template):
one allocation with the summed replica count (or COUNT, where the plan then has one allocation); routing already names the unit.
usage: merge_units.py PLAN.json [COUNT]"""
import json, sys
from pathlib import Path
REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))
from hetinfra.document.consistency import unit_cost
p = Path(sys.argv[1]); d = json.loads(p.read_text()); out = {}
for a in d["allocations"]:
    if a["unit"] in out:
        b = out[a["unit"]]; b["count"] += a["count"]; b["instances"] += a["instances"]
        if a.get("max_model_len") and b.get("max_model_len"): b["max_model_len"] = max(a["max_model_len"], b["max_model_len"])
        if "routed_rps" in b and "routed_rps" in a: b["routed_rps"] = round(b["routed_rps"] + a["routed_rps"], 6)
    else:
        out[a["unit"]] = dict(a)
if len(sys.argv) > 2:
    assert len(out) == 1, "COUNT needs a plan of one allocation"
    b = next(iter(out.values())); n = int(sys.argv[2]); b.update(count=n, instances=n * int(b.get("nodes_per_replica") or 1))
for b in out.values():
    b["cost_usd_per_hour"] = round(unit_cost(float(b["price_per_instance_usd_per_hour"]), int(b["instances"]), int(b.get("nodes_per_replica") or 1), b.get("counts_by_period")), 4)
d["allocations"] = list(out.values())
d["models"] = [dict(m, cost_usd_per_hour=round(sum(a["cost_usd_per_hour"] for a in d["allocations"] if a["model"] == m["name"]), 4)) for m in d["models"]]
d["cost_usd_per_hour"] = round(sum(a["cost_usd_per_hour"] for a in d["allocations"]), 4)
p.write_text(json.dumps(d, indent=1)); print(d["cost_usd_per_hour"], sum(a["instances"] for a in d["allocations"]))
