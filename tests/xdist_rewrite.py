"""Each xdist worker collects the whole suite, and rewriting the test modules' asserts is most of that
(about 4.5 s CPU of a worker's 7.5 s, ~260 modules). pytest caches a rewritten module as bytecode beside
it unless bytecode writing is off (PYTHONDONTWRITEBYTECODE), and reads that cache before rewriting; but
the workers start together and import the modules in the same order, so on a fresh checkout (as in
CI) every worker rewrote every module. Here worker gwK of n first imports the modules from the K/n-th
to the last, then collection imports the rest in its own order: each worker rewrites about its share
and reads the others' from the cache. The modules are imported as collection imports them
(pytest.Module.obj), and what is collected, in which order, is unchanged (tests/conftest.py imports
this hook)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest


def modules_of(session) -> list[Path]:
    """The test modules under the run's arguments (files, folders, node ids), in collection order."""
    out: list[Path] = []
    for arg in session.config.args:
        path = Path(session.config.invocation_params.dir, arg.split("::")[0])
        if path.is_dir():
            out.extend(sorted(p for p in path.rglob("test_*.py") if "__pycache__" not in p.parts))
        elif path.name.startswith("test_") and path.suffix == ".py":
            out.append(path)
    root = session.config.rootpath
    ignored = session.config.hook.pytest_ignore_collect  # --ignore, --ignore-glob, collect_ignore
    return [p for p in dict.fromkeys(p.resolve() for p in out)
            if not any(ignored(collection_path=q, config=session.config)
                       for q in (p, *p.parents) if q.is_relative_to(root) and q != root)]


def share_onwards(modules: list, worker: str, count: int) -> list:
    """``modules`` from worker ``gwK``'s share (the K/count-th) to the last."""
    return modules[len(modules) * (int(worker.removeprefix("gw")) % count) // count:]


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    if (sys.dont_write_bytecode or count < 2 or worker in ("", "gw0") or not worker.startswith("gw")
            or session.config.getoption("assertmode") != "rewrite"):
        return  # nothing is cached for another worker, or this one's share is collection's own start
    for path in share_onwards(modules_of(session), worker, count):
        try:
            pytest.Module.from_parent(session, path=path).obj
        except (Exception, pytest.skip.Exception):  # collection imports it again and reports what it raised
            pass
