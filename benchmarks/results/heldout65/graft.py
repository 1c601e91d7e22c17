"""Probe tool (stop 65): a plan for spec A's model made of units planned for other models of a donor plan.

usage: graft.py BASE_OUT DONOR_OUT TARGET_MODEL DONOR_MODELS(comma) DEST.json [unit=count ...]
BASE_OUT/plan.json (planned for the user's spec) keeps its models[], inputs and fidelity; its allocations, routing and templates of
TARGET_MODEL are replaced by DONOR_OUT's units of DONOR_MODELS, renamed to TARGET_MODEL (same instance, GPU, layout, price, engine
flags; each donor class keeps its routing, so class names must match the target's). unit=count overrides a unit's replica count
(donor unit id). Costs, GPUs and the breakdown are recomputed so that plan.json's reader accepts the figures."""
import json, sys, copy
from pathlib import Path
REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))
from hetinfra.document.consistency import unit_cost

base, donor, target, dmodels, dest = sys.argv[1:6]
counts = dict(kv.split("=", 1) for kv in sys.argv[6:])
d = json.loads((Path(base) / "plan.json").read_text()); g = json.loads((Path(donor) / "plan.json").read_text())
dm = dmodels.split(",")
ren = lambda s: target + s[s.index("|"):] if "|" in s else s
slug = next(m["slug"] for m in d["models"] if m["name"] == target)
allocs = [a for a in d["allocations"] if a["model"] != target]
for a in g["allocations"]:
    if a["model"] not in dm: continue
    b = copy.deepcopy(a); n = int(counts.get(a["unit"], a["count"]))
    dslug = next(m["slug"] for m in g["models"] if m["name"] == a["model"])
    b.update(unit=ren(a["unit"]), template=ren(a["template"]), model=target, count=n, instances=n * int(a.get("nodes_per_replica") or 1))
    for k in ("deployment_unit", "skypilot_task"):
        if b.get(k): b[k] = b[k].replace(dslug, slug, 1)
    allocs.append(b)
d["allocations"] = allocs
routing = {k: v for k, v in d["routing"].items() if k != target}
routing[target] = {}
for m in dm:
    for cls, rows in g["routing"][m].items():
        routing[target].setdefault(cls, []).extend(dict(r, unit=ren(r["unit"])) for r in rows)
d["routing"] = routing
d["templates"] = [t for t in d["templates"] if t["model"] != target] + [dict(copy.deepcopy(t), id=ren(t["id"]), model=target) for t in g["templates"] if t["model"] in dm]
for a in d["allocations"]:
    a["cost_usd_per_hour"] = round(unit_cost(float(a["price_per_instance_usd_per_hour"]), int(a["instances"]), int(a.get("nodes_per_replica") or 1), a.get("counts_by_period")), 4)
d["models"] = [dict(m, cost_usd_per_hour=round(sum(a["cost_usd_per_hour"] for a in d["allocations"] if a["model"] == m["name"]), 4)) for m in d["models"]]
d["cost_usd_per_hour"] = round(sum(a["cost_usd_per_hour"] for a in d["allocations"]), 4)
gp = lambda a: int(a["instances"]) * int(a["gpus_per_instance"])
d["gpus"] = sum(gp(a) for a in d["allocations"])
bm, br = {}, {}
for a in d["allocations"]:
    x = bm.setdefault(a["model"], {"cost_usd_per_hour": 0.0, "gpus": 0, "instances": 0})
    x["cost_usd_per_hour"] = round(x["cost_usd_per_hour"] + a["cost_usd_per_hour"], 4); x["gpus"] += gp(a); x["instances"] += int(a["instances"])
    y = br.setdefault(f"{a['cloud']}/{a['region']}", {"cost_usd_per_hour": 0.0, "gpus": 0, "instances": 0, "models": []})
    y["cost_usd_per_hour"] = round(y["cost_usd_per_hour"] + a["cost_usd_per_hour"], 4); y["gpus"] += gp(a); y["instances"] += int(a["instances"])
    if a["model"] not in y["models"]: y["models"].append(a["model"])
d["breakdown"] = dict(d["breakdown"], by_model=bm, by_region=br)
Path(dest).write_text(json.dumps(d, indent=1))
print(d["cost_usd_per_hour"], d["gpus"])
