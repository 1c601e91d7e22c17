"""Probe tool (stop 66): BASE_OUT's model TARGET replaced by the units of several donor plans (each DONOR_OUT:MODEL), renamed
to TARGET; donors' units must differ in region (unit ids carry the region, template ids do not: a template's rates are the
union of the donors'; plan.json's breakdown is left as the base's). usage: graft2.py BASE_OUT TARGET DEST.json DONOR_OUT:MODEL..."""
import json, sys, copy
from pathlib import Path
REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))
from hetinfra.document.consistency import unit_cost
base, target, dest = sys.argv[1:4]
d = json.loads((Path(base) / "plan.json").read_text())
slug = next(m["slug"] for m in d["models"] if m["name"] == target)
allocs = [a for a in d["allocations"] if a["model"] != target]; routing = {}; temps = {}
for spec in sys.argv[4:]:
    out, dm = spec.rsplit(":", 1); g = json.loads((Path(out) / "plan.json").read_text())
    ren = lambda s: target + s[s.index("|"):] if "|" in s else s
    dslug = next(m["slug"] for m in g["models"] if m["name"] == dm)
    for a in g["allocations"]:
        if a["model"] != dm: continue
        b = copy.deepcopy(a); b.update(unit=ren(a["unit"]), template=ren(a["template"]), model=target)
        for k in ("deployment_unit", "skypilot_task"):
            if b.get(k): b[k] = b[k].replace(dslug, slug, 1)
        allocs.append(b)
    for cls, rows in g["routing"][dm].items():
        routing.setdefault(cls, []).extend(dict(r, unit=ren(r["unit"])) for r in rows)
    for t in g["templates"]:
        if t["model"] != dm: continue
        t2 = dict(copy.deepcopy(t), id=ren(t["id"]), model=target)
        if t2["id"] in temps:
            for k, v in t2.items():
                if isinstance(v, dict) and isinstance(temps[t2["id"]].get(k), dict): temps[t2["id"]][k].update(v)
        else: temps[t2["id"]] = t2
d["allocations"] = allocs; d["routing"] = dict({k: v for k, v in d["routing"].items() if k != target}, **{target: routing})
d["templates"] = [t for t in d["templates"] if t["model"] != target] + list(temps.values())
for a in d["allocations"]:
    a["cost_usd_per_hour"] = round(unit_cost(float(a["price_per_instance_usd_per_hour"]), int(a["instances"]), int(a.get("nodes_per_replica") or 1), a.get("counts_by_period")), 4)
d["models"] = [dict(m, cost_usd_per_hour=round(sum(a["cost_usd_per_hour"] for a in d["allocations"] if a["model"] == m["name"]), 4)) for m in d["models"]]
d["cost_usd_per_hour"] = round(sum(a["cost_usd_per_hour"] for a in d["allocations"]), 4)
Path(dest).write_text(json.dumps(d, indent=1)); print(d["cost_usd_per_hour"], sum(int(a["instances"]) * int(a["gpus_per_instance"]) for a in d["allocations"]))
