"""The profiling harness end to end: a stand-in `vllm` executable and a loopback HTTP server.

Only 127.0.0.1 is contacted; every subprocess and request has a timeout.
"""

from __future__ import annotations

import json
import _socket
import os
import socket
import sys
import threading
from http.server import ThreadingHTTPServer

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

from hetinfra.cli.profile import profile_command
from hetinfra.errors import InvalidInputError
from hetinfra.perf.bench_import import SLO
from hetinfra.perf.harness import BenchError, ProgressEvent, check_endpoint, normalize_endpoint, run_profile
from hetinfra.perf.profiles import COLUMNS, OPTIONAL_COLUMNS
from tests.conftest import QuietHandler, install_stand_in

MODEL = "test-org/tiny-model"

# Parses the real `vllm bench serve` flags the harness uses (argparse rejects anything else) and
# writes a --save-result JSON with vLLM's keys. Latency grows with --request-rate and input length:
#   mean TPOT = 25 * rate + 0.05 * input_len ms,  mean TTFT = 100 + input_len * rate / 8 ms,
#   achieved request_throughput = min(rate, 3.5) (the server saturates at 3.5 req/s).
STAND_IN = r'''
import argparse, json, os, sys, time
log = os.environ["FAKE_VLLM_LOG"]
with open(log, "a") as fh:
    fh.write(json.dumps(sys.argv) + "\n")
mode = os.environ.get("FAKE_VLLM_MODE", "")
ap = argparse.ArgumentParser(prog="vllm")
ap.add_argument("cmd", choices=["bench"])
ap.add_argument("sub", choices=["serve"])
ap.add_argument("--backend", required=True)
ap.add_argument("--base-url", required=True)
ap.add_argument("--model", required=True)
ap.add_argument("--dataset-name", required=True)
ap.add_argument("--random-input-len", type=int, required=True)
ap.add_argument("--random-output-len", type=int, required=True)
ap.add_argument("--request-rate", type=float, required=True)
ap.add_argument("--num-prompts", type=int, required=True)
ap.add_argument("--percentile-metrics", required=True)
ap.add_argument("--metric-percentiles", required=True)
ap.add_argument("--disable-tqdm", action="store_true")
ap.add_argument("--save-result", action="store_true")
ap.add_argument("--result-dir", required=True)
ap.add_argument("--result-filename", required=True)
ap.add_argument("--metadata", nargs="*", default=[])
a = ap.parse_args()
print("Serving Benchmark Result")
if mode == "fail":
    print("RuntimeError: Server returned 500", file=sys.stderr)
    sys.exit(1)
if mode == "sleep":
    time.sleep(30)
if mode == "nowrite":
    sys.exit(0)
rate, i, o, n = a.request_rate, a.random_input_len, a.random_output_len, a.num_prompts
tpot = 25 * rate + 0.05 * i
ttft = 100 + i * rate / 8
thr = min(rate, 3.5)
doc = {"date": "20250601-120000", "endpoint_type": a.backend, "backend": a.backend, "label": None,
       "model_id": a.model, "tokenizer_id": a.model, "num_prompts": n}
for kv in a.metadata:
    k, v = kv.split("=", 1)
    doc[k.strip()] = v.strip()
doc.update({"request_rate": rate, "burstiness": 1.0, "max_concurrency": None, "duration": n / thr,
            "completed": n, "failed": 0, "total_input_tokens": n * i, "total_output_tokens": n * o,
            "request_throughput": thr, "request_goodput": None, "output_throughput": thr * o,
            "total_token_throughput": thr * (i + o), "max_output_tokens_per_s": thr * o,
            "max_concurrent_requests": 4, "rtfx": 0.0, "latencies": [], "queue_times": []})
pcts = [p for p in a.metric_percentiles.split(",")]
for m, v in (("ttft", ttft), ("tpot", tpot), ("e2el", ttft + tpot * (o - 1))):
    if m not in a.percentile_metrics.split(","):
        continue
    doc.update({f"mean_{m}_ms": v, f"median_{m}_ms": v, f"std_{m}_ms": 0.0})
    for p in pcts:
        doc[f"p{p}_{m}_ms"] = v * (1 + float(p) / 1000)
os.makedirs(a.result_dir, exist_ok=True)
with open(os.path.join(a.result_dir, a.result_filename), "w") as fh:
    json.dump(doc, fh)
'''


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    """An executable `vllm` in tmp_path/bin; returns (path, function reading the argv it was run with)."""
    monkeypatch.delenv("FAKE_VLLM_MODE", raising=False)
    return install_stand_in(tmp_path, monkeypatch, "vllm", STAND_IN, "FAKE_VLLM_LOG")


class _Handler(QuietHandler):  # Nagle's algorithm off: tests/conftest.py QuietHandler says why
    def do_GET(self):  # noqa: N802
        srv = self.server
        srv.seen.append(self.path)
        if self.path == "/health" and srv.health:
            self._send(200, b"")
        elif self.path == "/v1/models":
            body = json.dumps({"object": "list", "data": [{"id": m, "object": "model", "root": m}
                                                          for m in srv.models]}).encode()
            self._send(200, body)
        else:
            self._send(404, b'{"detail":"Not Found"}')

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server():
    """A loopback server answering /health and /v1/models; yields it (``.url``, ``.seen``, ``.models``)."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.seen, srv.models, srv.health = [], [MODEL], True
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}"
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    t.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(timeout=5)


def expected_argv(exe, url, rdir, i, o, rate) -> list[str]:
    return [str(exe), "bench", "serve", "--backend", "openai", "--base-url", url, "--model", MODEL,
            "--dataset-name", "random", "--random-input-len", str(i), "--random-output-len", str(o),
            "--request-rate", rate, "--num-prompts", "20", "--percentile-metrics", "ttft,tpot,e2el",
            "--metric-percentiles", "50,90,99", "--disable-tqdm", "--save-result", "--result-dir", str(rdir),
            "--result-filename", f"in{i}-out{o}-rate{rate}.json",
            "--metadata", f"random_input_len={i}", f"random_output_len={o}",
            "hetinfra_gpu=L4", "hetinfra_tp=1", "hetinfra_pp=1"]


GRID = [(128, 64), (2048, 64)]
RATES = [8, 1, 4, 2]  # any order: swept lowest first


def test_run_profile_end_to_end(tmp_path, fake_vllm, server):
    exe, calls = fake_vllm
    events: list[ProgressEvent] = []
    out = tmp_path / "out" / "profile.csv"
    run = run_profile(server.url + "/v1/", MODEL, "L4", 1, 1, GRID, RATES, SLO(2000, 100), out, 20,
                      vllm_cmd=str(exe), progress=events.append, timeout_s=60)
    rdir = tmp_path / "out" / "profile.bench"
    assert run.result_dir == rdir
    assert server.seen == ["/health", "/v1/models"]
    # in=128: TPOT 31.4, 56.4 pass; 106.4 at 4 req/s fails -> 8 never runs. in=2048: TPOT 127.4 at 1 req/s fails.
    assert calls() == [
        expected_argv(exe, server.url, rdir, 128, 64, "1"),
        expected_argv(exe, server.url, rdir, 128, 64, "2"),
        expected_argv(exe, server.url, rdir, 128, 64, "4"),
        expected_argv(exe, server.url, rdir, 2048, 64, "1"),
    ]
    assert [list(r.argv) for r in run.runs] == calls()
    assert [(r.input_tokens, r.rate, r.passed) for r in run.runs] == [
        (128, 1, True), (128, 2, True), (128, 4, False), (2048, 1, False)]
    assert run.skipped == ((128, 64, 8), (2048, 64, 2), (2048, 64, 4), (2048, 64, 8))
    assert [(e.kind, e.input_tokens, e.rate, e.finished, e.total, e.passed) for e in events] == [
        ("start", 128, 1, 0, 8, None), ("done", 128, 1, 1, 8, True),
        ("start", 128, 2, 1, 8, None), ("done", 128, 2, 2, 8, True),
        ("start", 128, 4, 2, 8, None), ("done", 128, 4, 3, 8, False),
        ("skip", 128, 8, 4, 8, None),
        ("start", 2048, 1, 4, 8, None), ("done", 2048, 1, 5, 8, False),
        ("skip", 2048, 2, 6, 8, None), ("skip", 2048, 4, 7, 8, None), ("skip", 2048, 8, 8, 8, None),
    ]
    # in=128: between 2 (TPOT 56.4) and 4 req/s offered, where the server achieved only 3.5:
    # t = (100 - 56.4) / (106.4 - 56.4) = 0.872 -> 2 + 0.872 * (3.5 - 2) = 3.308
    assert [round(r.max_rps, 6) for r in run.rows] == [3.308, 0]
    assert out.read_text() == (",".join(COLUMNS + OPTIONAL_COLUMNS) + "\n"
                               f"{MODEL},L4,1,1,128,64,2000,100,3.308,mean,\n"
                               f"{MODEL},L4,1,1,2048,64,2000,100,0,mean,\n")
    assert sorted(p.name for p in rdir.iterdir()) == sorted(
        f"in{i}-out64-rate{r}.{ext}" for i, r in ((128, 1), (128, 2), (128, 4), (2048, 1)) for ext in ("json", "log"))
    saved = json.loads((rdir / "in128-out64-rate4.json").read_text())
    assert (saved["random_input_len"], saved["hetinfra_gpu"], saved["request_rate"]) == ("128", "L4", 4.0)


def test_percentile_slo_asks_vllm_for_that_percentile(tmp_path, fake_vllm, server):
    exe, calls = fake_vllm
    run_profile(server.url, MODEL, "L4", 1, 1, [(128, 64)], [1, 2], SLO(2000, 100, "p95"), tmp_path / "p.csv", 20,
                vllm_cmd=str(exe), timeout_s=60)
    argv = calls()[0]
    assert argv[argv.index("--metric-percentiles") + 1] == "50,90,95,99"


def test_missing_vllm_executable(tmp_path, server, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing called vllm there
    with pytest.raises(InvalidInputError, match="`vllm` not found on PATH") as exc:
        run_profile(server.url, MODEL, "L4", 1, 1, GRID, RATES, SLO(2000, 100), tmp_path / "p.csv", 20)
    assert "pip install vllm" in exc.value.hint and exc.value.exit_code == 2
    assert server.seen == []  # checked before contacting anything


def test_endpoint_not_answering(tmp_path, fake_vllm, closed_port):
    exe, calls = fake_vllm
    url = f"http://127.0.0.1:{closed_port}"
    with pytest.raises(BenchError, match=rf"endpoint {url} not answering \(GET /health: ") as exc:
        run_profile(url, MODEL, "L4", 1, 1, GRID, RATES, SLO(2000, 100), tmp_path / "p.csv", 20,
                    vllm_cmd=str(exe), health_timeout_s=2)
    assert exc.value.exit_code == 4 and "reachable" in exc.value.hint
    assert calls() == [] and not (tmp_path / "p.csv").exists()


def test_server_without_health_and_wrong_model(server):
    server.health = False
    assert check_endpoint(server.url, MODEL, 2) == [MODEL]
    assert server.seen == ["/health", "/v1/models"]
    with pytest.raises(InvalidInputError, match=f"the server at {server.url} serves {MODEL}, not other/model"):
        check_endpoint(server.url, "other/model", 2)


@pytest.mark.parametrize("mode, limit, message", [
    ("fail", 60, r"vllm bench serve exited with status 1 at in=128 out=64 rate=1 req/s: "
                 r"RuntimeError: Server returned 500"),
    ("nowrite", 60, r"vllm bench serve wrote no result file at in=128 out=64 rate=1 req/s"),
    # a limit well under the stand-in's 30 s sleep, so a run that outlives it is cut; 0.2 s rather
    # than 1: the test waits the whole limit out
    ("sleep", 0.2, r"vllm bench serve did not finish within 0\.2 s at in=128 out=64 rate=1 req/s"),
])
def test_benchmark_failures(tmp_path, fake_vllm, server, monkeypatch, mode, limit, message):
    exe, calls = fake_vllm
    monkeypatch.setenv("FAKE_VLLM_MODE", mode)
    with pytest.raises(BenchError, match=message) as exc:
        run_profile(server.url, MODEL, "L4", 1, 1, GRID, RATES, SLO(2000, 100), tmp_path / "p.csv", 20,
                    vllm_cmd=str(exe), timeout_s=limit)
    assert exc.value.exit_code == 4 and str(tmp_path / "p.bench" / "in128-out64-rate1.log") in exc.value.hint
    assert len(calls()) == 1 and not (tmp_path / "p.csv").exists()


@pytest.mark.parametrize("kwargs, message", [
    ({"rates": [4]}, "at least two request rates"),
    ({"rates": [1, 0]}, "finite and > 0"),
    ({"grid": [(0, 64)]}, "token counts >= 1"),
    ({"tp": 0}, "tp and pp must be >= 1"),
    ({"endpoint": "127.0.0.1:8000"}, "--endpoint .127.0.0.1:8000.: not an http:.. or https:.. URL"),
])
def test_bad_arguments(tmp_path, kwargs, message):
    args = {"endpoint": "http://127.0.0.1:1", "model": MODEL, "gpu": "L4", "tp": 1, "pp": 1, "grid": GRID,
            "rates": RATES, "slo": SLO(2000, 100), "out_csv": tmp_path / "p.csv", "num_prompts": 20,
            "vllm_cmd": "definitely-not-installed-vllm"}
    with pytest.raises(InvalidInputError, match=message):
        run_profile(**{**args, **kwargs})


def test_normalize_endpoint():
    assert normalize_endpoint("http://10.0.0.5:8000/v1/") == "http://10.0.0.5:8000"
    assert normalize_endpoint(" https://h.example/serve ") == "https://h.example/serve"


def _runner() -> CliRunner:
    try:  # click < 8.2 mixes stderr into stdout unless told not to
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


def test_profile_command(tmp_path, fake_vllm, server, monkeypatch):
    exe, calls = fake_vllm
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")  # `vllm` found on PATH
    out = tmp_path / "profile.csv"
    res = _runner().invoke(profile_command, [
        "--endpoint", server.url, "--model", MODEL, "--gpu", "L4", "--tp", "1", "--inputs", "128,2048",
        "--outputs", "64", "--rates", "1,2,4,8", "--num-prompts", "20", "--timeout", "60", "--out", str(out),
        "--statistic", "mean", "--vllm-version", "0.12.0"])  # the default is p99, as plans' objectives
    assert res.exit_code == 0, (res.stdout, res.stderr)
    assert [c[0] for c in calls()] == [str(exe)] * 4
    assert res.stdout.splitlines() == [
        f"{MODEL} in=128 out=64: max_rps 3.308 (between 2 req/s (passes) and 4 req/s "
        "(fails: mean tpot 106.4 ms > 100 ms))",
        f"{MODEL} in=2048 out=64: max_rps 0 (lowest rate 1 req/s already fails (mean tpot 127.4 ms > 100 ms))",
        f"wrote {out}: 2 row(s) for L4 tp=1 pp=1 under mean ttft<=2000 ms, tpot<=100 ms",
        f"raw results: {tmp_path / 'profile.bench'}",
    ]
    for line in ("in=128 out=64 @ 4 req/s: misses the SLO",
                 f"note: {MODEL} in=128 out=64: at 4 req/s offered the server achieved 3.5 req/s; "
                 "interpolated toward the achieved rate",
                 "note: in=128 out=64: skipped 8 req/s after a lower rate missed the SLO",
                 "note: in=2048 out=64: skipped 2,4,8 req/s after a lower rate missed the SLO"):
        assert line in res.stderr.splitlines()
    assert out.read_text().splitlines()[1:] == [f"{MODEL},L4,1,1,128,64,2000,100,3.308,mean,0.12.0",
                                                f"{MODEL},L4,1,1,2048,64,2000,100,0,mean,0.12.0"]


def test_profile_command_errors(tmp_path, server, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    res = _runner().invoke(profile_command, ["--endpoint", server.url, "--model", MODEL, "--gpu", "L4", "--tp", "1",
                                             "--out", str(tmp_path / "p.csv")])
    assert res.exit_code == 2
    assert res.stderr.splitlines()[-2:] == [
        "error: `vllm` not found on PATH: the vllm benchmark client is needed to profile",
        "  hint: pip install vllm on a machine that can reach the server (only the `vllm bench serve` client "
        "runs there), or pass --vllm-cmd with the path of the vllm executable",
    ]
    res = _runner().invoke(profile_command, ["--endpoint", server.url, "--model", MODEL, "--gpu", "L4", "--tp", "1",
                                             "--rates", "1,x", "--out", "p.csv"])
    assert res.exit_code == 2 and "expected comma-separated request rates" in res.stderr


def test_module_imports_only_click():
    import subprocess

    code = ("import sys; import hetinfra.cli.profile\n"
            "print([m for m in ('rich', 'hetinfra.perf.harness', 'hetinfra.perf.bench_import') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", timeout=60, check=True)
    assert out.stdout.strip() == "[]"


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch):
    """Allow sockets to 127.0.0.1 only. (This also lifts, for these tests, the session-long guard
    that tests/conftest.py's sky_offline fixture puts on socket.connect, which refuses loopback too.)"""
    for k in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(k, raising=False)

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] != "127.0.0.1":
            raise AssertionError(f"non-loopback connection attempted: {address!r}")
        return _socket.socket.connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blocker=st.sampled_from(["the results folder is a file", "a log is a folder", "a result is a folder"]),
       rate=st.sampled_from(["1", "2"]))
def test_property_a_results_path_that_cannot_be_written_is_exit_2(tmp_path_factory, fake_vllm, server, blocker, rate):
    """What the sweep writes (OUT.bench/, each run's .json and .log) where something else is: a file
    named like the results folder was a FileExistsError traceback, a folder where a log or result goes
    an IsADirectoryError one. Each is InvalidInputError (exit 2) naming the path (harness._writing)."""
    exe, _ = fake_vllm
    d = tmp_path_factory.mktemp("blocked")
    rdir = d / "p.bench"
    if blocker.startswith("the results"):
        rdir.write_text("mine")
        bad = rdir
    else:
        bad = rdir / f"in128-out64-rate{rate}.{'log' if 'log' in blocker else 'json'}"
        bad.mkdir(parents=True)
    with pytest.raises(InvalidInputError, match=f"cannot write the benchmark results at {bad}"):
        run_profile(server.url, MODEL, "L4", 1, 1, [(128, 64)], [1, 2], SLO(2000, 1000), d / "p.csv", 20,
                    vllm_cmd=str(exe), timeout_s=60)
