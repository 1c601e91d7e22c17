"""Probe tool (stop 67): a plan.json with UNIT's replica count raised by N (the inverse of ../heldout66/less.py; routing shares
kept, so the added replicas share the unit's traffic), costs recomputed so that plan.json's reader accepts them.
usage: more.py PLAN.json UNIT N DEST.json"""
import json, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from hetinfra.document.consistency import unit_cost

src, unit, n, dest = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
doc = json.loads(Path(src).read_text())
for a in doc["allocations"]:
    if a["unit"] == unit:
        a["count"] += n; a["instances"] += n
    a["cost_usd_per_hour"] = round(unit_cost(float(a["price_per_instance_usd_per_hour"]), int(a["instances"]),
                                             int(a.get("nodes_per_replica") or 1), a.get("counts_by_period")), 4)
for m in doc["models"]:
    m["cost_usd_per_hour"] = round(sum(a["cost_usd_per_hour"] for a in doc["allocations"] if a["model"] == m["name"]), 4)
doc["cost_usd_per_hour"] = round(sum(a["cost_usd_per_hour"] for a in doc["allocations"]), 4)
doc["gpus"] = sum(a["instances"] * a["gpus_per_instance"] for a in doc["allocations"])
Path(dest).write_text(json.dumps(doc, indent=1)); print(doc["cost_usd_per_hour"], doc["gpus"])
