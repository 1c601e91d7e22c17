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
