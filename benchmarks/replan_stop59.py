"""Held-out audit of `hetinfra replan` as cron runs it (stop 59), every scenario in one command (not a test).

    HETINFRA_SHARED=/work/shared .venv/bin/python benchmarks/replan_stop59.py [WORKDIR]   # ~3 min on 2 cores

Offline throughout: --no-refresh, offers files (--feeds PATH), --caps files, demand logs written here
(evenly spaced requests at the declared rate x a factor, sizes drawn as the spec declares them, origins
by share), state.json made by hand as `apply` records it. A proposal is judged by `simulate --check` on
seeds 9101-9105 (verification uses 1000-1016), and "applied" by copying OUT/proposed/plan.json into an
OUT of its own (a deployment made by hand). The held-out specs ho-trio and ho-spotcap are read from the
appendix of benchmarks/results/replan_stop59.txt (one copy of their text). Prints a transcript.
"""

from __future__ import annotations

import csv
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXE = str(Path(sys.executable).with_name("hetinfra"))
RESULTS = REPO / "benchmarks/results/replan_stop59.txt"
SEEDS = (9101, 9102, 9103, 9104, 9105)
W = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="replan59-")).resolve()


def sh(*args, show: bool = True) -> tuple[int, str]:
    """Run hetinfra with ``args``; print the command, its output (less feed/demand detail) and exit code."""
    p = subprocess.run([EXE, *map(str, args)], capture_output=True, text=True)
    out = "\n".join(x for x in (p.stdout + p.stderr).splitlines() if not x.startswith(("feeds:", "demand:")))
    if show:
        print(f"$ hetinfra {' '.join(map(str, args))}\n{out}\n[exit {p.returncode}]\n")
    return p.returncode, out


def spec_texts() -> dict[str, str]:
    """The held-out specs, from the results file's appendix (a '=== <name>.yaml' line, then its text)."""
    parts = re.split(r"^=== (\S+\.yaml)\n", RESULTS.read_text().split("APPENDIX", 1)[1], flags=re.M)
    return {parts[k]: parts[k + 1].split("\n===", 1)[0] for k in range(1, len(parts), 2)}


def scaled(src: Path, dst: Path, f: float, models: tuple[str, ...] = (), extra: str = "") -> Path:
    """``src`` with the demand.rate_rps of ``models`` (all when empty) times ``f``; ``extra`` appended to planning."""
    cur, out = None, []
    for line in src.read_text().splitlines(keepends=True):
        if line.startswith("  - name:"):
            cur = line.split(":", 1)[1].strip()
        m = re.match(r"(\s*rate_rps: )([0-9.]+)(.*)", line)
        if m and (not models or cur in models):
            line = f"{m.group(1)}{float(m.group(2)) * f:g}{m.group(3)}\n"
        out.append(line + (extra if line.startswith("planning:") else ""))
    dst.write_text("".join(out))
    return dst


def demand_log(spec: Path, path: Path, hours: float, mult: dict[str, float]) -> Path:
    """Requests evenly spaced at rate x mult per model, ending at the last 5-minute boundary; sizes by share
    (a histogram bucket drawn uniform inside, as the simulator draws it), origins by share."""
    import yaml

    end, rng, rows = time.time() // 300 * 300, random.Random(59), []
    for m in yaml.safe_load(spec.read_text())["models"]:
        d, rate = m["demand"], m["demand"]["rate_rps"] * mult.get(m["name"], 1.0)
        if "classes" in d["sizes"]:
            sizes = [(((c["input_tokens"],) * 2, (c["output_tokens"],) * 2), c["share"]) for c in d["sizes"]["classes"]]
        else:
            h = d["sizes"]["histogram"]
            e, o, tot = h["input_edges"], h["output_edges"], sum(map(sum, h["weights"]))
            sizes = [(((e[i] + 1, e[i + 1]), (o[j] + 1, o[j + 1])), w / tot)
                     for i, r in enumerate(h["weights"]) for j, w in enumerate(r) if w]
        origins = [(k, v["share"] if isinstance(v, dict) else v) for k, v in (d.get("origins") or {"": 1.0}).items()]
        for i in range(int(hours * 3600 * rate)):
            (a, b), reg = _pick(sizes, i), _pick(origins, i)
            rows.append((end - hours * 3600 + (i + 0.5) / rate, m["name"], rng.randint(*a), rng.randint(*b), reg))
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["timestamp", "model", "input_tokens", "output_tokens", "region"])
        w.writerows((f"{t:.3f}", *r) for t, *r in sorted(rows))
    return path


def _pick(items: list[tuple], i: int):
    """The value whose cumulative share covers the golden-ratio point of ``i``: shares kept, no clumping."""
    x, acc, tot = (i * 0.6180339887) % 1.0, 0.0, sum(share for _, share in items)
    for value, share in items:
        acc += share / tot
        if x < acc:
            return value
    return items[-1][0]


def offers(dst: Path, gpu: str | None = None, f: float = 1.0, drop: tuple[str, str, str] | None = None) -> Path:
    """The embedded snapshot with ``gpu``'s prices x ``f``, less the offer ``drop`` (cloud, region, type)."""
    rows = list(csv.DictReader(open(REPO / "price_feeds/data/offers_snapshot.csv")))
    rows = [r for r in rows if (r["cloud"], r["region"], r["instance_type"]) != drop]
    for r in rows:
        for k in ("price_per_hour", "spot_price_per_hour"):
            if r["gpu"] == gpu and r[k]:
                r[k] = f"{float(r[k]) * f:.6g}"
    with open(dst, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return dst


def sims(plan: Path, *extra) -> None:
    """``simulate --check`` on the audit seeds: per model met and worst ratio, and the exit code."""
    print(f"simulate {plan.relative_to(W)} {' '.join(map(str, extra))} --check, seeds {SEEDS[0]}-{SEEDS[-1]}:")
    for k in SEEDS:
        p = subprocess.run([EXE, "simulate", plan, "--seed", str(k), "--check", "--json", "--out", W / "sim",
                            *map(str, extra)], capture_output=True, text=True)
        d = json.loads(p.stdout) if p.stdout.strip() else {}
        got = " ".join(f"{m['model']}={'met' if m['objective']['met'] else 'MISS'}({m['objective']['ratio']:.3f})"
                       for m in d.get("models", [])) or (d.get("error") or {}).get("message", p.stderr.strip()[:200])
        print(f"  seed {k}: exit {p.returncode}; {got}")
    print()


def applied(out: Path, name: str) -> Path:
    """OUT/proposed/plan.json as a deployment of its own (its plan.json copied into W/name)."""
    dst = W / name
    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir()
    shutil.copy(out / "proposed/plan.json", dst / "plan.json")
    return dst


def this_run(out: Path, args: list) -> dict | None:
    """The plan.json a capped run leaves in OUT (its last stage's, as replan --apply writes it); None: no change."""
    from hetinfra.replan.safe import stage_plan

    d = json.loads(subprocess.run([EXE, "replan", *map(str, args), "--json"], capture_output=True, text=True).stdout)
    if d["exit_code"] != 10:
        return None
    running = json.loads((out / "plan.json").read_text())["allocations"]
    counts = {a["unit"]: a["count"] for a in running}
    for line in d["this_run"]:
        counts.update({m[1]: int(m[3]) for m in re.finditer(r"(\S+) (\d+) -> (\d+)", line.split(":", 1)[1])})
    return stage_plan(json.loads((out / "proposed/plan.json").read_text()), running, counts)


def cron_runs(out: Path, spec: Path, *extra) -> None:
    """Hourly runs, each applied as far as the cut cap lets it (its stage plan becomes the next OUT):
    the fleet's $/h after each run, until a run proposes nothing."""
    from hetinfra.compile.artifacts import write_plan
    from hetinfra.document import Plan

    costs, base = [_cost(out)], out
    for k in range(1, 6):
        doc = this_run(out, [spec, "--state", out, "--no-refresh", *extra])
        if doc is None:
            break
        out = base.with_name(f"{base.name}-run{k}")
        out.mkdir(exist_ok=True)
        write_plan(out, Plan.parse(doc, out / "plan.json"))
        costs.append(_cost(out))
    print("cron runs applied as capped, $/h after each:", " -> ".join(costs), "\n")


def state_json(out: Path, spec: Path) -> None:
    """OUT/state.json as `apply --target pulumi` records what runs (no clouds here)."""
    from hetinfra.plan.plan_json import service_id

    plan = json.loads((out / "plan.json").read_text())
    (out / "state.json").write_text(json.dumps({
        "state_version": 1, "service": plan["service"], "service_id": service_id(plan["service"], spec),
        "allocations": [{**a, "path": "pulumi"} for a in plan["allocations"]]}, indent=1))


def fresh(name: str, spec: Path) -> tuple[Path, Path]:
    """W/name/spec.yaml (a copy of ``spec``) planned into W/name/out."""
    d = W / name
    d.mkdir(parents=True, exist_ok=True)
    shutil.copy(spec, d / "spec.yaml")
    sh("plan", d / "spec.yaml", "--out", d / "out", "--no-baselines", show=False)
    return d / "spec.yaml", d / "out"


def _cost(out: Path) -> str:
    return f"{json.loads((out / 'plan.json').read_text())['cost_usd_per_hour']:.2f}"


def s1_nothing_changed(specs: dict[str, Path]) -> None:
    print("## 1. Nothing changed: replan right after plan, twice (and against a hand-made state.json)\n")
    for name, src in specs.items():
        spec, out = fresh(f"s1-{name}", src)
        sh("replan", spec, "--state", out, "--no-refresh")
        sh("replan", spec, "--state", out, "--no-refresh")
    spec, out = fresh("s1-state", specs["multi-region"])
    state_json(out, spec)
    sh("replan", spec, "--state", out, "--no-refresh")
    log = demand_log(spec, W / "s1-state/same.csv", 3, {})
    sh("replan", spec, "--state", out, "--no-refresh", "--demand-log", log, "--min-history-h", 2, "-v")
    sims(out / "plan.json", "--load", 1.32)  # the running fleet at the new promise: 20 x 1.1 x 1.2 req/s


def s2_traffic_up(specs: dict[str, Path]) -> None:
    print("## 2. Traffic up for one model (spec edited in place, as an operator does; then a demand log)\n")
    for name, model, factors in (("multi-region", "chat-8b", (1.1, 1.5, 1.65, 2)),
                                 ("ho-trio", "rag-32b", (2,)), ("ho-trio", "helper-phi4", (1.5,)),
                                 ("ho-spotcap", "big-70b", (2,))):
        spec, out = fresh(f"s2-{name}-{model}", specs[name])
        for f in factors:
            scaled(specs[name], spec, f, (model,))
            if sh("replan", spec, "--state", out, "--no-refresh", "-v")[0] == 10:
                sims(out / "proposed/plan.json", "--load", 1.2)
                again = applied(out, f"s2-{name}-{model}-x{f}-applied")
                sh("replan", spec, "--state", again, "--no-refresh")
                if f == 1.1:  # the flap back: the fleet it replaced meets 22 req/s
                    sh("replan", spec, "--state", again, "--no-refresh", "--min-savings-pct", 4)
    spec, out = fresh("s2-log", specs["multi-region"])
    for f in (1.5, 2):
        log = demand_log(spec, W / f"s2-log/chat-x{f}.csv", 3, {"chat-8b": f})
        sh("replan", spec, "--state", out, "--no-refresh", "--demand-log", log, "--min-history-h", 2)
        sims(out / "proposed/plan.json")  # the observed classes are not the spec's: exit 2


def s3_traffic_down(specs: dict[str, Path]) -> None:
    print("## 3. Traffic down to 40% (every model)\n")
    for name in ("chat", "multi-region", "ho-trio", "ho-spotcap"):
        spec, out = fresh(f"s3-{name}", specs[name])
        scaled(specs[name], spec, 0.4)
        args = [spec, "--state", out, "--no-refresh"]
        if sh("replan", *args, "-v")[0] != 10:
            continue
        cron_runs(out, spec)
        sims(out / "proposed/plan.json", "--load", 1.2)
        sh("replan", spec, "--state", applied(out, f"s3-{name}-applied"), "--no-refresh")
    spec = W / "s3-ho-trio/spec.yaml"
    sh("plan", spec, "--no-baselines", "--out", W / "s3-ho-trio-fresh", show=False)
    print(f"a fresh plan at 40%: ${_cost(W / 's3-ho-trio-fresh')}/h\n")
    sims(W / "s3-ho-trio-fresh/plan.json", "--load", 1.2)
    scaled(specs["ho-trio"], spec, 0.4, extra="  churn_penalty_hours: 0\n")
    sh("replan", spec, "--state", W / "s3-ho-trio-applied", "--no-refresh")
    spec, out = fresh("s3-log", specs["multi-region"])
    log = demand_log(spec, W / "s3-log/down40.csv", 3, {"chat-8b": 0.4, "code-70b": 0.4})
    sh("replan", spec, "--state", out, "--no-refresh", "--demand-log", log)  # the 24 h guard
    sh("replan", spec, "--state", out, "--no-refresh", "--demand-log", log, "--min-history-h", 2)


def s4_prices(specs: dict[str, Path]) -> None:
    print("## 4. Prices (offers files: the snapshot with one GPU's prices changed)\n")
    files = {k: offers(W / f"{k}.csv", g, f) for k, g, f in (("same", None, 1), ("l40s-x1.4", "L40S", 1.4),
                                                          ("a10g-x1.4", "A10G", 1.4), ("h100-x0.5", "H100", 0.5))}
    for name in ("multi-region", "ho-trio"):
        spec, out = fresh(f"s4-{name}", specs[name])
        for k, f in files.items():
            args = [spec, "--state", out, "--no-refresh", "--feeds", f]
            if sh("replan", *args, "-v")[0] == 10:
                cron_runs(out, spec, "--feeds", f)
                sims(out / "proposed/plan.json", "--load", 1.2)
                sh("replan", spec, "--state", applied(out, f"s4-{name}-{k}-applied"), "--no-refresh", "--feeds", f)
            sh("plan", spec, "--feeds", f, "--no-baselines", "--out", W / f"s4-{name}-{k}-fresh", show=False)
            print(f"a fresh plan at these prices: ${_cost(W / f's4-{name}-{k}-fresh')}/h\n")


def s5_capacity(specs: dict[str, Path]) -> None:
    print("## 5. Capacity lost (--caps at 0, an offer gone from the offers file)\n")
    spec, out = fresh("s5-multi-region", specs["multi-region"])
    caps = {"h100-use4": "gcp,us-east4,H100,0", "h100-use1": "aws,us-east-1,H100,0",
            "h100-use1-spot": "aws,us-east-1,H100,0,spot"}
    for k, row in caps.items():
        (W / f"{k}.csv").write_text("cloud,region,gpu,max_gpus" + (",purchase" if "spot" in k else "") + f"\n{row}\n")
        if sh("replan", spec, "--state", out, "--no-refresh", "--caps", W / f"{k}.csv", "-v")[0] == 10:
            sims(out / "proposed/plan.json", "--load", 1.2)
    gone = offers(W / "no-g5-usw2.csv", drop=("aws", "us-west-2", "g5.xlarge"))
    sh("replan", spec, "--state", out, "--no-refresh", "--feeds", gone, "-v")
    sims(out / "proposed/plan.json", "--load", 1.2)
    spec, out = fresh("s5-ho-spotcap", specs["ho-spotcap"])
    (W / "l40s-use1.csv").write_text("cloud,region,gpu,max_gpus\naws,us-east-1,L40S,0\n")
    sh("replan", spec, "--state", out, "--no-refresh", "--caps", W / "l40s-use1.csv", "-v")
    sims(out / "proposed/plan.json", "--load", 1.2)


def _edit(key_path: tuple, value):
    """A mutation setting state.json at ``key_path`` to ``value``."""
    def run(out: Path) -> None:
        d = json.loads((out / "state.json").read_text())
        node = d
        for k in key_path[:-1]:
            node = node[k]
        node[key_path[-1]] = value
        (out / "state.json").write_text(json.dumps(d))
    return run


HOSTILE = {
    "state.json truncated": lambda o: (o / "state.json").write_text((o / "state.json").read_text()[:700]),
    "state.json empty": lambda o: (o / "state.json").write_text(""),
    "state.json a list": lambda o: (o / "state.json").write_text("[]"),
    "state.json of a future version": _edit(("state_version",), 2),
    "state.json of another service": _edit(("service",), "chat"),
    "state.json of another spec file": _edit(("service_id",), "assistants-0123456789"),
    "count edited by hand": _edit(("allocations", 2, "count"), 7),
    "count negative": _edit(("allocations", 2, "count"), -1),
    "a key of another version": _edit(("allocations", 0, "colour"), "blue"),
    "no allocations": _edit(("allocations",), []),
    "plan.json truncated": lambda o: (o / "plan.json").write_text((o / "plan.json").read_text()[:3000]),
    "journal truncated": lambda o: (o / "replan.json").write_text('{"started_at": "2026'),
    "lock is a folder": lambda o: (o / ".replan.lock").mkdir(),
}


def s6_hostile(specs: dict[str, Path]) -> None:
    print("## 6. Hostile state and logs: exit codes, messages, OUT's files unchanged\n")
    spec, base = fresh("s6", specs["multi-region"])
    state_json(base, spec)
    for name, mutate in HOSTILE.items():
        out = W / f"s6-{re.sub(r'[^a-z]+', '-', name)}"
        shutil.copytree(base, out)
        mutate(out)
        before = {p.name: p.read_bytes() for p in out.glob("*.json")}
        print(f"# {name}")
        sh("replan", spec, "--state", out, "--no-refresh")
        print("files unchanged" if before == {p.name: p.read_bytes() for p in out.glob("*.json")} else "FILES CHANGED",
              "| OUT holds:", " ".join(sorted(p.name for p in out.iterdir())), "\n")
    good = demand_log(spec, W / "s6/good.csv", 3, {})
    text = good.read_text()
    logs = {"log cut mid-row": text[:5_000_000], "log header only": text.split("\n", 1)[0] + "\n",
            "log of another service's models": None, "log not UTF-8": None}
    for name, body in logs.items():
        path = W / f"s6/{re.sub(r'[^a-z]+', '-', name)}.csv"
        if name.startswith("log of"):
            demand_log(REPO / "services/batch.yaml", path, 3, {})
        elif body is None:
            path.write_bytes(bytes(range(128, 256)) * 20)
        else:
            path.write_text(body)
        print(f"# {name}")
        sh("replan", spec, "--state", base, "--no-refresh", "--demand-log", path, "--min-history-h", 2)
    moved = W / "s6-moved"  # the deployment and its spec moved together (a new checkout path)
    shutil.copytree(W / "s6", moved)
    sh("replan", moved / "spec.yaml", "--state", moved / "out", "--no-refresh")
    _concurrent(spec, base, good)


def _concurrent(spec: Path, out: Path, log: Path) -> None:
    """Two replans on one OUT at once: one exits 75; the proposal is whole."""
    slow = [EXE, *map(str, ("replan", spec, "--state", out, "--no-refresh", "--demand-log", log, "--min-history-h", 2))]
    a = subprocess.Popen(slow, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(0.3)
    b = subprocess.run([EXE, "replan", spec, "--state", out, "--no-refresh"], capture_output=True, text=True)
    print(f"# two replans at once\nfirst: exit {a.wait()}: {a.stdout.read().strip()}\n"
          f"second: exit {b.returncode}: {(b.stdout + b.stderr).strip()}")
    proposed = out / "proposed/plan.json"  # none where the first run proposes nothing (the log is the declared traffic)
    print("proposed/plan.json parses:", json.loads(proposed.read_text())["cost_usd_per_hour"] if proposed.exists()
          else "(no proposal: nothing to change)", "\n")


def main() -> None:
    W.mkdir(parents=True, exist_ok=True)
    specs = {"chat": REPO / "services/chat.yaml", "multi-region": REPO / "services/multi-region.yaml"}
    for name, text in spec_texts().items():
        (W / name).write_text(text)
        specs[name.removesuffix(".yaml")] = W / name
    print(f"work dir {W}\n")
    for scenario in (s1_nothing_changed, s2_traffic_up, s3_traffic_down, s4_prices, s5_capacity, s6_hostile):
        scenario(specs)


if __name__ == "__main__":
    main()
