"""Before and after, round thirteen (docs/trust.md): round twelve's leftovers (a demand log that trickles,
`--out -`, state.json saved by `status` and `apply` at once), digits that are no ASCII digits (where a whole
number or a version is read from text), numbers as int() and float() read them (flags and variables), and a
state.json that is a link to a share. Run as tools/hostile_before_after.py runs its inputs (its BEFORE_BIN /
AFTER_BIN installs, its run() and $HOSTILE_DIR), each case in its own folder:

    BEFORE_BIN=/work/main/.venv/bin/hetinfra .venv/bin/python tools/hostile_before_after_thirteen.py  # ~6 min

The stand-in servers (a gateway whose demand log trickles, an Azure price list, the ARM API's image versions)
run on loopback in this process and stop with it. The cases of state.json and of readers no command reaches
without a cloud (a Pulumi state's group size, the ARM API's image versions) run through the install's own
Python, as `status` and `apply` call them. A table of the outcomes is printed and saved as
$HOSTILE_DIR/table.json ($HOSTILE_ONLY=TEXT: only the cases whose name holds TEXT).
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_before_after import first_error, run, run_table  # noqa: E402
from hostile_before_after_b import answer_server  # noqa: E402
from hostile_before_after_twelve import CHAT, PLAN, _folder, _python, _results, _trickling  # noqa: E402


def _planned(who, name):
    """A folder holding O, a `plan --out O` of chat.yaml."""
    d = _folder(who, name)
    run(who, ["plan", str(CHAT), "--out", "O", *PLAN], d, timeout=120)
    return d


def _with_results(d, args):
    """``args`` with RESULT replaced by the files of a `vllm bench serve` sweep (round twelve's)."""
    return [f for a in args for f in (_results(d, 0) if a == "RESULT" else [a])]


def _py(who, script, *args, cwd, timeout=60):
    p = subprocess.run([_python(who), "-c", script, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr


# ---------------------------------------------------------------- round twelve's leftovers
def demand_trickle_case(who, name, part):
    """`replan chat.yaml --state O --no-refresh --demand-from URL` of a gateway sending its demand log's
    ``part`` a byte a second; handled: exit 4 naming the URL within 40 s."""
    d = _planned(who, name)
    head = b"HTTP/1.1 200 OK\r\n"
    first, rest = ((head + b"Content-Type: text/csv\r\nContent-Length: 100000\r\n\r\n", b"x" * 100000)
                   if part == "body" else (head, b"X-A: " + b"a" * 100000))
    sock, url = _trickling(first, rest)
    t0 = time.monotonic()
    try:
        rc, out, err = run(who, ["replan", str(CHAT), "--state", "O", "--no-refresh", "--demand-from",
                                 url + "/admin/demand.csv"], d, timeout=60)
    finally:
        sock.close()
    took = time.monotonic() - t0
    if rc == "hang":
        return rc, "no answer in 60 s", False
    return rc, f"{first_error(err)} ({took:.0f} s)", rc == 4 and took <= 40 and "demand log" in err


def dash_case(who, name, args, made):
    """``args`` with '-' for a path; handled: exit 2 saying '-' is no stream, and no ``made`` ('-') written."""
    d = _planned(who, name) if "O" in args else _folder(who, name)
    rc, out, err = run(who, _with_results(d, args), d, timeout=120)
    there = (d / made).exists()
    text = first_error(err) if rc else "exit 0"
    return rc, text + (f"; made {made!r}" if there else ""), rc == 2 and not there and "'-'" in err


APPLY = """
import sys, time
from pathlib import Path
from hetinfra.deploy.state import DeployState
state = DeployState.load(Path(sys.argv[1]), "chat")
steps = [f"skypilot:up:u{i}" for i in range(40)]
state.begin("apply", "ab" * 32, steps)
for step in steps:
    time.sleep(0.02)
    state.mark(step, "done")
state.finish("ab" * 32)
"""
STATUS = """
import sys, time
from pathlib import Path
from hetinfra.deploy.drift import record
for i in range(1, 31):
    record(Path(sys.argv[1]), {"live_replicas": i, "units": {}})
    time.sleep(0.02)
"""
FINAL = """
import json, sys
doc = json.load(open(sys.argv[1]))
op = doc.get("operation") or {}
print(json.dumps([(doc.get("live") or {}).get("live_replicas"), op.get("status"),
                  sum(s["status"] == "done" for s in op.get("steps", []))]))
"""


def at_once_case(who, name, trials=3):
    """`apply`'s saves (40 steps) and `status`'s live reads (30) of one state.json at once, through the
    install's Python as they call DeployState; handled: the file ends with the last live read (30) and
    apply's operation done, all 40 steps, every trial."""
    d = _folder(who, name)
    ends = []
    for k in range(trials):
        out = d / f"O{k}"
        out.mkdir()
        procs = [subprocess.Popen([_python(who), "-c", s, str(out)], cwd=d, stderr=subprocess.PIPE, text=True)
                 for s in (APPLY, STATUS)]
        errs = [p.communicate(timeout=120)[1] for p in procs]
        if any("Traceback" in e for e in errs):
            return 1, first_error(next(e for e in errs if "Traceback" in e)), False
        ends.append(json.loads(_py(who, FINAL, out / "state.json", cwd=d)[1]))
    good = all(e == [30, "done", 40] for e in ends)
    return 0, "end [live read, operation, steps done]: " + ", ".join(map(str, ends)), good


LINKED = """
import json, os, sys
from pathlib import Path
from hetinfra.deploy.drift import record
from hetinfra.deploy.state import DeployState
share, out = Path(sys.argv[1]), Path(sys.argv[2])
DeployState.load(share, "chat").save()
os.symlink(share / "state.json", out / "state.json")
record(out, {"live_replicas": 3, "units": {}})
print(json.dumps([os.path.islink(out / "state.json"), (json.load(open(share / "state.json")).get("live") or {})
                  .get("live_replicas")]))
"""


def linked_state_case(who, name):
    """O/state.json a link to a share's state.json, `status` records a live read of 3 (drift.record);
    handled: the link kept and the share's file holding the read."""
    d = _folder(who, name)
    (d / "share").mkdir()
    (d / "O").mkdir()
    rc, out, err = _py(who, LINKED, d / "share", d / "O", cwd=d)
    if rc:
        return rc, first_error(err), False
    link, live = json.loads(out)
    return 0, f"link kept: {link}; the share's live read: {live}", link and live == 3


# ---------------------------------------------------------------- digits that are no ASCII digits
def beside_case(who, name, folder):
    """`plan chat.yaml --out O` where ``folder`` lies beside O; handled: planned (exit 0)."""
    d = _planned(who, name)
    (d / folder).mkdir()
    rc, out, err = run(who, ["plan", str(CHAT), "--out", "O", *PLAN], d, timeout=120)
    return rc, first_error(err) if rc else "planned", rc == 0


SIZE = """
import sys
from hetinfra.deploy.drift import GROUPS, _size
from hetinfra.errors import HetinfraError
typ = next(iter(GROUPS))
outputs = node = {}
*path, last = GROUPS[typ][0]
for key in path:
    node[key] = {}
    node = node[key]
node[last] = sys.argv[1]
try:
    print("size", _size({"outputs": outputs}, typ, 3))
except HetinfraError as exc:
    print(f"exit {exc.exit_code}: {exc.message}")
"""


def group_size_case(who, name, text):
    """`status`'s reader of a group's size in Pulumi's refreshed state (drift), given ``text``; handled: exit 4
    naming it (a ProviderError), no traceback."""
    d = _folder(who, name)
    rc, out, err = _py(who, SIZE, text, cwd=d)
    if rc:
        return rc, first_error(err), False
    return 0, out.strip()[:110], out.startswith("exit 4")


VERSIONS = """
import sys
from hetinfra.deploy.images import azure_newest_version
print(azure_newest_version("eastus", "gpu", {"AZURE_ACCESS_TOKEN": "t", "AZURE_SUBSCRIPTION_ID": "s"},
                           base_url=sys.argv[1]))
"""


def image_version_case(who, name, versions):
    """`apply`'s pin of the newest Azure image version, the ARM API (a loopback stand-in) listing ``versions``;
    handled: a version chosen (the newest of those in ASCII digits), no traceback."""
    d = _folder(who, name)
    url = answer_server(json.dumps([{"name": v} for v in versions]).encode())
    rc, out, err = _py(who, VERSIONS, url, cwd=d)
    return rc, first_error(err) if rc else out.strip(), rc == 0 and "1.0.5" in out


def spec_case(who, name, extra, key):
    """`plan` of chat.yaml with ``extra`` appended; handled: exit 2 naming ``key``."""
    d = _folder(who, name)
    (d / "s.yaml").write_text(CHAT.read_text() + extra)
    rc, out, err = run(who, ["plan", "s.yaml", *PLAN, "--out", "O"], d, timeout=120)
    made = ""
    if rc == 0:
        made = next((ln.strip() for p in (d / "O" / "skypilot").glob("*.yaml") for ln in p.read_text().splitlines()
                     if "image_id" in ln or "pip install" in ln), "planned")
    return rc, first_error(err) if rc else made, rc == 2 and key in err


# ---------------------------------------------------------------- numbers as int() and float() read them
def flag_case(who, name, args, planned=False, env=None):
    """``args`` (a number written otherwise than a CSV cell writes one); handled: exit 2 naming it."""
    d = _planned(who, name) if planned else _folder(who, name)
    args = _with_results(d, args)
    rc, out, err = run(who, args, d, env=env, timeout=120)
    if rc == 0:
        text = f"exit 0: {len(json.loads(out)['offers'])} offers" if args[0] == "prices" else "exit 0"
    else:
        text = first_error(err)
    return rc, text, rc == 2 and ("ASCII digits" in err or "is not a whole number" in err)


def _azure_prices():
    item = {"armSkuName": "Standard_NC4as_T4_v3", "armRegionName": "eastus", "type": "Consumption",
            "unitOfMeasure": "1 Hour", "currencyCode": "USD", "retailPrice": 0.526, "productName": "x",
            "skuName": "x", "meterName": "x"}
    return answer_server(json.dumps({"Items": [item], "NextPageLink": None}).encode())


def main():
    imp = ["profile-import", "--gpu", "L4", "--tp", "1", "--ttft-ms", "2000", "--tpot-ms", "100"]
    cases = [("replan --demand-from URL, the gateway's log a byte a second",
              lambda w: demand_trickle_case(w, "t-body", "body")),
             ("replan --demand-from URL, the gateway's headers a byte a second",
              lambda w: demand_trickle_case(w, "t-head", "headers")),
             ("plan SPEC --out -", lambda w: dash_case(w, "dash-plan", ["plan", str(CHAT), *PLAN, "--out", "-"], "-")),
             ("profile-import --out - RESULT",
              lambda w: dash_case(w, "dash-import", [*imp, "--out", "-", "RESULT"], "-")),
             ("simulate O --out -",
              lambda w: dash_case(w, "dash-sim", ["simulate", "O", "--requests", "200", "--out", "-"], "-")),
             ("apply's 40 saves and status's 30 live reads of one state.json at once (3 trials)",
              lambda w: at_once_case(w, "at-once")),
             ("O/state.json a link to a share's, status records a live read",
              lambda w: linked_state_case(w, "linked"))]
    cases += [("plan --out O beside a folder .O.new.²", lambda w: beside_case(w, "beside-sup", ".O.new.²")),
              ("Pulumi state: a group's size '²' (status's reader)", lambda w: group_size_case(w, "size-sup", "²")),
              ("Pulumi state: a group's size '٣' (status's reader)", lambda w: group_size_case(w, "size-ar", "٣")),
              ("ARM API: image versions 1.0.5 and 1.² (apply's pin)",
               lambda w: image_version_case(w, "img-sup", ["1.0.5", "1.²"])),
              ("ARM API: image versions 1.0.5 and ٩.0.0 (apply's pin)",
               lambda w: image_version_case(w, "img-ar", ["1.0.5", "٩.0.0"])),
              ("spec deploy.vllm_version \"٠.١٢.٠\"",
               lambda w: spec_case(w, "vllm-ar", 'deploy:\n  vllm_version: "٠.١٢.٠"\n', "vllm_version")),
              ("profile-import --statistic p٩٩",
               lambda w: spec_case_import(w, "stat-ar", [*imp, "--statistic", "p٩٩", "--out", "p.csv"]))]
    cases += [("prices --limit 1_0", lambda w: flag_case(w, "limit-u", ["prices", "--limit", "1_0", "--json"])),
              ("prices --limit ٣", lambda w: flag_case(w, "limit-ar", ["prices", "--limit", "٣", "--json"])),
              ("plan --max-age-h ４ (full-width)",
               lambda w: flag_case(w, "age-fw", ["plan", str(CHAT), *PLAN, "--max-age-h", "４", "--json"])),
              ("simulate O --requests 1_000",
               lambda w: flag_case(w, "req-u", ["simulate", "O", "--requests", "1_000"], planned=True)),
              ("profile-import --tp ' 1'",
               lambda w: flag_case(w, "tp-sp", [*imp[:3], "--tp", " 1", *imp[5:], "--out", "p.csv", "RESULT"])),
              ("HETINFRA_FEEDS_RETRIES=1_0 prices --feeds live:azure",
               lambda w: flag_case(w, "env-retries", ["prices", "--feeds", "live:azure", "--strict-feeds", "--json"],
                                   env={"HETINFRA_FEEDS_RETRIES": "1_0", "HETINFRA_AZURE_PRICES_URL": _azure_prices()}))]
    only = os.environ.get("HOSTILE_ONLY")  # a part of a case's name: run those cases alone
    run_table("round thirteen", [c for c in cases if not only or only in c[0]])


def spec_case_import(who, name, args):
    """`profile-import` of one sweep with ``args``; handled: exit 2 naming the statistic, nothing written."""
    d = _folder(who, name)
    rc, out, err = run(who, [*args, *_results(d, 0)], d, timeout=120)
    rows = (d / "p.csv").read_text().splitlines()[1:] if (d / "p.csv").exists() else []
    text = first_error(err) if rc else f"exit 0: {len(rows)} rows, statistic {rows[0].split(',')[9] if rows else '-'}"
    return rc, text, rc == 2 and "statistic" in err and not rows


if __name__ == "__main__":
    main()
