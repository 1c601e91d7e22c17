"""plan.json as a typed document (pydantic v2): the one place for its keys, types, defaults and
invariants. See docs/plan-document.md."""

from hetinfra.document.allocation import Allocation, RouteShare
from hetinfra.document.plan import Plan, load_plan


def load_running(path) -> list[dict]:
    """The allocations that run, from a state.json or a plan.json (told apart by ``state_version``),
    each checked against its model."""
    from pathlib import Path

    from hetinfra.document.load import read_json
    from hetinfra.document.state import parse_state

    doc = read_json(Path(path), what="plan or state", hint="pass the --out directory of the plan that is running")
    if isinstance(doc, dict) and "state_version" in doc:
        return parse_state(doc, path)["allocations"]
    return Plan.parse(doc, path).to_dict()["allocations"]


__all__ = ["Allocation", "Plan", "RouteShare", "load_plan", "load_running"]
