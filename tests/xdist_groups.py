"""Which worker runs what under ``--dist loadgroup`` (README, .ci/run): tests that share a per-worker
cost run on one worker, so only one worker pays it.

- FIXTURE_GROUPS: a test that uses one of these fixtures joins its group. sky_offline: ``import sky``
  (~2.3 s CPU) and SkyPilot's catalog reads; tests/stacks' ``mocks``: the Pulumi providers' lazily
  loaded resource modules; doc_shell: the documented commands' results and template cache;
  kube_planned: the examples planned for Kubernetes once per run (tests/compile/kubernetes/conftest.py),
  whose lock the second worker would wait on idle while the first plans them (about 4 s).
- FILE_GROUPS: the checks that parse and walk every module of the tree and of its copies share
  tests/test_imports.parsed's trees and their memos (test_facts, test_document_access, test_shell_pipes) on
  one worker (test_shell_pipes on the other worker parsed the whole tree again: ~1.2 s CPU). A module
  whose tests read one per-process cache: tests/perf/test_published.py the replays of the published runs
  (hetinfra.sim.benchmark_run, ~1.1 s CPU, made on both workers when its tests were split),
  tests/plan/test_prune.py its examples' units (_units), and the kernel fits of aiconfigurator's layouts
  (hetinfra.perf.aic_backend.layout_calibration, ~0.5 s each): tests/perf/test_aic_backend.py and the
  tests elsewhere marked ``xdist_group("kernel-fits")`` that fit one of its layouts.
- A module with a module- or class-scoped fixture of its own (a plan, a fleet of loopback servers, a
  calibration run) is one group: the fixture is made once, not once on each worker that runs one of
  its tests. Where such a module also has tests of a FIXTURE_GROUPS group, the module joins it.
  (Measured side by side at -n 2 on a loaded machine: tests/stacks with the SkyPilot files 43.4 ->
  36.8 s CPU; the 17 modules with module fixtures and tests/docs/test_commands.py 34.2 -> 31.9 s.)

xdist 3.8 puts a test's group into its id as ``@group`` by setting ``item._nodeid``, which pytest
9.1+ no longer reads (the id lives in ``item._id``): every group was ignored. The ids are set here,
before xdist sends them to the controller (tests/conftest.py imports these hooks)."""

from __future__ import annotations

import pytest

FIXTURE_GROUPS = {"sky_offline": "skypilot", "mocks": "pulumi-mocks", "doc_shell": "doc-shell",
                  "kube_planned": "kube-examples"}
FILE_GROUPS = {**{name: "source-trees" for name in ("test_imports.py", "test_facts.py", "test_document_access.py",
                                                     "test_shell_pipes.py")},
               "test_published.py": "published-replays", "test_prune.py": "example-units",
               "test_aic_backend.py": "kernel-fits"}


def _marked(item) -> list[str]:
    return sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                   for m in item.iter_markers("xdist_group")})


def _module_fixture(item) -> bool:
    """Whether ``item`` uses a module- or class-scoped fixture defined in the test tree."""
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(
        defs and defs[-1].scope in ("module", "class") and defs[-1].func.__module__.startswith("tests.")
        for defs in info.name2fixturedefs.values())


def groups(items) -> dict[int, str]:
    """index in ``items`` -> the group the test joins (the tests already marked keep their marks)."""
    out: dict[int, str] = {}
    by_module: dict[str, str] = {}  # module -> the FIXTURE_GROUPS group of one of its tests
    for i, item in enumerate(items):
        if _marked(item):
            continue
        names = getattr(item, "fixturenames", ())
        group = next((g for f, g in FIXTURE_GROUPS.items() if f in names), FILE_GROUPS.get(item.path.name))
        if group:
            out[i] = group
            by_module.setdefault(str(item.path), group)
        elif _module_fixture(item):
            out[i] = f"module:{item.path.name}"
    for i, group in out.items():
        if group.startswith("module:"):
            out[i] = by_module.get(str(items[i].path), group)
    return out


def _set_id(item, nodeid: str) -> None:
    if hasattr(item, "_id"):  # pytest >= 9.1
        from _pytest.nodeid import coerce_node_id

        item._id = coerce_node_id(nodeid)
    else:
        item._nodeid = nodeid


@pytest.hookimpl(tryfirst=True)  # before xdist's, which sends the workers' test ids to the controller
def pytest_collection_finish(session) -> None:
    if not getattr(session.config.option, "loadgroup", False):
        return
    for i, group in groups(session.items).items():
        session.items[i].add_marker(pytest.mark.xdist_group(group))
    for item in session.items:
        names = _marked(item)
        if names and "@" not in item.nodeid.rpartition("]")[2]:
            _set_id(item, f"{item.nodeid}@{'_'.join(names)}")
