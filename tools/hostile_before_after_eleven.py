"""Before and after, round eleven (docs/trust.md): empty items of comma lists, the spec's file fields,
state.json's unit figures, tables on narrow terminals, tiny profile rates, file flags that are no regular
file, and prices as of the future. Run as tools/hostile_before_after.py runs its inputs (its BEFORE_BIN /
AFTER_BIN installs, its run() and $HOSTILE_DIR), each case in its own folder:

    BEFORE_BIN=/work/main/.venv/bin/hetinfra .venv/bin/python tools/hostile_before_after_eleven.py  # ~3 min

A case that starts a process (a gateway) stops it by its id however the case ends (run()'s time limit kills
the command it started). A table of the outcomes is printed and saved as $HOSTILE_DIR/table.json.
"""
import json
import os
import re
import socket
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_before_after import BINS, REPO, ROOT, first_error, run, run_table  # noqa: E402

PLAN = ["--no-verify", "--no-baselines"]
CLOSED = "http://127.0.0.1:9"


def _folder(who, name):
    d = ROOT / who / ("eleven-" + str(abs(hash(name)) % 10**6))
    d.mkdir(parents=True)
    return d


def _port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _planned(who, d):
    run(who, ["plan", str(REPO / "services/chat.yaml"), "--out", "P", *PLAN], d)
    return json.loads((d / "P" / "plan.json").read_text())


# ---------------------------------------------------------------- comma lists
def comma_case(who, name, args, env=None):
    """``args`` holding a list with an empty item; handled: exit 2 naming the empty item."""
    d = _folder(who, name)
    rc, out, err = run(who, args, d, env=env, timeout=60)
    return rc, first_error(err) if rc else "taken: " + (out.strip().splitlines() or [""])[0][:80], \
        rc == 2 and "is empty" in err and "Traceback" not in err


# ---------------------------------------------------------------- the spec's file fields
def spec_file_case(who, name, block, make):
    """`plan` of chat.yaml with ``block`` appended, after ``make(folder)``; handled: exit 2 at the spec's line."""
    d = _folder(who, name)
    make(d)
    (d / "s.yaml").write_text((REPO / "services/chat.yaml").read_text() + block)
    rc, out, err = run(who, ["plan", "s.yaml", "--out", "O", *PLAN], d, timeout=120)
    return rc, first_error(err) if rc else "planned (apply would read it)", \
        rc == 2 and re.search(r"s\.yaml:\d+:\d+: ", err) is not None and "Traceback" not in err


def _loop(d):
    os.symlink("loop2", d / "loop")
    os.symlink("loop", d / "loop2")


TLS = "deploy:\n  gateway:\n    enabled: true\n    tls_cert: '{}'\n    tls_key: k.pem\n"


# ---------------------------------------------------------------- state.json
def state_case(who, name, edit):
    """`status --no-refresh` of a state.json whose figures ``edit`` changed; handled: exit 2 naming the field."""
    d = _folder(who, name)
    plan = _planned(who, d)
    allocs = [dict(a, path="pulumi") for a in plan["allocations"]]
    state = {"state_version": 1, "service": plan["service"], "allocations": allocs,
             "endpoints": {a["deployment_unit"]: [CLOSED + "/v1"] for a in allocs}}
    edit(state)
    (d / "P" / "state.json").write_text(json.dumps(state))
    rc, out, err = run(who, ["status", "P", "--no-refresh"], d, timeout=60)
    return rc, first_error(err) if rc else out.strip().splitlines()[0][:100], rc == 2 and "state.json: " in err


# ---------------------------------------------------------------- tables on a terminal
def _on_terminal(who, args, d, columns, timeout=180):
    cmd = " ".join([BINS[who], *args])
    env = dict(os.environ, COLUMNS=str(columns), HETINFRA_CACHE_DIR=str(d / "cache"))
    try:
        p = subprocess.run(["script", "-qc", cmd, "/dev/null"], cwd=d, env=env, capture_output=True, text=True,
                           errors="backslashreplace", timeout=timeout)
    except subprocess.TimeoutExpired:
        return "hang", ""
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", p.stdout)
    return p.returncode, [line for line in text.replace("\r\n", "\n").split("\n") if "\r" not in line
                          and not line.startswith(PROGRESS)]


#: the progress lines a command draws while it works and erases when done (Rich's transient display)
PROGRESS = ("simulating ", "hetinfra plan: ")
#: what a table's lines hold (its borders) and a record's (hetinfra.tables: '- column: value')
TABLE = re.compile(r"[\u2500-\u257f]|^[- ] \S")


def table_case(who, name, args, columns, plan_first=False):
    """``args`` on a terminal of ``columns``; handled: no line of a table (or of its records) wider than it,
    and no cell cut to '…'. Plain lines the terminal wraps itself (`wrote P/...`) and the progress lines,
    erased when done, are not counted."""
    d = _folder(who, name)
    if plan_first:
        _planned(who, d)
    rc, lines = _on_terminal(who, args, d, columns)
    if rc == "hang":
        return rc, "no answer", False
    drawn = [line.rstrip() for line in lines if TABLE.search(line)]
    widest = max((len(line) for line in drawn), default=0)
    cut = sum("…" in line for line in lines)
    return rc, f"widest table line {widest} of {columns} columns; {cut} line(s) with a cell cut to '…'", \
        rc == 0 and widest <= columns and cut == 0


# ---------------------------------------------------------------- profile rates
def rate_case(who, rate):
    """`plan` of chat.yaml with a profile row of max_rps ``rate``; handled: exit 2 at the row."""
    d = _folder(who, "rate" + rate)
    (d / "p.csv").write_text("model,gpu,tp,pp,input_tokens,output_tokens,ttft_slo_ms,tpot_slo_ms,max_rps\n"
                             f"llama-3.1-8b,L4,1,1,250,100,2000,120,{rate}\n")
    (d / "s.yaml").write_text((REPO / "services/chat.yaml").read_text() + "profiles: [p.csv]\n")
    rc, out, err = run(who, ["plan", "s.yaml", "--out", "O", *PLAN], d, timeout=120)
    return rc, first_error(err) if rc else "planned", rc == 2 and "p.csv:2: column 'max_rps'" in err


# ---------------------------------------------------------------- file flags
def tls_flag_case(who, name, make):
    """`gateway P --tls-cert X --tls-key X` with X made by ``make``; handled: exit 2 within 15 s naming it."""
    d = _folder(who, name)
    unit = _planned(who, d)["allocations"][0]["deployment_unit"]
    x = make(d)
    rc, out, err = run(who, ["gateway", "P", "--port", str(_port()), "--endpoint", f"{unit}={CLOSED}/v1",
                             "--tls-cert", x, "--tls-key", x, "--no-demand-log"], d, timeout=15)
    if rc == "hang":
        return rc, "no answer in 15 s (blocked opening the certificate)", False
    return rc, first_error(err) or err.strip().splitlines()[-1][:110], rc == 2 and "not a regular file" in err


def _fifo(d):
    os.mkfifo(d / "fifo")
    return "fifo"


def _fifo_link(d):
    _fifo(d)
    os.symlink("fifo", d / "link")
    return "link"


# ---------------------------------------------------------------- as-of in the future
def as_of_case(who, name, stamp):
    """`plan` of services/custom-gpu with its offers row as of ``stamp``; handled: exit 2 at the row."""
    d = _folder(who, name)
    for f in ("service.yaml", "profiles.csv"):
        (d / f).write_text((REPO / "services/custom-gpu" / f).read_text())
    (d / "offers.csv").write_text(
        "cloud,region,instance_type,gpu,gpu_count,gpu_memory_gb,vcpus,memory_gb,price_per_hour,spot_price_per_hour,as_of\n"
        f"neocloud,dc-1,t1-x1,T1,1,48,16,128,0.9,,{stamp}\n")
    rc, out, err = run(who, ["plan", "service.yaml", "--out", "O", "--max-age-h", "24", *PLAN], d, timeout=120)
    stale = "offers.csv" in err and "old" in err
    return rc, first_error(err) if rc else ("planned; offers.csv called stale" if stale else "planned as fresh"), \
        rc == 2 and "column 'as_of'" in err


def main():
    fetch = {"HETINFRA_AWS_PRICING_URL": CLOSED, "HETINFRA_AWS_SPOT": "off", "HETINFRA_FEEDS_RETRIES": "0"}
    cases = [("prices --gpu L4,,H100", lambda w: comma_case(w, "gpu", ["prices", "--gpu", "L4,,H100", "--limit", "1"])),
             ("prices --cloud aws, (a trailing comma)", lambda w: comma_case(w, "cloud", ["prices", "--cloud", "aws,",
                                                                                        "--limit", "1"])),
             ("feeds list --source aws,,gcp", lambda w: comma_case(w, "src", ["feeds", "list", "--source", "aws,,gcp"])),
             ("prices --feeds cache:aws,", lambda w: comma_case(w, "cache", ["prices", "--feeds", "cache:aws,"])),
             ("profile --rates 1,,4 (against a closed port)", lambda w: comma_case(
                 w, "rates", ["profile", "--endpoint", CLOSED, "--model", "m", "--gpu", "L4", "--tp", "1", "--out",
                              "p.csv", "--rates", "1,,4", "--timeout", "5"])),
             ("feeds refresh --source aws, HETINFRA_AWS_REGIONS='us-east-1,'", lambda w: comma_case(
                 w, "regions", ["feeds", "refresh", "--source", "aws"], env={"HETINFRA_AWS_REGIONS": "us-east-1,", **fetch}))]
    cases += [("deploy.gateway.tls_cert: a loop of links", lambda w: spec_file_case(w, "tls-loop", TLS.format("loop"), _loop)),
              ("deploy.gateway.tls_cert: a FIFO", lambda w: spec_file_case(w, "tls-fifo", TLS.format("fifo"), _fifo)),
              ("deploy.gateway.tls_cert: '~nosuchuser/c.pem'", lambda w: spec_file_case(
                  w, "tls-user", TLS.format("~nosuchuser/c.pem"), lambda d: None)),
              ("deploy.gateway.tls_key: a folder", lambda w: spec_file_case(
                  w, "tls-dir", TLS.format("c.pem").replace("k.pem", "d"), lambda d: (d / "d").mkdir())),
              ("profiles: [a loop of links]", lambda w: spec_file_case(w, "prof-loop", "profiles: [loop]\n", _loop))]
    cases += [("state.json: a unit's cost_usd_per_hour 7.444 -> 0.01", lambda w: state_case(
                  w, "cost", lambda s: s["allocations"][0].update(cost_usd_per_hour=0.01))),
              ("state.json: a unit's price per instance 1e300", lambda w: state_case(
                  w, "price", lambda s: s["allocations"][0].update(price_per_instance_usd_per_hour=1e300))),
              ("state.json: live.cost_usd_per_hour 1e300", lambda w: state_case(
                  w, "live", lambda s: s.update(live={"cost_usd_per_hour": 1e300})))]
    cases += [("COLUMNS=20: plan chat.yaml on a terminal", lambda w: table_case(
                  w, "plan20", ["plan", str(REPO / "services/chat.yaml"), *PLAN], 20)),
              ("COLUMNS=20: prices --limit 3 on a terminal", lambda w: table_case(w, "prices20", ["prices", "--limit", "3"], 20)),
              ("COLUMNS=80: simulate P --requests 2000", lambda w: table_case(
                  w, "sim80", ["simulate", "P", "--requests", "2000"], 80, plan_first=True)),
              ("COLUMNS=40: simulate P --requests 2000", lambda w: table_case(
                  w, "sim40", ["simulate", "P", "--requests", "2000"], 40, plan_first=True))]
    cases += [(f"profiles CSV: max_rps {r}", lambda w, r=r: rate_case(w, r)) for r in ("1e-320", "5e-324", "0.0001")]
    cases += [("gateway --tls-cert FIFO --tls-key FIFO", lambda w: tls_flag_case(w, "flag-fifo", _fifo)),
              ("gateway --tls-cert LINK (to a FIFO)", lambda w: tls_flag_case(w, "flag-link", _fifo_link)),
              ("gateway --tls-cert /dev/zero", lambda w: tls_flag_case(w, "flag-zero", lambda d: "/dev/zero"))]
    soon = (datetime.now(timezone.utc) + timedelta(days=30)).strftime("%Y-%m-%d")
    cases += [("offers CSV: as_of 9999-12-31, --max-age-h 24", lambda w: as_of_case(w, "asof9999", "9999-12-31")),
              (f"offers CSV: as_of {soon} (30 days ahead), --max-age-h 24", lambda w: as_of_case(w, "asof30", soon))]
    run_table("round eleven", cases)


if __name__ == "__main__":
    main()
