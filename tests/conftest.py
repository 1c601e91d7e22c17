"""Shared fixtures: paths to the shared data folder and a CLI runner."""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import itertools
import json
import os
import shutil
import socket
import sys
import threading
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import settings

from hetinfra import keep_stack_chunks
from tests.gc_freeze import pytest_runtest_protocol  # noqa: F401 (a hook: full collections skip the kept heap)
from tests.xdist_groups import pytest_collection_finish  # noqa: F401 (a hook: --dist loadgroup's groups)
from tests.xdist_rewrite import pytest_collection  # noqa: F401 (a hook: workers share the rewritten modules)

# The suite starts many Python processes of hetinfra (the CLI, node scripts, stand-ins): with
# PYTHONDONTWRITEBYTECODE set in the shell each one compiles the sources again. Bytecode goes to the
# checkout's __pycache__ folders (.gitignore), as any first import writes it.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# Every property test draws the same examples on every run and machine (a test's own @settings may
# still set its count): a bug a random seed finds once is a flake in CI, not a report; the class it
# belongs to gets its own derandomized property test (tests/document/test_load_messages.py). 50
# examples unless a test says otherwise (Hypothesis' default is 100): the suite runs in at most 2 minutes
# on 2 cores, and its ~140 property tests took 30 s of its CPU at 100 (stop 57: the suite read 108.6-123 s
# on this machine across runs either way: the machine's noise is larger than this cut)
settings.register_profile("hetinfra", derandomize=True, deadline=None, max_examples=50)
settings.load_profile("hetinfra")

# Hypothesis registers its global Random when a process runs its first property test, and registering
# runs gc.collect() (hypothesis.internal.entropy.register_random): by then over the heap of all a worker
# has imported and built (SkyPilot, Pulumi, plans), 1-3 s of a worker's time. Registered here, at start,
# the collection is over a small heap; the property tests still seed and restore it as before.
try:
    from hypothesis.internal.entropy import deterministic_PRNG
except ImportError:  # a Hypothesis without it registers the Random at the first property test, as before
    pass
else:
    with deterministic_PRNG():
        pass

# The suite's processes keep CPython's freed frame-stack chunks as `hetinfra` does (hetinfra.keep_stack_chunks):
# an xdist worker runs its tests deeper in its main thread than a plain process, and there the
# simulator's Python loop of tests/plan/test_templates_pd.py's acceptance test crossed a chunk's end on
# every call (780,000 mmap/munmap pairs: 15 s in the suite against 4 s alone).
keep_stack_chunks()

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SHARED_CATALOG = SHARED / "data" / "skypilot-catalog" / "v8"
WORLD_CATALOG = Path(__file__).resolve().parents[1] / "tools" / "snapshot_data" / "skypilot-v8-world"


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """Request handler of a test server: no access log in the test output."""

    # the handler writes an answer's headers and its body in two sends (wfile is unbuffered): with
    # Nagle's algorithm the body waited for the client's delayed ACK of the headers, ~40 ms an answer
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def loopback_server(handler: type[http.server.BaseHTTPRequestHandler]):
    """Serve ``handler`` on 127.0.0.1 (a free port) in a thread; yields (server, base URL) and stops
    the server on exit (a test may stop it earlier: shutting down twice is harmless)."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield srv, f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)


def shared_path(*parts: str) -> Path:
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"shared data not found: {p}")
    return p


@pytest.fixture
def run_cli():
    """Invoke the public CLI in-process; returns (exit_code, stdout, stderr)."""
    from hetinfra.cli import cli

    def run(*args: str):
        try:  # click < 8.2 mixes stderr into stdout unless told not to (SkyPilot pins click < 8.2)
            runner = CliRunner(mix_stderr=False)
        except TypeError:
            runner = CliRunner()
        res = runner.invoke(cli, list(args), catch_exceptions=True)
        if res.exception is not None and not isinstance(res.exception, SystemExit):
            raise res.exception
        if args and args[0] == "plan" and res.exit_code == 0:
            check_engines_start(args, res.stdout)
        return res.exit_code, res.stdout, res.stderr

    return run


def check_engines_start(args, stdout: str) -> None:
    """Every plan the suite builds through the CLI: no unit whose --max-model-len exceeds its KV cache
    or misses a class routed to it (hetinfra.deploy.preflight.engine_length_problems, issue 21)."""
    from hetinfra.deploy.preflight import engine_length_problems
    from hetinfra.document import Plan

    args = list(args)
    doc = None
    if "--out" in args and (Path(args[args.index("--out") + 1]) / "plan.json").is_file():
        doc = json.loads((Path(args[args.index("--out") + 1]) / "plan.json").read_text())
    elif "--json" in args:
        try:
            doc = json.loads(stdout)
        except ValueError:
            doc = None
    if isinstance(doc, dict) and "allocations" in doc:
        assert engine_length_problems(Plan.parse(doc, "plan.json")) == []  # a unit that has one fails its parse
        assert all("max_model_len" in a for a in doc["allocations"])
        check_ceilings(doc, Path(args[1]))


def check_ceilings(doc: dict, spec_path: Path) -> None:
    """Every plan the suite builds through the CLI (issue 33): no unit loaded past its measured interval
    or its roofline (hetinfra.plan.ceiling) at the load it promises (1 for an unverified plan)."""
    from hetinfra.plan.ceiling import Ceilings
    from hetinfra.spec.load import load_spec

    if not spec_path.is_file():
        return
    fidelity = doc.get("fidelity") or {}
    load = fidelity.get("load", 1.0) if fidelity.get("verified") else 1.0
    spec, _, _ = load_spec(spec_path)
    over = Ceilings(spec, spec_path).over(doc, load)
    assert over == {}, f"units past their ceiling at {load}x: {over}"


@pytest.fixture
def plan_json(run_cli):
    """Plan a spec dict written to tmp and return plan.json as a dict (asserting exit 0). The
    allocation is checked against hand-computed optima of the given rates, so the plan is not
    verified by simulation (which would derate them) unless ``verify=True``."""

    def run(tmp_path: Path, spec: dict, *extra: str, verify: bool = False) -> dict:
        path = tmp_path / "service.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        code, out, err = run_cli("plan", str(path), "--json", *extra, *(() if verify else ("--no-verify",)))
        assert code == 0, f"exit {code}: {err}\n{out}"
        return json.loads(out)

    return run


def install_stand_in(tmp_path: Path, monkeypatch, name: str, source: str, log_env: str):
    """Put an executable Python stand-in for the command ``name`` in ``tmp_path/bin``; it appends
    one JSON line per call to the file named by ``log_env``. Returns (path, calls reader)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    exe = bindir / name
    exe.write_text(f"#!{sys.executable}\n{source}")
    exe.chmod(0o755)
    log = tmp_path / f"{name}-calls.jsonl"
    monkeypatch.setenv(log_env, str(log))

    def calls() -> list:
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    return exe, calls


def write_offers(path: Path, rows: list[dict]) -> None:
    cols = ["cloud", "region", "instance_type", "gpu", "gpu_count", "gpu_memory_gb", "vcpus", "memory_gb",
            "price_per_hour", "spot_price_per_hour"]
    cols += [c for c in ("committed_1y_price_per_hour", "committed_3y_price_per_hour") if any(c in r for r in rows)]
    lines = [",".join(cols)] + [",".join(str(r.get(c, "")) for c in cols) for r in rows]
    path.write_text("\n".join(lines) + "\n")


def write_profiles(path: Path, rows: list[dict]) -> None:
    cols = ["model", "gpu", "tp", "pp", "input_tokens", "output_tokens", "ttft_slo_ms", "tpot_slo_ms", "max_rps"]
    lines = [",".join(cols)] + [",".join(str(r[c]) for c in cols) for r in rows]
    path.write_text("\n".join(lines) + "\n")


_SKY_ENV_KEYS = ("HOME", "SKY_RUNTIME_DIR", "SKYPILOT_DISABLE_USAGE_COLLECTION")


@pytest.fixture(scope="session")
def sky_offline(tmp_path_factory):
    """Import SkyPilot with a private HOME holding the shared catalog extract; no network.

    Yields (sky module, whether the private HOME is in effect). Sockets to INET addresses raise
    while the fixture is active, so any network attempt fails the test.
    """
    if not SHARED_CATALOG.is_dir():
        pytest.skip(f"shared SkyPilot catalog extract not found at {SHARED_CATALOG}")
    saved = {k: os.environ.get(k) for k in _SKY_ENV_KEYS}
    preimported = "sky" in sys.modules
    home = tmp_path_factory.mktemp("skyhome")
    shutil.copytree(SHARED_CATALOG, home / ".sky" / "catalogs" / "v8")
    # The world supplement holds non-US rows of the same upstream files (tools/snapshot_data):
    # with them SkyPilot validates and prices the snapshot's non-US regions too.
    for extra in sorted(WORLD_CATALOG.glob("*/vms.csv")):
        with extra.open() as src, (home / ".sky" / "catalogs" / "v8" / extra.parent.name / "vms.csv").open("a") as dst:
            dst.writelines(src.readlines()[1:])
    os.environ["SKYPILOT_DISABLE_USAGE_COLLECTION"] = "1"
    if not preimported:
        os.environ["HOME"] = str(home)
        os.environ["SKY_RUNTIME_DIR"] = str(home)

    real_connect = socket.socket.connect

    def guarded_connect(self, address):
        # loopback stays open: other tests run their own local servers
        host = address[0] if isinstance(address, tuple) else ""
        if self.family in (socket.AF_INET, socket.AF_INET6) and host not in ("127.0.0.1", "::1", "localhost"):
            raise AssertionError(f"network access attempted during SkyPilot tests: {address!r}")
        return real_connect(self, address)

    mp = pytest.MonkeyPatch()
    mp.setattr(socket.socket, "connect", guarded_connect)
    try:
        sky = pytest.importorskip("sky")
        from sky.catalog import common as catalog_common

        catalog_dir = Path(catalog_common._ABSOLUTE_VERSIONED_CATALOG_DIR)
        if not (catalog_dir / "aws" / "vms.csv").exists():
            pytest.skip(f"sky was imported before this module and its catalog dir {catalog_dir} "
                        "lacks the shared extract")
        yield sky, not preimported
    finally:
        mp.undo()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


#: the real os.fsync, for the test that checks atomic_write_text still flushes to disk (tests/test_fileio.py)
REAL_FSYNC = os.fsync


@pytest.fixture(scope="session", autouse=True)
def _no_fsync():
    """The suite's own processes skip fsync: durability across a power cut is no test's subject (the
    writes stay atomic: a temporary file renamed into place), and every `plan --out`, state and cache
    write paid a disk flush (1,500-3,000 per run, 2-7 ms each on this machine's shared disk: worker
    time spent waiting, more on a slower CI disk). tests/test_fileio.py checks with REAL_FSYNC that
    atomic_write_text flushes before its rename; spawned processes (the CLI, node scripts) keep it."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "fsync", lambda fd: None)
        yield


#: numbers the tests' template cache folders (one per test; a process's base temp is its own)
_CACHE_DIRS = itertools.count()


@pytest.fixture(autouse=True)
def _template_cache_dir(tmp_path_factory, monkeypatch):
    """Every test plans with its own empty template cache (never the user's ~/.cache): a new path under
    the base temp, which the first plan that stores a library makes (a cache folder that is missing is
    an empty cache). Not tmp_path_factory.mktemp: it lists the base temp to number each folder, and
    with one folder per test that listing grew with every test (~1 s CPU a run)."""
    folder = tmp_path_factory.getbasetemp() / "template-caches" / str(next(_CACHE_DIRS))
    monkeypatch.setenv("HETINFRA_CACHE_DIR", str(folder))


@pytest.fixture
def closed_port():
    """A loopback port with nothing listening (connect is refused at once) for the whole test: held
    bound but never listening, so no other process (another xdist worker's server on port 0) can take
    it and answer, as it could a port merely free a moment ago."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


#: every example spec in services/ (subfolders too: services/custom-gpu/service.yaml)
EXAMPLE_SPECS = sorted((REPO / "services").rglob("*.yaml"))

# What a newcomer's fresh shell lacks: the credentials and settings the deploy paths read. The
# examples are planned, and the docs' commands run (tests/docs/test_commands.py), without them.
NEWCOMER_UNSET = ("VLLM_API_KEY", "HF_TOKEN", "HETINFRA_API_KEY", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_BACKEND_URL",
                  "PULUMI_ACCESS_TOKEN", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                  "AWS_SESSION_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CREDENTIALS", "GOOGLE_CLOUD_PROJECT",
                  "CLOUDSDK_CORE_PROJECT", "GOOGLE_OAUTH_ACCESS_TOKEN", "HETINFRA_GCP_API_KEY", "AZURE_ACCESS_TOKEN",
                  "AZURE_SUBSCRIPTION_ID", "AZURE_CLIENT_ID", "ARM_CLIENT_ID", "HETINFRA_FEEDS_SOURCES",
                  "HETINFRA_PREFLIGHT_QUOTAS", "HF_HOME", "HF_HUB_CACHE")


def newcomer_env(root: Path, cache: Path) -> dict[str, str | None]:
    """The environment of a fresh checkout in ``root``: no credentials, a private HOME, the given
    template cache, no `pulumi` on PATH, plain fixed-width output (for CliRunner.invoke's ``env``)."""
    env: dict[str, str | None] = {name: None for name in NEWCOMER_UNSET}
    env.update(HOME=str(root / "home"), HETINFRA_CACHE_DIR=str(cache), PATH="/usr/bin:/bin", NO_COLOR="1",
               COLUMNS="132")
    return env


def invoke_in(root: Path, args: list[str], env: dict[str, str | None]):
    """Run ``hetinfra ARGS`` in-process with ``root`` as the working folder; returns click's Result
    (stdout and stderr apart), re-raising an exception that is not a SystemExit."""
    from hetinfra.cli import cli

    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2 keeps stderr apart by itself
        runner = CliRunner()
    here = os.getcwd()
    os.chdir(root)
    try:
        res = runner.invoke(cli, args, env=env, catch_exceptions=True)
    finally:
        os.chdir(here)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res


def run_shared_dir(tmp_path_factory) -> Path:
    """A folder all xdist workers of this test run share (the controller's base temp; each worker's
    own base temp is a subfolder of it), or the session's base temp without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def made_once(folder: Path, wait: bool = True):
    """Fill ``folder`` once per test run, whichever worker asks first: yields True to the caller that
    must fill it (holding a lock the other workers wait on; a worker that dies releases it) and False
    once it is complete; with ``wait=False``, None at once while another worker is filling it. A
    fill that raised leaves no complete folder, so the next caller retries."""
    import fcntl

    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield None
            return
        done = folder / ".complete"
        if done.exists():
            yield False
            return
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        yield True
        done.touch()


def example_name(spec: Path) -> str:
    """``chat`` for services/chat.yaml, ``custom-gpu/service`` for services/custom-gpu/service.yaml."""
    return str(spec.relative_to(REPO / "services").with_suffix(""))


def checkout_folder(root: Path) -> Path:
    """``root`` laid out as a fresh checkout seen from its top: ``services/`` links the repository's."""
    root.mkdir(parents=True, exist_ok=True)
    try:  # two xdist workers may lay out the shared folder at once: the second finds the link made
        (root / "services").symlink_to(REPO / "services")
    except FileExistsError:
        pass
    (root / "home").mkdir(exist_ok=True)
    return root


class ExamplePlans:
    """The README's `hetinfra plan services/<name>.yaml --out out/<name>` (verified, with baselines) of
    every example, run as a newcomer runs it (a checkout-like folder, newcomer_env, in-process), each
    planned at most once per test run: lazily, by whichever xdist worker asks first (the others wait
    for it or read what it wrote), each example with a template cache of its own.
    ``plans[name]`` -> (out dir, plan.json dict, plan.json text, spec path); ``plans.output(name)``
    -> (exit code, stdout, stderr). Tests must not write into the out dirs: copy one first."""

    def __init__(self, root: Path):
        self.root = checkout_folder(root)
        self._done: dict[str, tuple[Path, dict, str, Path]] = {}

    def names(self) -> list[str]:
        return [example_name(p) for p in EXAMPLE_SPECS]

    def command(self, name: str, out: str | None = None) -> list[str]:
        """The README's command line for ``name`` (relative to ``root``), planning into ``out``."""
        return ["plan", f"services/{name}.yaml", "--out", out or f"out/{name}"]

    def cache(self, name: str) -> Path:
        """``name``'s template cache (filled by its first plan)."""
        return self.root / "cache" / name.replace("/", "--")

    def run(self, name: str, out: str):
        """Plan ``name`` again, exactly as the session's plan was made (same folder, environment and
        template cache), into ``out`` (relative to ``root``); returns click's Result."""
        return invoke_in(self.root, self.command(name, out), newcomer_env(self.root, self.cache(name)))

    def output(self, name: str) -> tuple[int, str, str]:
        self[name]
        saved = json.loads((self._record(name) / "result.json").read_text())
        return saved["exit_code"], saved["stdout"], saved["stderr"]

    def _record(self, name: str) -> Path:
        return self.root / "results" / name.replace("/", "--")

    def _make(self, name: str, wait: bool = True) -> bool:
        """Plan ``name`` unless it is planned; False (at once) while another worker plans it and not ``wait``."""
        with made_once(self._record(name), wait=wait) as first:
            if first is None:
                return False
            if first:
                res = self.run(name, f"out/{name}")
                assert res.exit_code == 0, f"{name}: {res.stdout[-2000:]}{res.stderr[-2000:]}"
                result = {"exit_code": res.exit_code, "stdout": res.stdout, "stderr": res.stderr}
                (self._record(name) / "result.json").write_text(json.dumps(result))
        return True

    def _planned(self, name: str) -> bool:
        return (self._record(name) / ".complete").exists()

    def __getitem__(self, name: str) -> tuple[Path, dict, str, Path]:
        if name not in self._done:
            # while another worker plans it, plan the examples nobody has yet (the run reads them all:
            # the goldens, the artifacts' checks) rather than wait idle on its lock
            if not self._make(name, wait=False):
                for other in self.names():
                    if self._planned(name):
                        break
                    if not self._planned(other):
                        self._make(other, wait=False)
                self._make(name)
            out = self.root / "out" / name
            text = (out / "plan.json").read_text()
            self._done[name] = (out, json.loads(text), text, REPO / "services" / f"{name}.yaml")
        return self._done[name]


def pytest_collection_modifyitems(items) -> None:
    """The repository-wide checks in tests/ itself (a plan in a subprocess, import graphs of tree
    copies: a second or more each) run first, the others after them in their usual order. xdist
    (--dist loadgroup) hands each worker the next test as it finishes one, and these files come last
    in collection order: the run ended on test_layout's subprocess plan while the other worker waited.
    A check that reads the examples' plans keeps its place at the end, when the run has planned them.
    The order is the same on every worker (xdist requires it): a stable sort."""
    here = Path(__file__).parent

    def early(item) -> bool:
        return item.path.parent == here and "example_plans" not in getattr(item, "fixturenames", ())

    items.sort(key=lambda item: (item.get_closest_marker("heavy") is None, not early(item)))


@pytest.fixture(scope="session")
def example_plans(tmp_path_factory) -> ExamplePlans:
    """Every example's verified plan, planned once per test run (see ExamplePlans)."""
    return ExamplePlans(run_shared_dir(tmp_path_factory) / "examples")


@pytest.fixture(scope="session")
def shared_plan(tmp_path_factory):
    """``shared_plan(spec, *flags)`` -> the out folder of `hetinfra plan SPEC --out OUT FLAGS...`,
    planned in-process once per test run (by whichever xdist worker asks first) for every test that
    reads the same plan; SPEC is a path or a spec dict (written next to the plan, ``OUT/../service.yaml``).
    Tests must not write into it: copy it first (copied_plan)."""
    root = run_shared_dir(tmp_path_factory) / "shared-plans"

    def plan(spec: Path | dict, *flags: str) -> Path:
        from hetinfra.cli import cli

        what = spec if isinstance(spec, dict) else str(spec)
        key = hashlib.sha256(json.dumps([what, *flags], sort_keys=True).encode()).hexdigest()[:16]
        with made_once(root / key) as first:
            if first:
                if isinstance(spec, dict):
                    spec = root / key / "service.yaml"
                    spec.write_text(yaml.safe_dump(what, sort_keys=False))
                res = CliRunner().invoke(cli, ["plan", str(spec), "--out", str(root / key / "out"), *flags],
                                         env={"HETINFRA_CACHE_DIR": str(root / "template-cache")})
                assert res.exit_code == 0, f"plan {spec} {' '.join(flags)}: {res.output[-2000:]}"
                (root / key / "output.txt").write_text(res.output)  # what it printed: shared_output
                check_engines_start(["plan", str(spec), "--out", str(root / key / "out"), *flags], res.output)
        return root / key / "out"

    return plan


def shared_output(out: Path) -> str:
    """What `hetinfra plan` printed when it made the shared out folder ``out`` (shared_plan)."""
    return (out.parent / "output.txt").read_text()


def copied_plan(out: Path, to: Path) -> Path:
    """A test's own copy ``to`` of a shared out folder (shared_plan), which the test may change."""
    shutil.copytree(out, to, symlinks=True)
    return to


#: the cores the run was given, before a worker pins itself to one (tests/plan/test_deterministic.py)
RUN_AFFINITY: set[int] = set()


def pytest_configure(config) -> None:
    """Each xdist worker on a core of its own (where the OS lets a process choose): the planner sizes
    its thread pools by the cores it may run on (hetinfra.cores), so two workers each running two
    simulation threads on a 2-core machine contended for it; pinned, each runs its plans in one
    thread, and the suite's results do not depend on it (same input, same plan, on any thread count)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if hasattr(os, "sched_getaffinity"):
        RUN_AFFINITY.update(os.sched_getaffinity(0))
    if worker.startswith("gw") and hasattr(os, "sched_setaffinity"):
        allowed = sorted(os.sched_getaffinity(0))
        count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        if count > 1 and len(allowed) >= count:
            with contextlib.suppress(OSError):  # a sandbox that refuses it runs the worker unpinned
                os.sched_setaffinity(0, {allowed[int(worker[2:]) % len(allowed)]})
