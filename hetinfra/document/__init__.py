"""plan.json as a typed document (pydantic v2): the one place for its keys, types, defaults and
invariants. See docs/plan-document.md."""

from hetinfra.document.allocation import Allocation, RouteShare
from hetinfra.document.plan import Plan, load_plan


def running(path) -> list[Allocation]:
    """The allocations that run, from a state.json or a plan.json (told apart by ``state_version``),
    as their models (a state's carry the deploy ``path``)."""
    from pathlib import Path

    from hetinfra.document.load import read_json
    from hetinfra.document.state import State, parse_state

    doc = read_json(Path(path), what="plan or state", hint="pass the --out directory of the plan that is running")
    if isinstance(doc, dict) and "state_version" in doc:
        return State.model_validate(parse_state(doc, path)).allocations  # parse_state: the version check first
    return Plan.parse(doc, path).allocations


def load_running(path) -> list[dict]:
    """:func:`running` as plan.json's dicts (each model dumped as written: the round trip is exact)."""
    from hetinfra.document.plan import DUMP

    return [a.model_dump(**DUMP) for a in running(path)]


__all__ = ["Allocation", "Plan", "RouteShare", "load_plan", "load_running", "running"]
