"""Issue 38's acceptance through `hetinfra plan` itself: a spec with adapters (benchmarks/specs/lora-50.yaml,
lora-50-ranks.yaml) planned three ways, each by the CLI, and the GPU and cost ratios of the first to the
other two:

* **placed**: the spec as written (the solver places each adapter, rank-aware slot tiers);
* **everywhere**: the same spec with ``planning.adapter_placement: everywhere`` (every replica holds
  every adapter of its base: KServe's static mode);
* **per adapter**: one deployment per adapter (each adapter's base copied as a model of its own whose
  whole demand names that adapter), planned with ``--no-verify``: verification only adds replicas to a
  plan that misses, so its GPUs are a lower bound and the ratio against it an upper bound.

    .venv/bin/python -m tools.lora_acceptance benchmarks/specs/lora-50.yaml [--work DIR] [--exe PATH]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml


def everywhere_spec(text: str) -> str:
    """The spec with every adapter on every replica of its base."""
    text = re.sub(r"^name: (\S+)", r"name: \1-everywhere", text, count=1, flags=re.M)
    if "\nplanning:\n" in text:
        return text.replace("\nplanning:\n", "\nplanning:\n  adapter_placement: everywhere\n", 1)
    return text + "planning:\n  adapter_placement: everywhere\n"


def per_adapter_spec(text: str) -> str:
    """One model per adapter: its base copied, at the adapter's rate, all its requests naming it."""
    spec = yaml.safe_load(text)
    bases = {m["name"]: m for m in spec["models"]}
    models, adapters = [], []
    for a in spec["adapters"]:
        base = bases[a["base"]]
        rate = base["demand"]["rate_rps"] * a["demand"]["share"] if "share" in a["demand"] else a["demand"]["rate_rps"]
        models.append(dict(base, name=f"{base['name']}-{a['name']}", demand=dict(base["demand"], rate_rps=rate)))
        adapters.append(dict(a, base=models[-1]["name"], demand={"share": 1.0}))
    spec.update(name=f"{spec['name']}-per-adapter", models=models, adapters=adapters)
    return yaml.safe_dump(spec, sort_keys=False)


def plan(exe: str, spec: Path, out: Path, *extra: str) -> dict:
    p = subprocess.run([exe, "plan", str(spec), "--out", str(out), "--no-baselines", *extra], capture_output=True,
                       text=True)
    if p.returncode != 0:
        raise SystemExit(f"{spec}: hetinfra plan exited {p.returncode}: {p.stderr.strip()[-400:]}")
    doc = json.loads((out / "plan.json").read_text())
    fid = doc.get("fidelity") or {}
    return {"gpus": doc["gpus"], "usd_per_hour": doc["cost_usd_per_hour"],
            "verified_met": fid.get("met") if fid.get("verified") else None,
            "confirmed": (fid.get("confirmation") or {}).get("met")}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("spec", type=Path)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--exe", default=str(Path(sys.executable).with_name("hetinfra")))
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="lora-acceptance-"))
    work.mkdir(parents=True, exist_ok=True)
    text = args.spec.read_text()
    (work / "everywhere.yaml").write_text(everywhere_spec(text))
    (work / "per-adapter.yaml").write_text(per_adapter_spec(text))
    placed = plan(args.exe, args.spec, work / "placed")
    everywhere = plan(args.exe, work / "everywhere.yaml", work / "everywhere")
    per = plan(args.exe, work / "per-adapter.yaml", work / "per-adapter", "--no-verify")
    return {"placed": placed, "everywhere": everywhere, "per_adapter_lower_bound": per,
            "gpu_ratio_vs_everywhere": round(placed["gpus"] / everywhere["gpus"], 4),
            "gpu_ratio_vs_per_adapter": round(placed["gpus"] / per["gpus"], 4),
            "cost_ratio_vs_everywhere": round(placed["usd_per_hour"] / everywhere["usd_per_hour"], 4),
            "cost_ratio_vs_per_adapter": round(placed["usd_per_hour"] / per["usd_per_hour"], 4)}


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
