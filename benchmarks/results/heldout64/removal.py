"""Write OUT/plan.json minus one replica (or the whole unit) of UNIT, figures recomputed as minimal_check.py does: OUT UNIT one|whole DEST"""
import json, sys
from pathlib import Path
sys.path.insert(0, "/work/wt/heldout64"); sys.argv_saved = list(sys.argv)
from hetinfra.sim.minimal import without_allocation, without_one_replica
from hetinfra.document.consistency import unit_cost
out, unit, kind, dest = sys.argv[1:5]
doc = json.loads((Path(out) if out.endswith(".json") else Path(out) / "plan.json").read_text())
smaller = (without_one_replica if kind == "one" else without_allocation)(doc, unit)
smaller["allocations"] = [dict(a, cost_usd_per_hour=round(unit_cost(float(a["price_per_instance_usd_per_hour"]), int(a["instances"]),
                          int(a.get("nodes_per_replica") or 1), a.get("counts_by_period")), 4)) for a in smaller["allocations"]]
smaller["models"] = [dict(m, cost_usd_per_hour=round(sum(a["cost_usd_per_hour"] for a in smaller["allocations"] if a["model"] == m["name"]), 4)) for m in smaller["models"]]
smaller["cost_usd_per_hour"] = round(sum(a["cost_usd_per_hour"] for a in smaller["allocations"]), 4)
Path(dest).write_text(json.dumps(smaller)); print(smaller["cost_usd_per_hour"])
