"""plan.json as a typed document (pydantic v2): the one place for its keys, types, defaults and
invariants. See docs/plan-document.md.

The package's own names load on first use (PEP 562 ``__getattr__``), not with the package: an
``__init__`` that imports its submodules makes "import a submodule" and "initialise its package" wait
on each other, which two threads importing at once can turn into Python's import deadlock error (hetinfra.lazy_names)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetinfra import lazy_names

if TYPE_CHECKING:
    from hetinfra.document.allocation import Allocation, RouteShare
    from hetinfra.document.plan import Plan, load_plan

#: each public name and the submodule that defines it
_LAZY = {"Allocation": "hetinfra.document.allocation", "RouteShare": "hetinfra.document.allocation",
         "Plan": "hetinfra.document.plan", "load_plan": "hetinfra.document.plan"}


__getattr__ = lazy_names(__name__, _LAZY)


def running(path) -> list[Allocation]:
    """The allocations that run, from a state.json or a plan.json (told apart by ``state_version``),
    as their models (a state's carry the deploy ``path``)."""
    from pathlib import Path

    from hetinfra.document.load import read_json
    from hetinfra.document.plan import RUNNING_HINT, Plan
    from hetinfra.document.state import State, parse_state

    doc = read_json(Path(path), what="plan or state", hint=RUNNING_HINT)
    # a file named state.json is read as one whatever it holds (a broken one gets state.json's hint, not plan.json's)
    if isinstance(doc, dict) and "state_version" in doc or Path(path).name == "state.json":
        return State.model_validate(parse_state(doc, path)).allocations  # parse_state: the version check first
    return Plan.parse(doc, path).allocations


def load_running(path) -> list[dict]:
    """:func:`running` as plan.json's dicts (each model dumped as written: the round trip is exact)."""
    from hetinfra.document.plan import DUMP

    return [a.model_dump(**DUMP) for a in running(path)]


__all__ = sorted([*_LAZY, "load_running", "running"])
