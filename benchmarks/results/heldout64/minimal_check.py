"""(stop 62 copy of /work/ho60/minimal_check.py: this worktree's hetinfra, and the removal's figures
recomputed, since plan.json's reader refuses figures that do not add up.) By hand: each allocation of OUT/plan.json minus one replica (the trim's own without_one_replica / without_allocation),
simulated as `hetinfra simulate` at the plan's load on the decide seeds 1000, 1003 and audit seeds 1002, 1005; and the
spec's locality / spot rules (tests/plan/test_minimal.py's _broken_rules) on the smaller plan."""
import json, subprocess, sys, tempfile
from pathlib import Path
REPO = Path(__file__).resolve().parents[3]  # the checkout this file is in: its hetinfra, its tests, its venv
sys.path.insert(0, str(REPO))
from hetinfra.sim.minimal import without_allocation, without_one_replica
from hetinfra.spec.load import load_spec
from tests.plan.test_minimal import _broken_rules

out = Path(sys.argv[1]); spec_path = sys.argv[2]
doc = json.loads((out / "plan.json").read_text()); fid = doc["fidelity"]; spec = load_spec(Path(spec_path))[0]
exe = str(REPO / ".venv" / "bin" / "hetinfra")


def refigure(d):
    from hetinfra.document.consistency import unit_cost
    d["allocations"] = [dict(a, cost_usd_per_hour=round(unit_cost(float(a["price_per_instance_usd_per_hour"]), int(a["instances"]),
                        int(a.get("nodes_per_replica") or 1), a.get("counts_by_period")), 4)) for a in d["allocations"]]
    d["models"] = [dict(m, cost_usd_per_hour=round(sum(a["cost_usd_per_hour"] for a in d["allocations"] if a["model"] == m["name"]), 4))
                   for m in d["models"]]
    d["cost_usd_per_hour"] = round(sum(a["cost_usd_per_hour"] for a in d["allocations"]), 4)

print("trim:", json.dumps(fid["trim"]), "over-provisioning:", json.dumps(fid["over_provisioning"]["by_model"]))
for a in doc["allocations"]:
    for name, fn in (("one replica", without_one_replica), ("whole unit", without_allocation)):
        if name == "whole unit" and int(a["count"]) == 1:
            continue
        smaller = fn(doc, a["unit"])
        if smaller is None:
            print(f"{a['unit']} -{name}: leaves a class or an origin with no unit (a miss by definition)"); continue
        smaller["allocations"] = [dict(x, counts_by_period=[min(c, int(x["count"])) for c in x["counts_by_period"]])
                                  if x.get("counts_by_period") else x for x in smaller["allocations"]]  # the peak's fleet only
        refigure(smaller)  # the figures a removal changes (plan.json's reader checks they add up, since round nine)
        rules = _broken_rules(smaller, spec)
        res = []
        with tempfile.TemporaryDirectory() as tmp:
            p = Path(tmp) / "plan.json"; p.write_text(json.dumps(smaller))
            for s in (1000, 1003, 1002, 1005):
                r = subprocess.run([exe, "simulate", str(p), "--spec", spec_path, "--json", "--out", tmp + "/o", "--seed", str(s),
                                    "--requests", str(fid["requests"]), "--load", str(fid["load"]), "--burst-cv", str(fid["burst_cv"])],
                                   capture_output=True, text=True)
                if not r.stdout.strip():
                    res.append(f"seed {s}: exit {r.returncode} {r.stderr.strip()[-200:]}"); continue
                d = json.loads(r.stdout)
                if "models" not in d:
                    res.append(f"seed {s}: exit {r.returncode} {json.dumps(d.get('error'))[:300]}"); continue
                bad = [f"{m['model']} {100 * ((m['objective'].get('ratio') or float('inf')) - 1):+.1f}%" for m in d["models"] if not m["met"]]
                res.append(f"{s}:" + ("met" if not bad else "MISS " + ",".join(bad)))
        print(f"{a['unit']} (n={a['count']}) -{name}: rules broken {rules or 'none'}; " + "; ".join(res), flush=True)
