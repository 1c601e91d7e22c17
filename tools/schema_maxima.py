"""Specs at the schema's own maxima, to time ``hetinfra plan`` on them (issue 36: "no input the
schema accepts runs plan past its budget"), and one step past each, which the spec refuses.

    .venv/bin/python tools/schema_maxima.py OUTDIR          # writes OUTDIR/<family>.yaml and <family>-past.yaml
    .venv/bin/python tools/schema_maxima.py OUTDIR --time   # and times `hetinfra plan` on each

Families: the largest histogram, the most explicit classes, the most models, the most variants (each
at hetinfra.spec.size.MAX_PLANNED_CLASSES, the bound on classes x variants over the models), and
every region of the embedded snapshot as an origin with locality. One 8B model over the three
clouds unless the family is about models, so the time measured is that of the dimension at its
maximum. tests/spec/test_size.py builds the same specs.
"""

from __future__ import annotations

import copy
import subprocess
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # price_feeds, beside hetinfra

from hetinfra.spec.size import MAX_PLANNED_CLASSES

SIDE = int(MAX_PLANNED_CLASSES ** 0.5)  # the largest square histogram: 32 x 32

HEAD = {"name": "maxima", "infrastructure": {"clouds": ["aws", "gcp", "azure"], "spot": False},
        "planning": {"objective": "min_cost", "headroom": 0.1}}


def _model(sizes: dict, rate_rps: float = 20, origins: dict | None = None) -> dict:
    demand = {"rate_rps": rate_rps, "sizes": sizes}
    if origins:
        demand["origins"] = origins
    return {"name": "chat-8b", "model": "llama-3.1-8b", "source": "meta-llama/Llama-3.1-8B-Instruct",
            "slo": {"ttft_ms": 2000, "tpot_ms": 120}, "demand": demand}


def histogram_spec(rows: int = SIDE, cols: int = SIDE) -> dict:
    """A ``rows`` x ``cols`` histogram, every bucket non-empty."""
    edges_in = [0] + [64 * (k + 1) for k in range(rows)]
    edges_out = [0] + [16 * (k + 1) for k in range(cols)]
    weights = [[1.0 + (i + j) % 3 for j in range(cols)] for i in range(rows)]
    sizes = {"histogram": {"input_edges": edges_in, "output_edges": edges_out, "weights": weights}}
    return {**HEAD, "models": [_model(sizes)]}


def classes_spec(n: int = MAX_PLANNED_CLASSES) -> dict:
    """``n`` explicit classes, each a distinct size."""
    classes = [{"name": f"c{k}", "input_tokens": 50 + 3 * k, "output_tokens": 20 + (k % 97) * 4, "share": 1.0}
               for k in range(n)]
    return {**HEAD, "models": [_model({"classes": classes})]}


def models_spec(models: int = 4, per_model: int = MAX_PLANNED_CLASSES // 4) -> dict:
    """``models`` models of ``per_model`` classes each (a histogram as square as it goes)."""
    rows = int(per_model ** 0.5)
    base = histogram_spec(rows, per_model // rows)["models"][0]
    return {**HEAD, "models": [{**copy.deepcopy(base), "name": f"chat-{k}"} for k in range(models)]}


VARIANTS = [{"name": "bf16", "precision": "bf16"},
            {"name": "fp8", "precision": "fp8", "source": "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic"},
            {"name": "int4", "precision": "int4", "source": "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16"}]


def variants_spec(per_variant: int = MAX_PLANNED_CLASSES // 3) -> dict:
    """One model in three variants, ``per_variant`` classes."""
    spec = classes_spec(per_variant)
    spec["models"][0]["variants"] = copy.deepcopy(VARIANTS)
    return spec


def regions() -> list[str]:
    from price_feeds.offers import load_embedded_snapshot

    return sorted({o.region for o in load_embedded_snapshot().offers})


def origins_spec(names: list[str] | None = None) -> dict:
    """Every region of the snapshot as an origin, SageServe locality on."""
    names = names if names is not None else regions()
    sizes = {"classes": [{"name": "chat", "input_tokens": 800, "output_tokens": 200, "share": 1.0}]}
    spec = {**HEAD, "models": [_model(sizes, origins={r: 1.0 for r in names})]}
    spec["planning"] = {**HEAD["planning"], "locality": 0.5}
    return spec


#: family -> (the spec at the maximum, the spec one step past it)
FAMILIES = {
    "histogram": (histogram_spec, lambda: histogram_spec(SIDE + 1, SIDE)),
    "classes": (classes_spec, lambda: classes_spec(MAX_PLANNED_CLASSES + 1)),
    "models": (models_spec, lambda: models_spec(5)),
    "variants": (variants_spec, lambda: variants_spec(MAX_PLANNED_CLASSES // 3 + 1)),
    "origins": (origins_spec, None),  # the regions are the snapshot's: no step past them
}


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    names = []
    for name, (at_max, past) in FAMILIES.items():
        for suffix, make in (("", at_max), ("-past", past)):
            if make is not None:
                (out / f"{name}{suffix}.yaml").write_text(yaml.safe_dump(make(), sort_keys=False))
                names.append(name + suffix)
    if "--time" not in argv:
        return 0
    exe = str(Path(sys.executable).with_name("hetinfra"))
    for name in names:
        t0 = time.perf_counter()
        done = subprocess.run([exe, "plan", str(out / f"{name}.yaml"), "--no-template-cache", "--json"],
                              capture_output=True, text=True)
        tail = (done.stderr.strip().splitlines() or [""])[-1][:150]
        print(f"{name:15s} exit {done.returncode}  {time.perf_counter() - t0:7.1f} s  {tail}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
