"""Real processes on loopback: stand-in backends (tests/gateway/standin.py) and the real gateway
(`python -m hetinfra.cli gateway`). Every process a test starts is killed by the fixture."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from hetinfra.compile.router import router_weights
from hetinfra.document import Plan
from tests.plan.golden_plans import filled_golden, totals_added_up

REPO = Path(__file__).resolve().parents[2]
MODEL = "chat-8b"
BACKEND_KEY = "backend-secret-7f3a"
CLIENT_KEY = "client-key-1"

# unit -> class weights: the plan's routing, made up so that every class is split differently.
UNITS = {"u1": "chat-8b-aws-us-east-1-g5-xlarge", "u2": "chat-8b-aws-us-east-1-g6e-xlarge",
         "u3": "chat-8b-gcp-us-central1-a2-highgpu-1g"}
CLASSES = {  # name: (input edge, output edge, {unit: share})
    "in<=250,out<=100": (250, 100, {"u1": 0.5, "u2": 0.3, "u3": 0.2}),
    "in<=250,out<=1000": (250, 1000, {"u2": 0.7, "u3": 0.3}),
    "in<=2000,out<=100": (2000, 100, {"u1": 0.25, "u3": 0.75}),
    "in<=2000,out<=1000": (2000, 1000, {"u3": 1.0}),
}


def make_plan() -> dict:
    """A plan.json (hetinfra.document.Plan) of three made-up units: the golden chat plan's other keys."""
    base = filled_golden("chat")
    allocations = []
    for short, dep in UNITS.items():
        cloud, region = ("gcp", "us-central1") if short == "u3" else ("aws", "us-east-1")
        allocations.append(dict(base["allocations"][0], **{
            "model": MODEL, "unit": f"{MODEL}|{cloud}|{short}|tp1x1|{region}|ondemand", "deployment_unit": dep,
            "cloud": cloud, "region": region, "gpu": "L4", "instance_type": short, "count": 1, "instances": 1,
            "nodes_per_replica": 1, "pp": 1, "layer_partition": None, "target_qps_per_replica": 2.0,
            "routed_rps": 1.0, "skypilot_task": f"skypilot/{dep}.yaml", "alternates": [], "ondemand_fallback": None,
            "cost_usd_per_hour": base["allocations"][0]["price_per_instance_usd_per_hour"]}))
    full = {short: a["unit"] for short, a in zip(UNITS, allocations)}
    routing = {MODEL: {name: [{"unit": full[u], "share": s, "rps": s} for u, s in w.items()]
                       for name, (_, _, w) in CLASSES.items()}}
    rate = base["models"][0]["rate_rps"]  # the figures add up, as every plan's (hetinfra.document.consistency)
    classes = [{"name": n, "input_tokens": i, "output_tokens": o, "share": 0.25, "rate_rps": 0.25 * rate}
               for n, (i, o, _) in CLASSES.items()]
    return totals_added_up(dict(base, allocations=allocations, routing=routing,
                                models=[dict(base["models"][0], name=MODEL, classes=classes)]))


def write_out(out: Path, plan: dict | None = None) -> Path:
    plan = plan or make_plan()
    (out / "router").mkdir(parents=True, exist_ok=True)
    (out / "plan.json").write_text(json.dumps(plan, indent=2))
    (out / "router" / "weights.json").write_text(json.dumps(router_weights(Plan.parse(plan)), indent=2))
    return out


def socket_free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port() -> int:
    """A port free now: another process may still take it before ours binds (see ``Procs.gateway``)."""
    return socket_free_port()


#: the TLS context of the tests' many short-lived clients: httpx builds a new one per client (loading
#: the CA bundle, ~30 ms) though these clients speak plain HTTP to 127.0.0.1
CLIENT_TLS = httpx.create_ssl_context()


def wait_http(url: str, timeout: float = 20.0, status: int = 200) -> None:
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=1.0, verify=CLIENT_TLS) as client:
        while time.monotonic() < deadline:
            try:
                if client.get(url).status_code == status:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer {status} within {timeout} s")


def listening_pid_owns(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds the listening TCP socket on ``port`` (Linux /proc; elsewhere True).

    A free port can be taken by anyone between :func:`free_port` and the gateway's bind (another xdist
    worker's stand-in binds port 0), and then an impostor answers ``/health`` while our gateway exits on
    "port in use": the tests would talk to a process that dies with its own test (connection refused)."""
    if not Path("/proc/net/tcp").exists():
        return True
    try:
        inodes = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    except OSError:  # the process is gone
        return False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port and f"socket:[{inode}]" in inodes:
                return True
    return False


class PortTaken(Exception):
    """The port chosen for a gateway was bound by another process before the gateway could."""


class Procs:
    def __init__(self, logs: Path):
        self.procs: list[subprocess.Popen] = []
        self.logs = logs
        self.stderr_files: dict[int, Path] = {}

    def stderr_of(self, p: subprocess.Popen) -> str:
        """What ``p`` wrote to stderr so far (a file, not a pipe: a pipe nobody reads fills and blocks)."""
        return self.stderr_files[p.pid].read_text(errors="replace")

    def backend(self, name: str, *, key: str | None = BACKEND_KEY, mode: str = "ok", tokens: int = 4,
                delay_ms: float = 5.0) -> tuple[subprocess.Popen, str]:
        cmd = [sys.executable, "-m", "tests.gateway.standin", "--name", name, "--mode", mode, "--tokens", str(tokens),
               "--delay-ms", str(delay_ms)] + (["--key", key] if key else [])
        p = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.procs.append(p)
        line = p.stdout.readline()
        assert line.startswith("PORT "), line
        return p, f"http://127.0.0.1:{int(line.split()[1])}/v1"

    def gateway(self, source: Path, endpoints: list[str], *extra: str, env: dict | None = None,
                client_key: str | None = CLIENT_KEY) -> tuple[subprocess.Popen, str]:
        """A gateway on a free port, answering ``/health`` itself; a port taken meanwhile is tried anew."""
        environ = {k: v for k, v in os.environ.items() if k not in ("HETINFRA_API_KEY", "VLLM_API_KEY")}
        environ["VLLM_API_KEY"] = BACKEND_KEY
        if client_key:
            environ["HETINFRA_API_KEY"] = client_key
        environ.update(env or {})
        for _ in range(3):
            try:
                return self._start_gateway(source, endpoints, extra, environ)
            except PortTaken:
                continue
        raise AssertionError("three free ports were taken before the gateway could bind them")

    def _start_gateway(self, source: Path, endpoints: list[str], extra: tuple, environ: dict):
        port = free_port()
        cmd = [sys.executable, "-m", "hetinfra.cli", "gateway", str(source), "--port", str(port),
               "--health-interval-s", "0.2", "--log-level", "warning", *extra]
        for e in endpoints:
            cmd += ["--endpoint", e]
        log = self.logs / f"gateway-{len(self.procs)}.stderr"
        with log.open("w") as err:
            p = subprocess.Popen(cmd, cwd="/", stdout=subprocess.DEVNULL, stderr=err, text=True, env=environ)
        self.procs.append(p)
        self.stderr_files[p.pid] = log
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20.0
        while time.monotonic() < deadline:
            if p.poll() is not None:
                if "in use" in self.stderr_of(p):
                    raise PortTaken(port)
                raise AssertionError(f"the gateway exited ({p.returncode}): {self.stderr_of(p)}")
            if listening_pid_owns(p.pid, port):
                wait_http(url + "/health", timeout=max(0.1, deadline - time.monotonic()))
                return p, url
            time.sleep(0.05)
        p.kill()
        raise AssertionError(f"the gateway did not listen on {port} within 20 s: {self.stderr_of(p)}")

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is not None and p.pid in self.stderr_files and p.returncode not in (0, -signal.SIGTERM):
                print(f"gateway {p.pid} had exited ({p.returncode}):", self.stderr_of(p))  # shown on failure
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


@pytest.fixture
def procs(tmp_path_factory):
    ps = Procs(tmp_path_factory.mktemp("procs"))
    yield ps
    ps.stop()


@pytest.fixture(scope="module")
def module_procs(tmp_path_factory):
    ps = Procs(tmp_path_factory.mktemp("procs"))
    yield ps
    ps.stop()


def prompt_for(cls: str) -> str:
    """A prompt whose approximate token count (4 chars/token) falls in the class's input bucket."""
    return "x" * (4 * (100 if cls.startswith("in<=250") else 1200))


def max_tokens_for(cls: str) -> int:
    return 50 if cls.endswith("out<=100") else 700


def auth(key: str = CLIENT_KEY) -> dict:
    return {"authorization": f"Bearer {key}"}


@pytest.fixture(autouse=True)
def _fresh_event_loop():
    """asyncio.run() leaves no current event loop behind; later tests (Pulumi's mocks) expect one."""
    import asyncio

    yield
    asyncio.set_event_loop(asyncio.new_event_loop())
