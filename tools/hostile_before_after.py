"""Before and after, as a hostile user would (issue 36): the inputs of the table in docs/trust.md,
run on two installs (BEFORE_BIN, default /work/main's hetinfra; AFTER_BIN, default this checkout's),
each outcome printed and saved as JSON under $HOSTILE_DIR (default /tmp/hetinfra-hostile):

    .venv/bin/python tools/hostile_before_after.py    # about 3 minutes on 2 cores
    .venv/bin/python tools/hostile_before_after_seven.py    # round seven's inputs, the same way

The "main"/"w36" labels are the two installs. Each case writes only under its own folder there.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

BINS = {"main": os.environ.get("BEFORE_BIN", "/work/main/.venv/bin/hetinfra"),
        "w36": os.environ.get("AFTER_BIN", str(Path(__file__).resolve().parents[1] / ".venv/bin/hetinfra"))}
PY = {k: str(Path(v).with_name("python")) for k, v in BINS.items()}
REPO = Path(__file__).resolve().parents[1]
ROOT = Path(os.environ.get("HOSTILE_DIR", "/tmp/hetinfra-hostile"))
CHAT = yaml.safe_load((REPO / "services/chat.yaml").read_text())
NOW = time.time()


def run(who, args, cwd, env=None, timeout=60):
    e = dict(os.environ, HETINFRA_CACHE_DIR=str(cwd / "cache"), **(env or {}))
    try:
        p = subprocess.run([BINS[who], *args], cwd=cwd, capture_output=True, text=True, errors="backslashreplace",
                           timeout=timeout, env=e)  # errors: a command may print a name's bytes that are not UTF-8
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return "hang", "", f"no answer in {timeout} s"


def first_error(err):
    if "Traceback" in err:
        last = [l for l in err.strip().splitlines() if l.strip() and not l.startswith("***")][-1]
        return "traceback: " + last[:70]
    lines = [l for l in err.splitlines() if l.startswith("error:")]
    return (lines[0][7:] if lines else (err.strip().splitlines() or [""])[-1])[:110]


def result(rc, err, good):
    return rc, first_error(err) if rc not in (0,) else "", good


# ---------------------------------------------------------------- profile-import
def bench_doc(rate, ttft, tpot, **extra):
    d = {"model_id": "m", "request_rate": rate, "completed": 200, "failed": 0, "request_throughput": rate,
         "random_input_len": "512", "random_output_len": "128", "max_concurrency": None,
         "mean_ttft_ms": ttft, "mean_tpot_ms": tpot}
    d.update(extra)
    return {k: v for k, v in d.items() if v != "DEL"}

BENCH = {
    "result file nested 3,000 deep": lambda d: (d / "r1.json").write_text("[" * 3000 + "]" * 3000),
    "result file is a FIFO": lambda d: os.mkfifo(d / "r1.json"),
    "input_lens [1e308] (no size metadata)": lambda d: (d / "r1.json").write_text(json.dumps(bench_doc(
        1, 300, 40, random_input_len="DEL", random_output_len="DEL", input_lens=[1e308], output_lens=[128]))),
    "max_concurrency [4]": lambda d: (d / "r1.json").write_text(json.dumps(bench_doc(1, 300, 40, max_concurrency=[4]))),
    "random_input_len '1e30'": lambda d: (d / "r1.json").write_text(json.dumps(bench_doc(1, 300, 40, random_input_len="1e30"))),
    "an object nested {'a': ... 2,000 deep": lambda d: (d / "r1.json").write_text('{"a":' * 2000 + "1" + "}" * 2000),
}


def bench_case(who, name, make):
    d = ROOT / who / ("bench-" + str(abs(hash(name)) % 10**6)); d.mkdir(parents=True)
    (d / "r2.json").write_text(json.dumps(bench_doc(2, 300, 150)))
    make(d)
    rc, out, err = run(who, ["profile-import", "r1.json", "r2.json", "--gpu", "L4", "--tp", "1", "--ttft-ms", "2000",
                             "--tpot-ms", "100", "--out", "p.csv"], d, timeout=20)
    rows = (d / "p.csv").read_text() if (d / "p.csv").exists() else ""
    huge = any(len(c) > 9 for line in rows.splitlines()[1:] for c in line.split(",")[4:6])
    good = rc == 2 and "Traceback" not in err
    note = first_error(err) if rc != 0 else ("wrote a row of " + rows.splitlines()[1].split(",")[4] + " input tokens" if huge else "ok")
    return rc, note, good


# ---------------------------------------------------------------- template cache
def cache_case(who, name, tamper):
    d = ROOT / who / ("cache-" + str(abs(hash(name)) % 10**6)); d.mkdir(parents=True)
    rc, out, err = run(who, ["plan", str(REPO / "services/chat.yaml"), "--json", "--no-verify", "--no-baselines"], d)
    fresh = json.loads(out)
    [entry] = list((d / "cache" / "templates").glob("*.json"))
    tamper(entry)
    rc, out, err = run(who, ["plan", str(REPO / "services/chat.yaml"), "--json", "--no-verify", "--no-baselines"], d, timeout=30)
    if rc != 0:
        return rc, first_error(err), False
    doc = json.loads(out)
    same = doc["allocations"] == fresh["allocations"]
    miss = doc["inputs"]["template_cache"]["misses"]
    return rc, ("rebuilt (miss), same plan" if miss and same else f"used the entry: {'same' if same else 'DIFFERENT'} plan, misses={miss}"), bool(miss) and same

def _edit(fn):
    def tamper(entry):
        doc = json.loads(entry.read_text()); fn(doc); entry.write_text(json.dumps(doc))
    return tamper

def _fifo(entry):
    entry.unlink(); os.mkfifo(entry)

CACHE = {
    "entry is a FIFO": _fifo,
    "entry nested 100,000 deep": lambda e: e.write_text("[" * 100000 + "]" * 100000),
    "every rate the string '99'": _edit(lambda d: [t["rates"].update({k: "99" for k in t["rates"]}) for t in d["templates"]]),
    "gpus_per_instance 0": _edit(lambda d: [t.update(gpus_per_instance=0) for t in d["templates"]]),
    "every rate x1000 as 1e6 (a typed, valid edit)": _edit(lambda d: [t["rates"].update({k: 1e6 for k in t["rates"]}) for t in d["templates"]]),
}


# ---------------------------------------------------------------- demand logs (replan)
def demand_case(who, name, stamps):
    d = ROOT / who / ("demand-" + str(abs(hash(name)) % 10**6)); d.mkdir(parents=True)
    rc, out, err = run(who, ["plan", str(REPO / "services/chat.yaml"), "--out", "S", "--no-verify", "--no-baselines"], d)
    (d / "log.csv").write_text("timestamp,model,input_tokens,output_tokens,region\n"
                               + "".join(f"{t:.3f},chat-8b,200,90,\n" for t in stamps))
    rc, out, err = run(who, ["replan", str(REPO / "services/chat.yaml"), "--state", "S", "--demand-log", "log.csv",
                             "--min-history-h", "0.5", "--no-refresh"], d)
    log = (d / "S" / "replan.log").read_text() if (d / "S" / "replan.log").exists() else ""
    demand = [l.strip() for l in log.splitlines() if "demand of chat-8b" in l or "skipped" in l or "plan " in l and "req/s" in l]
    return rc, (first_error(err) if rc == 2 else "; ".join(demand)[:110] or out.strip()[:110]), None

T0 = NOW - 3 * 3600
SANE = [T0 + i * 0.5 for i in range(3 * 3600 * 2)]  # 2 req/s for 3 hours, ending now
DEMAND = {
    "every row stamped 1970 (epoch 0..3 h)": [i * 0.5 for i in range(len(SANE))],
    "every row stamped 2076": [3345062400 + i * 0.5 for i in range(len(SANE))],
    "3 h of real rows + one row stamped 2076": SANE + [3345062400.0],
    "3 h of real rows + one row stamped 1999-12-31": SANE + [946598400.0],
    "every row 2 days ahead (a clock run fast)": [t + 2 * 86400 for t in SANE],
}


# ---------------------------------------------------------------- replan automation, profile price
def replan_missing(who):
    d = ROOT / who / "replan-missing"; d.mkdir(parents=True)
    rc, out, err = run(who, ["replan", str(REPO / "services/chat.yaml"), "--state", "gone/out"], d)
    made = sorted(str(p.relative_to(d)) for p in d.rglob("*") if "cache" not in str(p))
    return rc, (first_error(err) + (f" | created: {', '.join(made)}" if made else " | nothing created"))[:120], rc == 2 and not made

CAP_SNIPPET = r'''
import json
from hetinfra.replan.safe import cap_cut, stage_counts
from tests.plan.golden_plans import golden_allocation, golden_plan_with
def a(u, n): return golden_allocation(unit=u, deployment_unit=u, count=n, instances=n, nodes_per_replica=1, gpus_per_instance=1,
    cloud="aws", region="us-east-1", instance_type=u+".xl", gpu="L4", spot=False, price_per_instance_usd_per_hour=1.0, cost_usd_per_hour=float(n))
running = [a("a", 10)]; new = golden_plan_with([a("a", 3), a("b", 2)], cost_usd_per_hour=5.0)
try:  # typed documents since the readers took them (hetinfra.document); dicts before
    from hetinfra.document import Plan
    from hetinfra.document.allocation import Allocation
    running, new = [Allocation.model_validate(x) for x in running], Plan.parse(new)
except ImportError:
    pass
stages, _ = stage_counts(running, new, None)
capped, was, line = cap_cut(stages, running, new, 0.5)
print(json.dumps({"kept_running": min(capped[-1][1].get("a", 0), 10), "line": line}))
'''

def cap_case(who):
    p = subprocess.run([PY[who], "-c", CAP_SNIPPET], cwd=Path(BINS[who]).parents[2], capture_output=True, text=True)
    doc = json.loads(p.stdout)
    kept = doc["kept_running"]
    return 0, f"{10 - kept} of 10 running GPUs cut; says: {(doc['line'] or 'not capped')[:80]}", kept >= 5

def spiky_forecast_case(who):
    """2 h of 0.2 req/s with one 5-minute spike at 3 req/s: the forecast misses the last hour by ~1000%."""
    d = ROOT / who / "spiky"; d.mkdir(parents=True)
    run(who, ["plan", str(REPO / "services/chat.yaml"), "--out", "S", "--no-verify", "--no-baselines"], d)
    t0, t, rows = NOW - 7200, NOW - 7200, []
    while t < NOW:
        rows.append(f"{t:.3f},chat-8b,200,90,")
        t += 1 / (3.0 if t0 + 1200 <= t < t0 + 1500 else 0.2)
    (d / "log.csv").write_text("timestamp,model,input_tokens,output_tokens,region\n" + "\n".join(rows) + "\n")
    rc, out, err = run(who, ["replan", str(REPO / "services/chat.yaml"), "--state", "S", "--demand-log", "log.csv",
                             "--min-history-h", "1", "--no-refresh", "--json"], d)
    doc = json.loads(out)
    brk = doc["this_run"][-1]
    return rc, f"{brk[:90]}; forecast_holds: {len(doc.get('forecast_holds') or [])}", brk.endswith("no replica changes")


def spot_price_case(who):
    d = ROOT / who / "spot-price"; d.mkdir(parents=True)
    spec = dict(CHAT); spec["infrastructure"] = dict(CHAT["infrastructure"], spot=True, clouds=["aws"])
    (d / "s.yaml").write_text(yaml.safe_dump(spec))
    rc, out, err = run(who, ["plan", "s.yaml", "--out", "S", "--no-verify", "--no-baselines"], d)
    plan = json.loads((d / "S/plan.json").read_text())
    a = plan["allocations"][0]
    rc, out, err = run(who, ["profile", "S", "--launch", "--all", "--dry-run"], d)
    task = yaml.safe_load((d / "S/profile" / f"{a['deployment_unit']}.yaml").read_text())
    line = [l for l in out.splitlines() if "estimated cost" in l]
    return rc, f"unit {a['instance_type']} spot=${a['price_per_instance_usd_per_hour']}/h launched use_spot={task['resources']['use_spot']}; {line[0] if line else out[-80:]}"[:120], None


# ---------------------------------------------------------------- out dir and signals
def out_case(who, name):
    d = ROOT / who / ("out-" + str(abs(hash(name)) % 10**6)); d.mkdir(parents=True)
    spec = str(REPO / "services/chat.yaml")
    args = ["plan", spec, "--no-verify", "--no-baselines"]
    if name == "--out . (run inside OUT)":
        (d / "o").mkdir(); rc, out, err = run(who, args + ["--out", "."], d / "o", timeout=60)
        left = sorted(p.name for p in d.iterdir() if p.name != "o")
        inside = sorted(p.name for p in (d / "o").iterdir()) if (d / "o").exists() else "GONE"
        return rc, (first_error(err) or f"wrote; beside OUT: {left}; OUT holds {inside}")[:110], rc == 2
    if name == "--out .. (run inside OUT/sub)":
        (d / "o" / "sub").mkdir(parents=True); rc, out, err = run(who, args + ["--out", ".."], d / "o" / "sub")
        return rc, (first_error(err) or f"wrote; OUT/sub still there: {(d / 'o' / 'sub').exists()}")[:110], rc == 2
    if name == "OUT is a symlink to a folder":
        (d / "real").mkdir(); (d / "real" / "mine.txt").write_text("x"); (d / "link").symlink_to(d / "real")
        rc, out, err = run(who, args + ["--out", "link"], d)
        return rc, f"link still a symlink: {(d / 'link').is_symlink()}; real/ has plan.json: {(d / 'real/plan.json').exists()}", (d / "link").is_symlink() and (d / "real/plan.json").exists()
    if name == "OUT is a dangling symlink":
        (d / "link").symlink_to(d / "nowhere"); rc, out, err = run(who, args + ["--out", "link"], d)
        return rc, (first_error(err) or f"link still a symlink: {(d / 'link').is_symlink()}")[:110], rc == 2
    if name == "spec inside OUT":
        (d / "o").mkdir(); shutil.copy(spec, d / "o" / "s.yaml")
        rc, out, err = run(who, ["plan", "o/s.yaml", "--no-verify", "--no-baselines", "--out", "o"], d)
        kept = (d / "o" / "s.yaml").exists() and (d / "o" / "plan.json").exists()
        return rc, (first_error(err) or f"planned; the spec kept: {kept}")[:110], rc == 0 and kept

def signal_case(who, signum):
    d = ROOT / who / f"sig-{signum}"; d.mkdir(parents=True)
    spec = str(REPO / "services/chat.yaml")
    run(who, ["plan", spec, "--out", "o", "--no-verify", "--no-baselines"], d)
    hook = d / "hook"; hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import os\nimport hetinfra.compile.artifacts as a\nreal = a._write_artifacts\n"
        f"def slow(*x):\n    w = real(*x)\n    os.kill(os.getpid(), {int(signum)})\n    return w\na._write_artifacts = slow\n")
    rc, out, err = run(who, ["plan", spec, "--out", "o", "--no-verify", "--no-baselines"], d, env={"PYTHONPATH": str(hook)})
    left = sorted(p.name for p in d.iterdir() if p.name not in ("o", "hook", "cache"))
    want = 128 + signum
    return rc, f"exit {rc}; {'left beside OUT: ' + ', '.join(left) if left else 'nothing left beside OUT'}; {first_error(err)[:50]}", rc == want and not left


# ---------------------------------------------------------------- spec values
def k8s(clusters, **kube):
    s = dict(CHAT); s["infrastructure"] = dict(CHAT["infrastructure"], clouds=["aws"])
    s["deploy"] = {"target": "kubernetes", "kubernetes": {"clusters": clusters, **kube}}
    return s

def with_name(name):
    s = dict(CHAT); s["models"] = [dict(CHAT["models"][0], name=name)]; return s

CUSTOM = yaml.safe_load((REPO / "services/custom-gpu/service.yaml").read_text())
def custom(name):
    s = json.loads(json.dumps(CUSTOM)); s["infrastructure"]["custom_gpus"][0]["name"] = name; return s

SPEC = {
    "clusters key 'aws/us-east-1\\n'": k8s({"aws/us-east-1\n": {"context": "prod"}}),
    "context 'prod(){}*'": k8s({"aws/us-east-1": {"context": "prod(){}*"}}),
    "prometheus_url 'http://p/(){}*'": k8s({"aws/us-east-1": {"context": "prod"}}, prometheus_url="http://p/(){}*"),
    "model name 'chat[1]'": with_name("chat[1]"),
    "model name 'chat~dev'": with_name("chat~dev"),
    "custom GPU named 'H100'": custom("H100"),
    "custom GPU named 'l4' (catalog's L4)": custom("l4"),
    "custom GPU 'T9' that no offer has": custom("T9"),
    "clusters only in aws/ap-south-1": k8s({"aws/ap-south-1": {"context": "prod"}}),
    "no clusters at all": k8s({}),
}

def spec_case(who, name, doc):
    d = ROOT / who / ("spec-" + str(abs(hash(name)) % 10**6)); d.mkdir(parents=True)
    if "custom" in name.lower():
        for f in ("offers.csv", "profiles.csv"):
            shutil.copy(REPO / "services/custom-gpu" / f, d / f)
    (d / "s.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    rc, out, err = run(who, ["plan", "s.yaml", "--out", "o", "--no-verify", "--no-baselines", "--json"], d)
    note = first_error(err)
    if rc == 0:
        plan = json.loads(out)
        regions = sorted(plan["breakdown"]["by_region"])
        warn = [w for w in plan["warnings"] if "cluster" in w]
        note = f"planned {', '.join(regions)}" + ("; warns: apply needs a cluster per region" if warn else "")
    if name.startswith("clusters only"):
        good = rc == 0 and regions == ["aws/ap-south-1"] or rc == 2
    elif name == "no clusters at all":
        good = rc == 0 and bool(warn)
    else:
        good = rc == 2 and "s.yaml:" in err and "plan.json" not in err
    return rc, note[:120], good

def yaml_deep(who):
    d = ROOT / who / "yaml-deep"; d.mkdir(parents=True)
    text = (REPO / "services/chat.yaml").read_text().replace("objective: min_cost", "objective: " + "[" * 5000 + "]" * 5000)
    (d / "s.yaml").write_text(text)
    rc, out, err = run(who, ["plan", "s.yaml", "--no-verify", "--no-baselines"], d)
    return rc, first_error(err), rc == 2 and "Traceback" not in err

def dataset_case(who, first):
    d = ROOT / who / ("ds-" + first.replace(",", "_")); d.mkdir(parents=True)
    (d / "d.csv").write_text(f"{first}\n" + "".join("100,50\n" for _ in range(3)))
    s = dict(CHAT); s["models"] = [dict(CHAT["models"][0], demand={"rate_rps": 12, "sizes": {"dataset": {
        "path": "d.csv", "input_edges": [0, 250, 2000], "output_edges": [0, 100, 1000]}}})]
    (d / "s.yaml").write_text(yaml.safe_dump(s, sort_keys=False))
    rc, out, err = run(who, ["plan", "s.yaml", "--json", "--no-verify", "--no-baselines"], d)
    if rc:
        return rc, first_error(err), False
    classes = {c["name"]: c["share"] for c in json.loads(out)["models"][0]["classes"]}
    big = classes.get("in<=2000,out<=1000", 0)
    return rc, f"classes {classes}", abs(big - 0.25) < 1e-9

def infeasible_case(who):
    d = ROOT / who / "infeasible"; d.mkdir(parents=True)
    sys.path.insert(0, str(REPO))
    from tests.solver.test_hand_solved import _spec
    s = _spec(d)
    s["infrastructure"]["availability"] = [{"cloud": "lab", "region": "r1", "gpu": "Y", "max_gpus": 0},
                                           {"cloud": "lab", "region": "r1", "gpu": "X", "max_gpus": 5}]
    (d / "s.yaml").write_text(yaml.safe_dump(s))
    rc, out, err = run(who, ["plan", "s.yaml", "--no-verify"], d)
    return rc, first_error(err), "Y: cap 0" not in err and rc == 3


def both(fn):
    """``fn`` run on each install: {"main": outcome, "w36": outcome}."""
    res = {}
    for who in ("main", "w36"):
        try:
            res[who] = fn(who)
        except Exception as exc:  # the harness's own failure: shown, not hidden
            res[who] = ("?", f"harness: {type(exc).__name__}: {exc}"[:100], False)
    return res


def run_table(family: str, cases: list) -> None:
    """Each of ``cases`` ((name, fn(who))) run on both installs (:func:`both`), printed as it goes, saved as
    $HOSTILE_DIR/table.json, and the handled counts printed: the later rounds' tools (seven, eight)."""
    shutil.rmtree(ROOT, ignore_errors=True)
    rows = []
    for name, fn in cases:
        res = both(fn)
        rows.append((family, name, res))
        print(name, "|", res["main"][:2], "|", res["w36"][:2], flush=True)
    ROOT.mkdir(parents=True, exist_ok=True)
    json.dump(rows, open(ROOT / "table.json", "w"), indent=1, default=str)
    print(f"handled: before {sum(bool(r['main'][2]) for _, _, r in rows)} of {len(rows)}, "
          f"after {sum(bool(r['w36'][2]) for _, _, r in rows)}")


def main():
    shutil.rmtree(ROOT, ignore_errors=True)
    rows = []
    def add(family, name, fn):
        res = both(fn)
        rows.append((family, name, res))
        print(family, "|", name, "|", res["main"][:2], "|", res["w36"][:2], flush=True)
    for n, mk in BENCH.items(): add("benchmark result files (profile-import)", n, lambda w, n=n, mk=mk: bench_case(w, n, mk))
    for n, t in CACHE.items(): add("template-cache entries (plan)", n, lambda w, n=n, t=t: cache_case(w, n, t))
    for n, s in DEMAND.items(): add("demand-log timestamps (replan)", n, lambda w, n=n, s=s: demand_case(w, n, s))
    add("replan automation", "--state of a missing folder", replan_missing)
    add("replan automation", "cut cap: 10 running, new plan keeps 3 + adds 2", cap_case)
    add("replan automation", "a spiky log whose forecast backtests at ~1000%", spiky_forecast_case)
    add("replan automation", "profile --launch --dry-run of a spot plan", spot_price_case)
    for n in ("--out . (run inside OUT)", "--out .. (run inside OUT/sub)", "OUT is a symlink to a folder",
              "OUT is a dangling symlink", "spec inside OUT"):
        add("out dir", n, lambda w, n=n: out_case(w, n))
    add("signals during plan", "SIGTERM inside the staged copy", lambda w: signal_case(w, signal.SIGTERM))
    add("signals during plan", "SIGINT (Ctrl-C) inside the staged copy", lambda w: signal_case(w, signal.SIGINT))
    for n, s in SPEC.items(): add("spec values", n, lambda w, n=n, s=s: spec_case(w, n, s))
    add("spec values", "a value nested 5,000 deep in YAML", yaml_deep)
    for first in ("512.0,900", "1e3,900"):
        add("dataset CSV first row", f"first row '{first}' (then 3 rows 100,50)", lambda w, f=first: dataset_case(w, f))
    add("infeasibility", "caps Y=0 (none there), X=5 (too few)", infeasible_case)
    json.dump([(f, n, r) for f, n, r in rows], open(ROOT / "table.json", "w"), indent=1, default=str)

if __name__ == "__main__":
    main()
