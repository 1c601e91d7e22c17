"""Before and after, round seven (docs/trust.md): command-line words, Hugging Face repo ids, symbolic
links, names that are not UTF-8, output encodings and outputs that cannot be written, profile rows'
names. Run as tools/hostile_before_after.py runs its inputs (its BEFORE_BIN / AFTER_BIN installs, its
run() and $HOSTILE_DIR), each case in its own folder:

    BEFORE_BIN=... .venv/bin/python tools/hostile_before_after_seven.py    # about 1 minute on 2 cores

A table of the outcomes is printed and saved as $HOSTILE_DIR/table.json.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_before_after import BINS, CHAT, REPO, ROOT, bench_doc, first_error, run, run_table  # noqa: E402

def _planned_out(who, d):
    run(who, ["plan", str(REPO / "services/chat.yaml"), "--out", "o", "--no-verify", "--no-baselines"], d)
    return d / "o"

def _linked(who, d, name, link):
    out = _planned_out(who, d)
    if name == "state.json":
        run(who, ["status", "o", "--no-refresh"], d)  # nothing there yet: a link takes its place
    (out / name).unlink(missing_ok=True)
    (out / name).symlink_to(out / name if link == "loop" else d / "unmounted" / name)

def _spec_with(d, model=None, name=None):
    s = json.loads(json.dumps(CHAT))
    s["models"][0].update({k: v for k, v in (("model", model), ("name", name)) if v})
    (d / "s.yaml").write_text(yaml.safe_dump(s, sort_keys=False))

LONG_REPO = "org/" + "a" * 250
OFFERS_CAFE = ("cloud,region,instance_type,gpu,gpu_count,gpu_memory_gb,vcpus,memory_gb,price_per_hour,"
               "spot_price_per_hour,source\naws,us-east-1,g6.xlarge,L4,1,24,4,16,0.8,,caf\u00e9-list\n")

# name -> (how the case sets up its folder d, the command line, extra environment, what handled means)
SEVEN = {
    "model name '-x-chat' (vLLM reads it as an option)": (
        lambda w, d: _spec_with(d, name="-x-chat"), ["plan", "s.yaml", "--out", "o", "--no-verify", "--no-baselines"],
        {}, lambda rc, err, d: rc == 2 and "s.yaml:" in err),
    "model name '--help'": (
        lambda w, d: _spec_with(d, name="--help"), ["plan", "s.yaml", "--no-verify", "--no-baselines"],
        {}, lambda rc, err, d: rc == 2 and "s.yaml:" in err),
    "spec model: org/<250 characters>, a Hugging Face cache there": (
        lambda w, d: (_spec_with(d, model=LONG_REPO), (d / "hub").mkdir()),
        ["plan", "s.yaml", "--no-verify", "--no-baselines"], {"HF_HUB_CACHE": "hub"},
        lambda rc, err, d: rc == 2 and "Traceback" not in err),
    "estimate --model org/<250 characters>": (
        lambda w, d: (d / "hub").mkdir(), ["estimate", "--model", LONG_REPO, "--gpu", "H100", "--input", "500",
                                           "--output", "100", "--ttft-ms", "1000", "--tpot-ms", "50"],
        {"HF_HUB_CACHE": "hub"}, lambda rc, err, d: rc == 2 and "Traceback" not in err),
    "plan --out LOOP (a symlink loop)": (
        lambda w, d: ((d / "l1").symlink_to(d / "l2"), (d / "l2").symlink_to(d / "l1")),
        ["plan", str(REPO / "services/chat.yaml"), "--out", "l1", "--no-verify", "--no-baselines"], {},
        lambda rc, err, d: rc == 2 and "symbolic links" in err),
    "simulate LOOP": (
        lambda w, d: ((d / "l1").symlink_to(d / "l2"), (d / "l2").symlink_to(d / "l1")), ["simulate", "l1"], {},
        lambda rc, err, d: rc == 2 and "symbolic links" in err),
    "OUT/state.json a link to nothing: status": (
        lambda w, d: _linked(w, d, "state.json", "nothing"), ["status", "o", "--no-refresh"], {},
        lambda rc, err, d: rc == 2 and "link to nothing" in err),
    "OUT/state.json a link to nothing: destroy --yes": (
        lambda w, d: _linked(w, d, "state.json", "nothing"), ["destroy", "o", "--yes"], {},
        lambda rc, err, d: rc == 2 and "link to nothing" in err),
    "OUT/state.json a link loop: replan": (
        lambda w, d: _linked(w, d, "state.json", "loop"), ["replan", str(REPO / "services/chat.yaml"), "--state", "o"],
        {}, lambda rc, err, d: rc == 2 and "symbolic links" in err),
    "OUT/plan.json a link to nothing: simulate": (
        lambda w, d: _linked(w, d, "plan.json", "nothing"), ["simulate", "o", "--requests", "200"], {},
        lambda rc, err, d: rc == 2 and "link to nothing" in err),
    "spec file named with byte 0xff": (
        lambda w, d: shutil.copy(REPO / "services/chat.yaml", os.fsencode(d) + b"/\xffs.yaml"),
        ["plan", "\udcffs.yaml", "--no-verify", "--no-baselines"], {},
        lambda rc, err, d: rc == 2 and "not UTF-8" in err),
    "--out named with byte 0xff": (
        lambda w, d: None,
        ["plan", str(REPO / "services/chat.yaml"), "--out", "o\udcff", "--no-verify", "--no-baselines"],
        {}, lambda rc, err, d: rc == 2 and "not UTF-8" in err and not any(p.name.startswith("o") for p in d.iterdir())),
    "PYTHONIOENCODING=ascii: plan": (
        lambda w, d: None, ["plan", str(REPO / "services/chat.yaml"), "--no-verify"], {"PYTHONIOENCODING": "ascii"},
        lambda rc, err, d: rc == 0),
    "PYTHONIOENCODING=ascii: prices of an offers source 'caf\u00e9-list'": (
        lambda w, d: (d / "o.csv").write_text(OFFERS_CAFE), ["prices", "--feeds", "o.csv"],
        {"PYTHONIOENCODING": "ascii"}, lambda rc, err, d: rc == 0),
    "LC_ALL=C PYTHONUTF8=0: plan": (
        lambda w, d: None, ["plan", str(REPO / "services/chat.yaml"), "--no-verify"],
        {"LC_ALL": "C", "PYTHONUTF8": "0"}, lambda rc, err, d: rc == 0),
}

def _surrogate_name(who, d):
    out = _planned_out(who, d)
    text = (out / "plan.json").read_text()
    (out / "plan.json").write_text(text.replace('"name": "chat-8b"', '"name": "chat-8b\\ud800"', 1))

def _data_link(who, d):
    out = _planned_out(who, d)
    (d / "disk").mkdir()
    (d / "disk" / "weights.bin").write_text("mine")
    (out / "data").symlink_to(d / "disk")

def _profile_blocked(who, d, what):
    out = _planned_out(who, d)
    if what == "file":
        (out / "profile").write_text("mine")
    else:
        (out / "profile" / "collect.sh").mkdir(parents=True)

SEVEN.update({
    "plan.json: a model name holding \\ud800 (a lone surrogate escape): simulate": (
        _surrogate_name, ["simulate", "o", "--requests", "200"], {},
        lambda rc, err, d: rc == 2 and "surrogate" in err),
    "OUT/data a link to a folder elsewhere: plan --out OUT": (
        _data_link, ["plan", str(REPO / "services/chat.yaml"), "--out", "o", "--no-verify", "--no-baselines"], {},
        lambda rc, err, d: rc == 0 and (d / "o" / "data").is_symlink() and (d / "disk" / "weights.bin").exists()),
    "OUT/profile a file: profile OUT --launch --dry-run": (
        lambda w, d: _profile_blocked(w, d, "file"), ["profile", "o", "--launch", "--all", "--dry-run"], {},
        lambda rc, err, d: rc == 2 and "Traceback" not in err),
    "OUT/profile/collect.sh a folder: profile OUT --launch --dry-run": (
        lambda w, d: _profile_blocked(w, d, "folder"), ["profile", "o", "--launch", "--all", "--dry-run"], {},
        lambda rc, err, d: rc == 2 and [p.name for p in (d / "o" / "profile").iterdir()] == ["collect.sh"]),
})

def import_case(who, model, gpu):
    """`profile-import` of a two-point sweep whose result files' model_id is ``model``, for ``--gpu``."""
    d = ROOT / who / ("import-" + str(abs(hash((model, gpu))) % 10**6)); d.mkdir(parents=True)
    for i, (rate, tpot) in enumerate(((1, 40), (2, 150))):
        (d / f"r{i}.json").write_text(json.dumps(bench_doc(rate, 300, tpot, model_id=model)))
    rc, out, err = run(who, ["profile-import", "r0.json", "r1.json", "--gpu", gpu, "--tp", "1", "--ttft-ms", "2000",
                             "--tpot-ms", "100", "--out", "p.csv"], d)
    rerc, _, reerr = run(who, ["simulate", "x", "--profile", "p.csv"], d) if rc == 0 else (None, "", "")
    note = first_error(err) if rc else f"wrote p.csv; read back: {first_error(reerr) if 'p.csv' in reerr else 'ok'}"
    return rc, note[:110], rc == 2 and "Traceback" not in err and "column 'tp' is empty" not in err  # the wrong column

def output_case(who, args, into):
    """``hetinfra ARGS`` with stdout into /dev/full (a full disk) or closed (``>&-``)."""
    d = ROOT / who / ("output-" + str(abs(hash((tuple(args), into))) % 10**6)); d.mkdir(parents=True)
    e = dict(os.environ, HETINFRA_CACHE_DIR=str(d / "cache"))
    with open("/dev/full", "w") as full:
        out = {"stdout": full} if into == "/dev/full" else {"preexec_fn": lambda: os.close(1)}
        p = subprocess.run([BINS[who], *args], cwd=d, stderr=subprocess.PIPE, text=True, errors="backslashreplace",
                           timeout=120, env=e, **out)
    handled = "Traceback" not in p.stderr and p.returncode in (0, 2)
    return p.returncode, first_error(p.stderr) or "(nothing said)", handled

def seven_case(who, name):
    make, args, env, handled = SEVEN[name]
    d = ROOT / who / ("seven-" + str(abs(hash(name)) % 10**6)); d.mkdir(parents=True)
    make(who, d)
    rc, out, err = run(who, args, d, env=env, timeout=120)
    note = first_error(err) if rc != 0 else (out.strip().splitlines() or [""])[-1][:110]
    if name.startswith("OUT/data"):
        note = f"OUT/data after: {'a link' if (d / 'o' / 'data').is_symlink() else 'an empty folder'}"
    return rc, note, handled(rc, err, d)


def main():
    cases = [(n, lambda w, n=n: seven_case(w, n)) for n in SEVEN]
    cases += [(name, lambda w, m=model, g=gpu: import_case(w, m, g)) for name, model, gpu in (
        ("profile-import of a model_id holding a carriage return", "m\rx", "L4"),
        ("profile-import --gpu 'L4,x'", "m", "L4,x"))]
    cases += [(name, lambda w, a=args, i=into: output_case(w, a, i)) for name, args, into in (
        ("plan chat.yaml --json > /dev/full", ["plan", str(REPO / "services/chat.yaml"), "--no-verify", "--json"],
         "/dev/full"),
        ("prices --gpu H100 > /dev/full", ["prices", "--gpu", "H100"], "/dev/full"),
        ("--version >&- (stdout closed)", ["--version"], "closed"))]
    run_table("round seven", cases)


if __name__ == "__main__":
    main()
