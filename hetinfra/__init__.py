"""hetinfra: cheapest heterogeneous multi-cloud GPU plans for LLM serving under SLOs."""

__version__ = "0.1.0"
#: plan.json's format version (written by hetinfra.plan.plan_json, read by deploy, replan and the
#: simulator); bump only for incompatible changes: new keys may be added within a version.
PLAN_VERSION = 1


def cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one): how many threads
    the solver's per-model solves (hetinfra.solver.ahead) and the simulator's units (hetinfra.sim.core)
    run on."""
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def keep_stack_chunks() -> bool:
    """Keep the interpreter's freed frame-stack chunks for reuse instead of unmapping them (the compiled
    core's allocator, hetinfra/sim/_core.c "the interpreter's frame-stack chunks"). CPython (3.11 on)
    maps a 16 KiB chunk when a call crosses one's end and unmaps it when the call returns, so a hot
    Python loop at that depth makes a system call pair and a page fault per call: the replica
    simulator's Python loop made 780,000 of each in one test (4.8 s of system time beside 5 s of work),
    where the same loop one frame shallower made none. Process-wide and once; no result depends on it.
    False where the core is not built (or has no GIL): the interpreter's own allocator stays."""
    try:
        from hetinfra.sim._core import keep_stack_chunks as keep
    except ImportError:
        return False
    return bool(keep())


def lazy_names(package: str, where: dict[str, str]):
    """A package's PEP 562 ``__getattr__``: each public name in ``where`` loads its submodule on first
    use. A package ``__init__`` imports none of its own submodules (tests/test_imports.py): "load a
    submodule" needs "initialise its package", so an ``__init__`` that loads a submodule lets two
    threads importing at once (hetinfra.cli.preload's beside the command's) hold each other's module
    lock, and one of them meets Python's import deadlock error."""
    import importlib
    import sys

    def __getattr__(name: str):
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[name]), name)
        setattr(sys.modules[package], name, value)  # once: later reads are plain attribute reads
        return value

    return __getattr__
