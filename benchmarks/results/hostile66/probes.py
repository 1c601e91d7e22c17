"""Round fifteen's probes (hostile66): each runs one `hetinfra` command on a hostile input in its own folder
and records the exit code and the first lines of stderr. A probe is clean when it exits 0 on purpose, or
with 2/3/4 saying what and where in at most two lines, with no traceback, and leaves no harm behind.

    HETINFRA_SHARED=/work/shared .venv/bin/python benchmarks/results/hostile66/probes.py [BIN] [OUT.json]
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
BIN = sys.argv[1] if len(sys.argv) > 1 else str(REPO / ".venv/bin/hetinfra")
ROOT = Path(os.environ.get("PROBE_DIR", "/tmp/hostile66-probes"))
CHAT = REPO / "services/chat.yaml"
PROBES = []


def probe(fn):
    PROBES.append(fn)
    return fn


def run(args, cwd, env=None, timeout=120, stdin=None):
    e = {**os.environ, "HETINFRA_CACHE_DIR": str(ROOT / "cache"), "COLUMNS": "120", **(env or {})}
    try:
        p = subprocess.run([BIN, *args], cwd=cwd, capture_output=True, text=True, errors="backslashreplace",
                           timeout=timeout, env=e, stdin=stdin if stdin is not None else subprocess.DEVNULL)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return "hang", "", f"no answer in {timeout} s"


def folder(name):
    d = ROOT / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    return d


def planned(d, name="O"):
    rc, _, err = run(["plan", str(CHAT), "--no-verify", "--no-baselines", "--out", name], d)
    assert rc == 0, err
    return d / name


def clear(rc, err, ok=(2,)):
    """exit in ok, no traceback, an 'error:' of at most two lines"""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    return rc in ok and "Traceback" not in err and len(lines) <= 3 and any(ln.lower().startswith("error") for ln in lines)


# ---------------------------------------------------------------- CLI flags
@probe
def simulate_requests_negative():
    d = folder("sim-neg"); planned(d)
    rc, out, err = run(["simulate", "O", "--requests", "-5"], d)
    return rc, err, clear(rc, err)


@probe
def simulate_requests_zero():
    d = folder("sim-zero"); planned(d)
    rc, out, err = run(["simulate", "O", "--requests", "0"], d)
    return rc, err, clear(rc, err)


@probe
def simulate_requests_huge():
    d = folder("sim-huge"); planned(d)
    rc, out, err = run(["simulate", "O", "--requests", str(10 ** 15)], d, timeout=60)
    return rc, err, clear(rc, err)


@probe
def simulate_seed_negative():
    d = folder("sim-seed"); planned(d)
    rc, out, err = run(["simulate", "O", "--requests", "500", "--seed", "-1"], d)
    return rc, err, rc == 0 or clear(rc, err)


@probe
def simulate_seed_max():
    d = folder("sim-seedmax"); planned(d)
    rc, out, err = run(["simulate", "O", "--requests", "500", "--seed", str(2 ** 63 - 1), "--replications", "3"], d)
    return rc, err, rc == 0 or clear(rc, err)


def _bench(d):
    doc = {"model_id": "m", "request_rate": 1, "completed": 200, "failed": 0, "request_throughput": 1,
           "random_input_len": "512", "random_output_len": "128", "max_concurrency": None,
           "mean_ttft_ms": 300, "mean_tpot_ms": 40}
    (d / "r1.json").write_text(json.dumps(doc))


@probe
def profile_import_negative_slo():
    d = folder("pi-neg"); _bench(d)
    rc, out, err = run(["profile-import", "r1.json", "--gpu", "L4", "--tp", "1", "--ttft-ms", "-5",
                        "--tpot-ms", "-1", "--out", "p.csv"], d)
    return rc, err, clear(rc, err) and not (d / "p.csv").exists()


@probe
def profile_import_zero_slo():
    d = folder("pi-zero"); _bench(d)
    rc, out, err = run(["profile-import", "r1.json", "--gpu", "L4", "--tp", "1", "--ttft-ms", "0",
                        "--tpot-ms", "0", "--out", "p.csv"], d)
    return rc, err, clear(rc, err) and not (d / "p.csv").exists()


@probe
def profile_negative_slo():
    d = folder("pr-neg")
    rc, out, err = run(["profile", "--endpoint", "http://127.0.0.1:9", "--model", "m", "--gpu", "L4", "--tp", "1",
                        "--ttft-ms", "-5", "--out", "p.csv"], d, timeout=60)
    return rc, err, clear(rc, err)


def _sweep(d):
    for i, (rate, tpot) in enumerate([(1, 40), (2, 80), (4, 200)]):
        (d / f"r{i}.json").write_text(json.dumps({
            "model_id": "m", "request_rate": rate, "completed": 200, "failed": 0, "request_throughput": rate,
            "random_input_len": "512", "random_output_len": "128", "mean_ttft_ms": 300, "mean_tpot_ms": tpot}))


@probe
def profile_import_out_is_input():
    d = folder("pi-same"); _sweep(d)
    before = (d / "r2.json").read_text()
    rc, out, err = run(["profile-import", "r0.json", "r1.json", "r2.json", "--gpu", "L4", "--tp", "1", "--ttft-ms",
                        "2000", "--tpot-ms", "100", "--out", "r2.json"], d)
    return rc, err, clear(rc, err) and (d / "r2.json").read_text() == before


@probe
def profile_import_out_is_spec():
    d = folder("pi-spec"); _sweep(d); shutil.copy(CHAT, d / "chat.yaml")
    rc, out, err = run(["profile-import", "r0.json", "r1.json", "r2.json", "--gpu", "L4", "--tp", "1", "--ttft-ms",
                        "2000", "--tpot-ms", "100", "--out", "chat.yaml"], d)
    return rc, err, clear(rc, err) and (d / "chat.yaml").read_text() == CHAT.read_text()


@probe
def profile_vllm_cmd_open_quote():
    d = folder("vllm-quote")
    rc, out, err = run(["profile", "--endpoint", "http://127.0.0.1:9", "--model", "m", "--gpu", "L4", "--tp", "1",
                        "--out", "p.csv", "--vllm-cmd", "vllm 'x"], d, timeout=60)
    return rc, err, clear(rc, err)


@probe
def profile_vllm_cmd_trailing_backslash():
    d = folder("vllm-backslash")
    rc, out, err = run(["profile", "--endpoint", "http://127.0.0.1:9", "--model", "m", "--gpu", "L4", "--tp", "1",
                        "--out", "p.csv", "--vllm-cmd", "vllm\\"], d, timeout=60)
    return rc, err, clear(rc, err)


# ---------------------------------------------------------------- what stdout shows
def _printable(text):
    return all(ch.isprintable() or ch == "\n" for ch in text)


@probe
def stdout_status_escape_name():
    d = folder("esc-status"); (d / "O\x1b]0;pwn\x07").mkdir()
    rc, out, err = run(["status", "O\x1b]0;pwn\x07"], d)
    return rc, err or out, rc == 0 and _printable(out) and _printable(err)


@probe
def stdout_plan_out_escape_name():
    d = folder("esc-plan")
    rc, out, err = run(["plan", str(CHAT), "--no-verify", "--no-baselines", "--out", "O\x1b[2J\u202e"], d)
    return rc, err or out.splitlines()[-1], rc == 0 and _printable(out) and _printable(err)


@probe
def stdout_feeds_list_cache_dir_escape():
    d = folder("esc-feeds"); (d / "c\x1b]52;c;cHdu\x07").mkdir()
    rc, out, err = run(["feeds", "list"], d, env={"HETINFRA_CACHE_DIR": str(d / "c\x1b]52;c;cHdu\x07")})
    return rc, err or out, rc == 0 and _printable(out) and _printable(err)


@probe
def replan_log_file_is_spec():
    d = folder("replan-log-spec"); o = planned(d); shutil.copy(CHAT, d / "chat.yaml")
    rc, out, err = run(["replan", "chat.yaml", "--state", "O", "--no-refresh", "--log-file", "chat.yaml"], d)
    return rc, err, (d / "chat.yaml").read_text() == CHAT.read_text() and clear(rc, err)


# ---------------------------------------------------------------- clients of the gateway
def _gateway(d, *extra):
    import socket as so
    with so.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen([BIN, "gateway", "O", "--port", str(port), "--no-demand-log", "--log-level", "warning",
                          "--endpoint", "chat-8b-aws-us-east-1-g6e-xlarge=http://127.0.0.1:9/v1", *extra], cwd=d,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "HETINFRA_API_KEY": "k" * 32, "VLLM_API_KEY": "v" * 32})
    for _ in range(100):
        try:
            so.create_connection(("127.0.0.1", port), 1).close()
            return p, port
        except OSError:
            time.sleep(0.2)
    return p, port


def _trickle(port, head, limit_s):
    """Send ``head`` then a byte a second; seconds until the gateway closed the connection (None: held)."""
    import socket as so
    s = so.create_connection(("127.0.0.1", port)); s.sendall(head); t = time.time()
    try:
        while time.time() - t < limit_s:
            s.settimeout(1)
            try:
                if s.recv(100) is not None:
                    return time.time() - t
            except so.timeout:
                pass
            s.sendall(b"X" if b"\r\n\r\n" not in head else b" ")
    except OSError:
        return time.time() - t
    finally:
        s.close()
    return None


@contextmanager
def _serving(d):
    """A gateway on d/O, stopped (SIGINT, then killed) after the block."""
    p, port = _gateway(d)
    try:
        yield p, port
    finally:
        p.send_signal(signal.SIGINT)
        try:
            p.communicate(timeout=40)
        except subprocess.TimeoutExpired:
            p.kill()


def _slow_client(name, head):
    d = folder(name); planned(d)
    with _serving(d) as (_, port):
        took = _trickle(port, head, 45)
    said = f"held for 45 s and more (a byte a second)" if took is None else f"closed after {took:.0f} s"
    return ("served", said, took is not None and took <= 35)


def _endless_headers(port, limit=256 << 20):
    """Send headers at full speed, without end: bytes sent until the gateway closed (None: it took them all)."""
    import socket as so
    s = so.create_connection(("127.0.0.1", port)); s.sendall(b"GET /health HTTP/1.1\r\n")
    chunk = b"".join(b"X-%d: %s\r\n" % (i, b"v" * 50) for i in range(2000))
    sent = 0
    try:
        while sent < limit:
            s.sendall(chunk); sent += len(chunk)
    except OSError:
        return sent
    finally:
        s.close()
    return None


@probe
def gateway_client_endless_headers():
    d = folder("gw-endless-head"); planned(d)
    with _serving(d) as (p, port):
        got = _endless_headers(port)
        rss = int(Path(f"/proc/{p.pid}/status").read_text().split("VmRSS:")[1].split()[0]) // 1024
    said = (f"took 256 MB of headers; the gateway at {rss} MB" if got is None else
            f"closed after {got >> 10} KiB; the gateway at {rss} MB")
    return ("served", said, got is not None and rss < 500)


@probe
def gateway_client_trickles_headers():
    return _slow_client("gw-slow-head", b"POST /v1/completions HTTP/1.1\r\n")


@probe
def gateway_client_trickles_body():
    return _slow_client("gw-slow-body", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + b"k" * 32
                        + b"\r\nContent-Length: 500\r\n\r\n")


@probe
def schema_bogus():
    d = folder("schema")
    rc, out, err = run(["schema", "bogus"], d)
    return rc, err, rc == 2 and "Traceback" not in err


# ---------------------------------------------------------------- same path, two roles
@probe
def plan_out_is_spec_folder():
    d = folder("out-spec-dir"); (d / "s").mkdir(); shutil.copy(CHAT, d / "s/chat.yaml")
    (d / "s/notes.txt").write_text("mine")
    rc, out, err = run(["plan", "s/chat.yaml", "--no-verify", "--no-baselines", "--out", "s"], d)
    kept = (d / "s/chat.yaml").exists() and (d / "s/notes.txt").exists()
    return rc, err, kept and (rc == 0 or clear(rc, err))


@probe
def plan_spec_inside_out():
    d = folder("spec-in-out"); o = planned(d); shutil.copy(CHAT, o / "chat.yaml")
    rc, out, err = run(["plan", "O/chat.yaml", "--no-verify", "--no-baselines", "--out", "O"], d)
    return rc, err, (o / "chat.yaml").exists() and (rc == 0 or clear(rc, err))


@probe
def plan_out_is_spec_file():
    d = folder("out-spec-file"); shutil.copy(CHAT, d / "chat.yaml")
    rc, out, err = run(["plan", "chat.yaml", "--no-verify", "--no-baselines", "--out", "chat.yaml"], d)
    return rc, err, (d / "chat.yaml").is_file() and clear(rc, err)


@probe
def gateway_demand_log_is_plan():
    d = folder("gw-log-plan"); o = planned(d)
    before = (o / "plan.json").read_text()
    p = subprocess.Popen([BIN, "gateway", "O", "--port", "0", "--demand-log", "O/plan.json"], cwd=d,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, HETINFRA_API_KEY="k" * 32))
    try:
        out, err = p.communicate(timeout=8)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=10)
        rc = "served"
    return rc, err, (o / "plan.json").read_text() == before and clear(rc, err)


@probe
def replan_log_file_is_state_plan():
    d = folder("replan-log-plan"); o = planned(d)
    before = (o / "plan.json").read_text()
    rc, out, err = run(["replan", str(CHAT), "--state", "O", "--no-refresh", "--log-file", "O/plan.json"], d)
    return rc, err, (o / "plan.json").read_text() == before and clear(rc, err)


@probe
def simulate_out_is_plan_file():
    d = folder("sim-out-file"); o = planned(d)
    rc, out, err = run(["simulate", "O", "--requests", "500", "--out", "O/plan.json"], d)
    return rc, err, (o / "plan.json").is_file() and clear(rc, err)


@probe
def plan_caps_is_devnull():
    d = folder("caps-null")
    rc, out, err = run(["plan", str(CHAT), "--no-verify", "--caps", "/dev/null"], d)
    return rc, err, clear(rc, err)


@probe
def plan_state_is_spec():
    d = folder("state-spec")
    rc, out, err = run(["plan", str(CHAT), "--no-verify", "--no-baselines", "--state", str(CHAT)], d)
    return rc, err, clear(rc, err)


# ---------------------------------------------------------------- hand-edited plan.json / state.json
def _edit_plan(d, edit):
    o = planned(d)
    doc = json.loads((o / "plan.json").read_text())
    edit(doc)
    (o / "plan.json").write_text(json.dumps(doc))
    return o


@probe
def plan_json_allocations_string():
    d = folder("pj-alloc-str"); _edit_plan(d, lambda doc: doc.__setitem__("allocations", "x"))
    rc, out, err = run(["simulate", "O", "--requests", "500"], d)
    return rc, err, clear(rc, err)


@probe
def plan_json_huge_allocations():
    d = folder("pj-alloc-huge")
    _edit_plan(d, lambda doc: doc.__setitem__("allocations", doc["allocations"] * 20000))
    rc, out, err = run(["simulate", "O", "--requests", "300"], d, timeout=120)
    return rc, err, clear(rc, err)


@probe
def plan_json_bom():
    d = folder("pj-bom"); o = planned(d)
    (o / "plan.json").write_bytes(b"\xef\xbb\xbf" + (o / "plan.json").read_bytes())
    rc, out, err = run(["simulate", "O", "--requests", "500"], d)
    return rc, err, rc == 0 or clear(rc, err)


@probe
def plan_json_unit_name_shell():
    def edit(doc):
        doc["allocations"][0]["unit"] = "x; rm -rf ~ #"
    d = folder("pj-unit-shell"); _edit_plan(d, edit)
    rc, out, err = run(["simulate", "O", "--requests", "300"], d)
    return rc, err, clear(rc, err)


# ---------------------------------------------------------------- spec text
def _spec(d, old, new):
    text = CHAT.read_text()
    assert old in text, old
    (d / "s.yaml").write_text(text.replace(old, new, 1))


@probe
def spec_bom_crlf():
    d = folder("spec-bom-crlf")
    (d / "s.yaml").write_bytes(b"\xef\xbb\xbf" + CHAT.read_bytes().replace(b"\n", b"\r\n"))
    rc, out, err = run(["plan", "s.yaml", "--no-verify", "--no-baselines"], d)
    return rc, err, rc == 0 or clear(rc, err)


@probe
def spec_two_documents():
    d = folder("spec-two-docs")
    (d / "s.yaml").write_text(CHAT.read_text() + "\n---\nname: other\n")
    rc, out, err = run(["plan", "s.yaml", "--no-verify", "--no-baselines"], d)
    return rc, err, clear(rc, err)


@probe
def spec_tab_indent():
    d = folder("spec-tab")
    (d / "s.yaml").write_text(CHAT.read_text().replace("\n  ", "\n\t", 1))
    rc, out, err = run(["plan", "s.yaml", "--no-verify", "--no-baselines"], d)
    return rc, err, clear(rc, err)


@probe
def spec_merge_key_scalar():
    d = folder("spec-merge")
    (d / "s.yaml").write_text("<<: 5\n" + CHAT.read_text())
    rc, out, err = run(["plan", "s.yaml", "--no-verify", "--no-baselines"], d)
    return rc, err, clear(rc, err)


@probe
def spec_complex_key():
    d = folder("spec-complex-key")
    (d / "s.yaml").write_text("? [a, b]\n: 1\n" + CHAT.read_text())
    rc, out, err = run(["plan", "s.yaml", "--no-verify", "--no-baselines"], d)
    return rc, err, clear(rc, err)


@probe
def spec_python_tag():
    d = folder("spec-tag")
    (d / "s.yaml").write_text("x: !!python/object/apply:os.system ['true']\n" + CHAT.read_text())
    rc, out, err = run(["plan", "s.yaml", "--no-verify", "--no-baselines"], d)
    return rc, err, clear(rc, err)


@probe
def spec_is_a_folder_argument():
    d = folder("spec-folder")
    rc, out, err = run(["plan", "."], d)
    return rc, err, clear(rc, err)


# ---------------------------------------------------------------- environment
@probe
def columns_negative():
    d = folder("cols-neg")
    rc, out, err = run(["prices", "--gpu", "L4", "--limit", "3"], d, env={"COLUMNS": "-5"})
    return rc, err, rc == 0 and "Traceback" not in err


@probe
def columns_huge():
    d = folder("cols-huge")
    rc, out, err = run(["prices", "--gpu", "L4", "--limit", "3"], d, env={"COLUMNS": "9" * 30})
    return rc, err, rc == 0 and "Traceback" not in err


@probe
def tz_bogus():
    d = folder("tz")
    rc, out, err = run(["prices", "--gpu", "L4", "--limit", "3", "--max-age-h", "1"], d, env={"TZ": "Nowhere/X+99"})
    return rc, err, rc == 0 and "Traceback" not in err


@probe
def cache_dir_readonly():
    d = folder("cache-ro"); (d / "c").mkdir(); os.chmod(d / "c", 0o500)
    rc, out, err = run(["plan", str(CHAT), "--no-verify", "--no-baselines"], d, env={"HETINFRA_CACHE_DIR": str(d / "c")})
    os.chmod(d / "c", 0o700)
    return rc, err, rc == 0 or clear(rc, err)


@probe
def lang_c_unicode_spec():
    d = folder("lang-c")
    _spec(d, "name: chat", "name: chät")
    rc, out, err = run(["plan", "s.yaml", "--no-verify", "--no-baselines"], d,
                       env={"LANG": "C", "LC_ALL": "C", "PYTHONIOENCODING": "ascii"})
    return rc, err, rc in (0, 2) and "Traceback" not in err


# ---------------------------------------------------------------- stdin / terminals
@probe
def apply_without_terminal():
    d = folder("apply-noterm"); planned(d)
    rc, out, err = run(["apply", "O"], d)
    return rc, err, rc == 2 and "Traceback" not in err  # a numbered list of every missing prerequisite


@probe
def destroy_nothing():
    d = folder("destroy-none"); planned(d)
    rc, out, err = run(["destroy", "O", "--yes"], d)
    return rc, err, rc == 0 or clear(rc, err)


def main():
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else None
    only = os.environ.get("PROBE_ONLY")
    rows = []
    for fn in PROBES:
        if only and only not in fn.__name__:
            continue
        t = time.time()
        try:
            rc, err, good = fn()
        except Exception as exc:  # the probe itself broke
            rc, err, good = "probe-error", repr(exc), False
        first = " | ".join(ln for ln in err.strip().splitlines()[:2])[:200] if err else ""
        if "Traceback" in err:
            first = "TRACEBACK " + err.strip().splitlines()[-1][:180]
        rows.append({"probe": fn.__name__, "rc": rc, "clean": bool(good), "stderr": first,
                     "s": round(time.time() - t, 1)})
        print(f"{'ok ' if good else 'BAD'} {fn.__name__:34} rc={rc!s:5} {first[:150]}", flush=True)
    print(f"clean {sum(r['clean'] for r in rows)}/{len(rows)}")
    if out:
        out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
