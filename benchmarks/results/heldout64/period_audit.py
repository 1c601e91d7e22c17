"""Audit each period's fleet of a profile plan on the audit seeds (hetinfra simulate OUT --period K)."""
import json, subprocess, sys, tempfile
from pathlib import Path
out, periods = sys.argv[1], [int(k) for k in sys.argv[2].split(",")]
seeds = [1000 + 3 * j + 2 for j in range(int(sys.argv[3]) if len(sys.argv) > 3 else 10)]
doc = json.load(open(f"{out}/plan.json")); fid = doc["fidelity"]
exe = str(Path(__file__).resolve().parents[3] / ".venv" / "bin" / "hetinfra")  # this checkout's
for k in periods:
    rows = {}
    for s in seeds:
        with tempfile.TemporaryDirectory() as tmp:
            p = subprocess.run([exe, "simulate", out, "--json", "--out", tmp, "--seed", str(s), "--period", str(k),
                                "--requests", str(fid["requests"]), "--load", str(fid["load"]),
                                "--burst-cv", str(fid["burst_cv"])], capture_output=True, text=True)
        if not p.stdout.strip():
            print(k, s, "ERROR", p.returncode, p.stderr.strip()[-300:]); continue
        d = json.loads(p.stdout)
        for m in d["models"]:
            r = m["objective"].get("ratio")
            rows.setdefault(m["model"], []).append((s, m["met"], r))
    for name, v in rows.items():
        met = sum(1 for _, ok, _ in v if ok)
        worst = max(v, key=lambda t: float("inf") if t[2] is None else t[2])
        print(f"period {k} {name:<10} met {met}/{len(v)} worst {100 * (worst[2] - 1) if worst[2] is not None else float('inf'):+.1f}% (seed {worst[0]})", flush=True)
