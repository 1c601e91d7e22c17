"""Probe tool (stop 66): OUT/plan.json minus one replica (or the whole unit, with --whole) of UNIT, figures recomputed as
../heldout64/minimal_check.py does (hetinfra.sim.minimal's own removals); usage: less.py OUT UNIT DEST.json [--whole] [--times N]"""
import json, sys
from pathlib import Path
REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))
from hetinfra.sim.minimal import without_allocation, without_one_replica
from hetinfra.document.consistency import unit_cost

out, unit, dest = sys.argv[1:4]; whole = "--whole" in sys.argv
times = int(sys.argv[sys.argv.index("--times") + 1]) if "--times" in sys.argv else 1
d = json.loads((Path(out) / "plan.json").read_text())
for _ in range(times):
    d = (without_allocation if whole else without_one_replica)(d, unit)
    assert d is not None, "leaves a class with no unit"
d["allocations"] = [dict(a, cost_usd_per_hour=round(unit_cost(float(a["price_per_instance_usd_per_hour"]), int(a["instances"]),
                    int(a.get("nodes_per_replica") or 1), a.get("counts_by_period")), 4)) for a in d["allocations"]]
d["models"] = [dict(m, cost_usd_per_hour=round(sum(a["cost_usd_per_hour"] for a in d["allocations"] if a["model"] == m["name"]), 4)) for m in d["models"]]
d["cost_usd_per_hour"] = round(sum(a["cost_usd_per_hour"] for a in d["allocations"]), 4)
Path(dest).write_text(json.dumps(d, indent=1)); print(d["cost_usd_per_hour"])
