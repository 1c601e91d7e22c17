"""Round sixteen's probes (hostile67): each runs `hetinfra` on a hostile input in its own folder and records
the exit code and the first lines of stderr. A probe is clean when the command exits 0 on purpose, or 2/3/4
saying what and where in at most two lines, with no traceback, and leaves no harm behind (a log every later
run can read; no offer priced from a number no CSV writes).

    HETINFRA_SHARED=/work/shared .venv/bin/python benchmarks/results/hostile67/probes.py [BIN] [OUT.json]
"""
import csv
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
BIN = sys.argv[1] if len(sys.argv) > 1 else str(REPO / ".venv/bin/hetinfra")
ROOT = Path(os.environ.get("PROBE_DIR", "/tmp/hostile67-probes"))
CHAT = REPO / "services/chat.yaml"
KEY = "k" * 32
UNIT = "chat-8b-aws-us-east-1-g6e-xlarge"
PROBES = []
REPLAN_OK = (0, 10, 11)  # replan: nothing to do, a proposal, applied (docs/cli.md)


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


# ---------------------------------------------------------------- a backend and a gateway on loopback
def _port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


BACKEND = r'''
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def _send(self, b):
        self.send_response(200); self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def do_GET(self): self._send(b'{"data":[{"id":"chat-8b"}]}')
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self._send(json.dumps({"id": "x", "choices": [{"text": "hi"}], "usage": {"completion_tokens": 1}}).encode())
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'''


def _wait_port(port, tries=100):
    for _ in range(tries):
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return True
        except OSError:
            time.sleep(0.2)
    return False


@contextmanager
def _serving(d, *extra, log=None):
    """A fake vLLM backend and a gateway on d/O; both stopped by their ids after the block."""
    bport, gport = _port(), _port()
    backend = subprocess.Popen([sys.executable, "-c", BACKEND, str(bport)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    logs = ["--demand-log", str(log)] if log else ["--no-demand-log"]
    gw = subprocess.Popen([BIN, "gateway", "O", "--port", str(gport), "--log-level", "warning", *logs,
                           "--endpoint", f"{UNIT}=http://127.0.0.1:{bport}/v1", *extra], cwd=d,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env={**os.environ, "HETINFRA_API_KEY": KEY, "VLLM_API_KEY": "v" * 32,
                               "HETINFRA_CACHE_DIR": str(ROOT / "cache")})
    box = {"stderr": ""}
    try:
        _wait_port(bport)
        _wait_port(gport)
        yield gport, box
    finally:
        gw.send_signal(signal.SIGINT)
        try:
            box["stderr"] = gw.communicate(timeout=30)[1]
        except subprocess.TimeoutExpired:
            gw.kill()
            box["stderr"] = gw.communicate()[1]
        backend.kill()
        backend.wait()


def _raw(port, data, wait=5.0):
    """Send ``data`` on one connection; the answer's status line (or what happened)."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(wait)
    got = b""
    try:
        s.sendall(data)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    except socket.timeout:
        got += b" (no answer in %d s)" % wait
    except OSError as exc:
        got += repr(exc).encode()
    finally:
        s.close()
    return got.split(b"\r\n", 1)[0].decode("latin-1")


def _post(port, body, headers=b""):
    head = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + KEY.encode() + b"\r\n" + headers)
    return head + (b"Content-Length: %d\r\n\r\n" % len(body) if b"Content-Length" not in headers
                   and b"Transfer-Encoding" not in headers else b"\r\n") + body


BODY = b'{"model":"chat-8b","prompt":"hi","max_tokens":5}'


def _requests(port, n):
    return [_raw(port, _post(port, BODY)) for _ in range(n)]


# ---------------------------------------------------------------- appends a stopped run left cut short
HEADER = "timestamp,model,input_tokens,output_tokens,region,class,completion_tokens,status\n"


def _log_rows(n, first):
    return "".join(f'{first + 2 * k:.3f},chat-8b,200,100,,"in<=250,out<=100",90,200\n' for k in range(n))


def _torn_log(path, n=3000):
    """A gateway's log of n rows over the last hours whose last row a killed gateway left cut short."""
    now = time.time()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + _log_rows(n, now - 2 * n - 60) + f"{now - 30:.3f},chat-8b,2")


def _whole_rows(path):
    """Whether every line of the log is the header or a row of its 8 cells."""
    rows = list(csv.reader(io.StringIO(path.read_text())))
    return all(len(r) == 8 for r in rows) and sum(r == HEADER.strip().split(",") for r in rows) == 1


def _replan(d, *extra, env=None):
    return run(["replan", str(CHAT), "--state", "O", "--no-refresh", *extra], d, env=env)


@probe
def demand_log_torn_then_gateway_restarts():
    d = folder("torn-restart"); o = planned(d); log = o / "gateway/demand.csv"; _torn_log(log)
    with _serving(d, log=log) as (port, box):
        said = _requests(port, 3)
    rc, out, err = _replan(d, "--demand-log", str(log))
    whole = _whole_rows(log)
    note = f"log rows whole: {whole}; " + (err.strip().splitlines() or [out.strip()[:150]])[0]
    return rc, note, rc in REPLAN_OK and whole and all(" 200 " in s for s in said)


@probe
def demand_log_torn_replan_reads_it():
    d = folder("torn-read"); planned(d); _torn_log(d / "O/gateway/demand.csv")
    rc, out, err = _replan(d, "--demand-log", "O/gateway/demand.csv")
    return rc, err or out.strip()[:200], rc in REPLAN_OK and "Traceback" not in err


@probe
def replan_log_torn_line():
    d = folder("torn-replan-log"); o = planned(d)
    (o / "replan.log").write_text("=== an earlier run\ndemand: the log covers 2.0")
    rc, out, err = _replan(d)
    lines = (o / "replan.log").read_text().splitlines()
    glued = any("covers 2.0" in ln and "===" in ln for ln in lines)
    return rc, (err.strip() or out.strip())[:200] + f"; a run glued onto the cut line: {glued}", rc in REPLAN_OK and not glued


@probe
def demand_rotation_torn_read_through_the_gateway():
    d = folder("torn-rotation"); o = planned(d); log = o / "gateway/demand.csv"
    _torn_log(log.with_name("demand.csv.1"))
    now = time.time()
    log.write_text(HEADER + _log_rows(20, now - 50))
    with _serving(d, log=log) as (port, box):
        rc, out, err = _replan(d, "--demand-from", f"http://127.0.0.1:{port}/admin/demand.csv",
                               env={"HETINFRA_API_KEY": KEY})
    return rc, (err.strip() or out.strip())[:200], rc in REPLAN_OK and "Traceback" not in err


@probe
def demand_log_two_gateways_at_once():
    d = folder("two-gateways"); o = planned(d); log = o / "gateway/demand.csv"
    with _serving(d, log=log) as (p1, _), _serving(d, log=log) as (p2, _):
        import threading
        threads = [threading.Thread(target=_requests, args=(p, 60)) for p in (p1, p2) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    rows = [r for r in csv.reader(io.StringIO(log.read_text())) if r and r[0] != "timestamp"]
    return "served", f"{len(rows)} rows of 240, all whole: {_whole_rows(log)}", len(rows) == 240 and _whole_rows(log)


# ---------------------------------------------------------------- numbers in the feeds' CSVs
OFFERS_HEADER = "cloud,region,instance_type,gpu,gpu_count,gpu_memory_gb,vcpus,memory_gb,price_per_hour,spot_price_per_hour\n"


def _offers(d, **cells):
    """An offers file of a good g6e.xlarge row and a g6e.2xlarge row with ``cells`` (column -> text)."""
    good = dict(zip(OFFERS_HEADER.strip().split(","), "aws,us-east-1,g6e.xlarge,L40S,1,48,4,32,1.861,".split(",")))
    bad = {**good, "instance_type": "g6e.2xlarge", "vcpus": "8", "memory_gb": "64", **cells}
    (d / "f.csv").write_text(OFFERS_HEADER + ",".join(good.values()) + "\n" + ",".join(bad.values()) + "\n")


def _prices_lists_2xlarge(d):
    rc, out, err = run(["prices", "--feeds", str(d / "f.csv"), "--gpu", "L40S", "--json"], d)
    try:
        listed = [o for o in json.loads(out).get("offers", []) if o.get("instance_type") == "g6e.2xlarge"]
    except (ValueError, AttributeError):
        listed = []
    return rc, out, err, listed


@probe
def prices_feeds_price_with_underscore():
    d = folder("feeds-underscore"); _offers(d, price_per_hour="1_0")
    rc, out, err, listed = _prices_lists_2xlarge(d)
    said = f"g6e.2xlarge listed at ${listed[0].get('price_per_hour')}/h" if listed else (err.strip() or "row dropped")
    return rc, said[:200], not listed and "Traceback" not in err


@probe
def prices_feeds_count_in_arabic_digits():
    d = folder("feeds-digits"); _offers(d, gpu_count="١", price_per_hour="٣")
    rc, out, err, listed = _prices_lists_2xlarge(d)
    said = f"g6e.2xlarge listed at ${listed[0].get('price_per_hour')}/h" if listed else (err.strip() or "row dropped")
    return rc, said[:200], not listed and "Traceback" not in err


@probe
def plan_feeds_price_with_underscore():
    d = folder("plan-feeds-underscore")
    (d / "f.csv").write_text(OFFERS_HEADER + "aws,us-east-1,g6e.xlarge,L40S,1,48,4,32,1_0,\n")
    rc, out, err = run(["plan", str(CHAT), "--feeds", str(d / "f.csv"), "--no-verify", "--no-baselines", "--json"], d)
    try:
        cost = json.loads(out).get("cost_usd_per_hour")
    except ValueError:
        cost = None
    said = f"planned at ${cost}/h from a price cell '1_0'" if cost else (err.strip() or out.strip())
    return rc, said[:200], cost is None and clear(rc, err, ok=(2, 3, 4))


CATALOG_COLS = ["InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB", "GpuInfo", "Price",
                "SpotPrice", "Region", "AvailabilityZone", "Arch"]


def _catalog(d, **cells):
    (d / "cat/aws").mkdir(parents=True)
    good = dict(zip(CATALOG_COLS, ["g6.xlarge", "L4", "1", "4", "16", "", "0.8048", "0.4", "us-east-1", "use1-az1",
                                   "x86_64"]))
    bad = {**good, "InstanceType": "g6.2xlarge", "vCPUs": "8", "MemoryGiB": "32", **cells}
    buf = io.StringIO()
    w = csv.DictWriter(buf, CATALOG_COLS)
    w.writeheader()
    w.writerows([good, bad])
    (d / "cat/aws/vms.csv").write_text(buf.getvalue())
    return run(["feeds", "refresh", "--source", "skypilot", "--json"], d,
               env={"HETINFRA_SKYPILOT_CATALOG": str(d / "cat"), "HETINFRA_CACHE_DIR": str(d / "store")})


def _stored_2xlarge(d):
    return [ln for p in (d / "store").rglob("offers.csv") for ln in p.read_text().splitlines() if "g6.2xlarge" in ln]


@probe
def feeds_catalog_gpu_count_inf():
    d = folder("catalog-inf"); rc, out, err = _catalog(d, AcceleratorCount="inf")
    return rc, err.strip()[:200], clear(rc, err, ok=(4,)) and "'inf'" in err and not _stored_2xlarge(d)


@probe
def feeds_catalog_price_with_underscore():
    d = folder("catalog-underscore"); rc, out, err = _catalog(d, Price="1_0")
    stored = _stored_2xlarge(d)
    return rc, (f"stored: {stored[0]}" if stored else err.strip())[:200], not stored and "Traceback" not in err


# ---------------------------------------------------------------- the gateway's HTTP and JSON inputs
def _answers(cases):
    """Each case's status line, then a good request's: clean when every case is a 4xx and the good one 200."""
    d = folder("gw-" + cases[0][0]); planned(d)
    with _serving(d) as (port, box):
        said = [(name, _raw(port, data)) for name, data in cases]
        after = _raw(port, _post(port, BODY))
    ok = all(s.startswith("HTTP/1.1 4") for _, s in said) and " 200 " in after
    return "served", "; ".join(f"{n}: {s[9:]}" for n, s in said) + f"; then {after[9:]}", ok


@probe
def gateway_request_framing():
    return _answers([
        ("cl_negative", _post(0, BODY, b"Content-Length: -1\r\n")),
        ("cl_huge", _post(0, BODY, b"Content-Length: 99999999999999999999999\r\n")),
        ("cl_twice", _post(0, BODY, b"Content-Length: 5\r\nContent-Length: %d\r\n" % len(BODY))),
        ("cl_and_chunked", _post(0, b"%x\r\n" % len(BODY) + BODY + b"\r\n0\r\n\r\n",
                                 b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n")),
        ("chunk_size_bad", _post(0, b"zz\r\n" + BODY + b"\r\n0\r\n\r\n", b"Transfer-Encoding: chunked\r\n")),
        ("chunk_size_huge", _post(0, b"ffffffffffffffffff\r\n" + BODY, b"Transfer-Encoding: chunked\r\n")),
    ])


@probe
def gateway_json_numbers_and_nesting():
    return _answers([
        ("max_tokens_1e400", _post(0, b'{"model":"chat-8b","prompt":"hi","max_tokens":1e400}')),
        ("int_5000_digits", _post(0, b'{"model":"chat-8b","prompt":"hi","max_tokens":' + b"9" * 5000 + b"}")),
        ("nested_10000", _post(0, b"[" * 10000 + b"]" * 10000)),
        ("model_twice", _post(0, b'{"model":"chat-8b","prompt":"hi","model":"x"}')),
        ("lone_surrogate", _post(0, b'{"model":"chat-8b","prompt":"\\ud800"}')),
        ("not_utf8", _post(0, b'{"model":"chat-8b","prompt":"\xff"}')),
    ])


@probe
def gateway_source_rewritten_within_its_mtime():
    """plan.json rewritten in place (as `cp` does) keeping its mtime (the rest of a write landing in the clock tick
    of the half the gateway read): the gateway reloads it."""
    d = folder("gw-reload-mtime"); o = planned(d)
    with _serving(d, "--reload-interval-s", "0.5") as (port, box):
        time.sleep(1.5)
        st = (o / "plan.json").stat()
        (o / "plan.json").write_text((o / "plan.json").read_text() + "  ")
        os.utime(o / "plan.json", ns=(st.st_atime_ns, st.st_mtime_ns))
        time.sleep(2.5)
        s = socket.create_connection(("127.0.0.1", port)); s.settimeout(5)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        got = b""
        while chunk := s.recv(65536):
            got += chunk
        s.close()
    line = next((ln for ln in got.decode("latin-1").splitlines() if ln.startswith("hetinfra_gateway_reloads_total")
                 and 'result="ok"' in ln), 'hetinfra_gateway_reloads_total{result="ok"} 0.0')
    return "served", line, not line.endswith(" 0.0")


# ---------------------------------------------------------------- files and variables, numbers past the largest
def _edit_plan(d, edit):
    o = planned(d)
    text = (o / "plan.json").read_text()
    (o / "plan.json").write_text(edit(text))
    return o


@probe
def plan_json_figure_past_the_largest():
    d = folder("pj-1e400"); _edit_plan(d, lambda t: t.replace('"utilization": 0.', '"utilization": 1e400, "x_": 0.', 1))
    rc, out, err = run(["simulate", "O", "--requests", "300"], d)
    return rc, err, clear(rc, err)


@probe
def plan_json_from_a_later_version():
    d = folder("pj-version"); _edit_plan(d, lambda t: t.replace('"plan_version": 1', '"plan_version": 2', 1))
    rc, out, err = run(["profile", "O", "--launch", "--dry-run"], d)
    return rc, err, clear(rc, err)


@probe
def architecture_size_past_the_largest():
    d = folder("arch-1e400")
    (d / "c.json").write_text('{"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":1e400,'
                              '"intermediate_size":14336,"num_attention_heads":32,"num_key_value_heads":8,'
                              '"num_hidden_layers":32,"vocab_size":128256,"max_position_embeddings":8192}')
    rc, out, err = run(["estimate", "--architecture", "c.json", "--gpu", "L4", "--input", "512", "--output", "128",
                        "--ttft-ms", "2000", "--tpot-ms", "100"], d)
    return rc, err, clear(rc, err)


@probe
def cache_dir_is_a_file():
    d = folder("cache-file"); (d / "c").write_text("x")
    rc, out, err = run(["plan", str(CHAT), "--no-verify", "--no-baselines"], d, env={"HETINFRA_CACHE_DIR": str(d / "c")})
    return rc, err, clear(rc, err)


@probe
def skypilot_catalog_is_a_device():
    d = folder("catalog-device")
    rc, out, err = run(["feeds", "refresh", "--source", "skypilot"], d, env={"HETINFRA_SKYPILOT_CATALOG": "/dev/zero"})
    return rc, err, clear(rc, err)


@probe
def gateway_host_not_ascii():
    d = folder("gw-host"); planned(d)
    rc, out, err = run(["gateway", "O", "--host", "é.example", "--port", "0", "--no-demand-log"], d, timeout=20,
                       env={"HETINFRA_API_KEY": KEY})
    err = "\n".join(ln for ln in err.splitlines() if "VLLM_API_KEY" not in ln)
    return rc, err, clear(rc, err)


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
        first = " | ".join(ln for ln in err.strip().splitlines()[:2])[:220] if err else ""
        if "Traceback" in err:
            first = "TRACEBACK " + err.strip().splitlines()[-1][:200]
        rows.append({"probe": fn.__name__, "rc": rc, "clean": bool(good), "stderr": first,
                     "s": round(time.time() - t, 1)})
        print(f"{'ok ' if good else 'BAD'} {fn.__name__:44} rc={rc!s:6} {first[:160]}", flush=True)
    print(f"clean {sum(r['clean'] for r in rows)}/{len(rows)}")
    if out:
        out.write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
