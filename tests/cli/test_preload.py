"""Loading later modules beside the first solve (hetinfra.cli.preload)."""

from __future__ import annotations

import gc
import importlib.util
import sys
from pathlib import Path

from hetinfra.cli import plan as plan_cli
from hetinfra.cli import preload
from hetinfra.cli.preload import Preloader, SolveStarts

REPO = Path(__file__).resolve().parents[2]
LATER = plan_cli.VERIFICATION + plan_cli.PLAN_ASSEMBLY + plan_cli.SUMMARY


def _module(tmp_path, monkeypatch, name: str, body: str = "") -> str:
    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_it_loads_its_modules_on_a_side_thread_once_started(tmp_path, monkeypatch):
    name = _module(tmp_path, monkeypatch, "preload_probe_a", "import threading\nLOADER = threading.current_thread().name\n")
    with Preloader([name]) as loader:
        assert name not in sys.modules  # nothing before start: before the solve it would only compete for the GIL
        loader.start()
    assert sys.modules[name].LOADER == "hetinfra-preload"


def test_a_module_that_fails_stops_the_loading_quietly(tmp_path, monkeypatch):
    bad = _module(tmp_path, monkeypatch, "preload_probe_bad", "raise ValueError('broken')\n")
    after = _module(tmp_path, monkeypatch, "preload_probe_after")
    with Preloader([bad, after]) as loader:
        loader.start()
    assert bad not in sys.modules and after not in sys.modules  # the main thread meets the error where it imports


def test_the_collector_is_off_while_it_loads_only_where_the_process_is_ours(tmp_path, monkeypatch):
    name = _module(tmp_path, monkeypatch, "preload_probe_gc", "import gc\nENABLED = gc.isenabled()\n")
    frozen = gc.get_freeze_count()
    try:
        monkeypatch.setattr(preload, "own_collector", True)
        with Preloader([name]) as loader:
            assert not gc.isenabled()
            loader.start()
        assert sys.modules[name].ENABLED is False
        assert gc.isenabled() and gc.get_freeze_count() > frozen  # what the imports made is skipped from now on
        gc.unfreeze()
        monkeypatch.setattr(preload, "own_collector", False)  # a caller's process (CliRunner): left alone
        with Preloader([]) as loader:
            assert gc.isenabled()
            loader.start()
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()
        gc.enable()


def test_the_first_round_starts_it_where_no_mip_did_and_the_status_line_still_sees_every_call(tmp_path, monkeypatch):
    name = _module(tmp_path, monkeypatch, "preload_probe_b")
    calls = []

    class Line:
        def __getattr__(self, hook):
            return lambda *args: calls.append(hook)

    with Preloader([name]) as loader:
        hooks = SolveStarts(Line(), loader)
        hooks.stage("trim"), hooks.requests(3), hooks.budget(None)
        assert name not in sys.modules  # the solve starts: its own Python first (hetinfra.solver.mip_hooks)
        hooks.round(1, 3, None), hooks.close()
    assert name in sys.modules and calls == ["stage", "requests", "budget", "round", "close"]
    SolveStarts(None, Preloader([])).budget(None)  # no status line (pipes, --json): nothing else to call


def test_a_mip_starting_on_any_thread_starts_it_once(tmp_path, monkeypatch):
    import threading

    from hetinfra.solver import mip_hooks

    name = _module(tmp_path, monkeypatch, "preload_probe_c", "import threading\nLOADER = threading.current_thread().name\n")
    with Preloader([name]) as loader, mip_hooks.on_mip_start(loader.start):
        threads = [threading.Thread(target=mip_hooks.mip_starting) for _ in range(4)]  # solver.ahead's threads
        [t.start() for t in threads], [t.join() for t in threads]
        started = loader._thread
    assert sys.modules[name].LOADER == "hetinfra-preload" and started is loader._thread
    assert not mip_hooks._callbacks  # the hook ends with its block
    with Preloader([]) as loader:
        pass
    loader.start()  # after close: nothing starts
    assert loader._thread is None


def test_plan_starts_it_as_its_first_mip_starts(tmp_path, monkeypatch, run_cli):
    """`hetinfra plan` starts its preloader from the solver's MIP (not before: the rows, the LP and the
    warm starts are the solve's own Python), on tests/plan/test_variants.py's small case, its warm
    starts left out so that HiGHS runs a MIP (the rounded LP is optimal there)."""
    import inspect

    import yaml

    from tests.plan.test_variants import _spec

    monkeypatch.setattr("hetinfra.solver.block._best_start", lambda *args: None)
    where = []
    real = Preloader.start
    monkeypatch.setattr(Preloader, "start", lambda self: where.append(
        [f.function for f in inspect.stack()[1:4]]) or real(self))
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(_spec(tmp_path, 0.7499)))
    code, _, err = run_cli("plan", str(tmp_path / "s.yaml"), "--no-baselines", "--no-verify", "--json")
    assert code == 0, err
    assert where and where[0][:2] == ["mip_starting", "mip"], where


def test_the_plan_path_up_to_its_first_solve_imports_none_of_what_is_preloaded():
    """What the preloader loads must still be unloaded when the first solve starts, or it is loaded
    before the solve, on the main thread, and the preloader has nothing left to overlap with it. Read
    from the sources (what importing a module runs: its imports outside functions, and its packages'),
    as tests/test_imports.py reads them: the import itself takes seconds on a loaded machine."""
    assert all(importlib.util.find_spec(name) for name in LATER)  # a renamed module is named here too
    loaded = loaded_on_import(["hetinfra.cli.app",  # then hetinfra.cli.plan's work() and plan.pipeline._planned
                               "hetinfra.compile.artifacts", "hetinfra.plan.feeds", "hetinfra.plan.pending",
                               "hetinfra.plan.pipeline", "hetinfra.plan.progress", "hetinfra.plan.verify",
                               "hetinfra.plan.held_everywhere", "hetinfra.solver.memo"])
    assert "hetinfra.spec.models" in loaded and "pydantic" in loaded  # the walk reaches what the solve needs
    later = set(LATER) | {"hetinfra.document", "hetinfra.sim", "rich", "numpy"}
    assert sorted(m for m in loaded if any(m == x or m.startswith(x + ".") for x in later)) == []


def test_the_source_walk_sees_an_import_that_runs_at_import_time(tmp_path):
    """The walk above fails where the plan path imports a preloaded module before its solve (a
    planted module-level import) and not where it imports one inside a function."""
    from tests.test_imports import modules

    mods = modules(REPO)
    lazy = tmp_path / "lazy.py"
    lazy.write_text("def f():\n    from hetinfra.plan.plan_json import simulation_view\n")
    eager = tmp_path / "eager.py"
    eager.write_text("import sys\nif sys:\n    from hetinfra.plan import plan_json\n")
    assert "hetinfra.plan.plan_json" not in loaded_on_import(["probe"], {**mods, "probe": lazy})
    assert "hetinfra.plan.plan_json" in loaded_on_import(["probe"], {**mods, "probe": eager})


def loaded_on_import(names: list[str], mods: dict | None = None) -> set[str]:
    """The modules (ours, and the top-level names of others) that importing ``names`` loads: their
    module-level imports (function bodies excluded), transitively, and every package above each."""
    import ast

    from tests.test_imports import modules, parsed

    mods = mods if mods is not None else modules(REPO)
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(name.rsplit(".", k)[0] for k in range(1, name.count(".") + 1))  # its packages run first
        if name not in mods:
            continue
        is_pkg = mods[name].name == "__init__.py"
        for node in _module_level(parsed(mods[name]).body):
            if isinstance(node, ast.Import):
                todo.extend(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
                todo.append(base)
                todo.extend(f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods)
    return {m if m.startswith("hetinfra") else m.split(".")[0] for m in seen}


def _module_level(body):
    """The statements of ``body`` that run when it does: into if/try/with/class, not into functions, nor
    into ``if TYPE_CHECKING:``."""
    import ast

    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            yield from _module_level(getattr(node, field, None) or [])
