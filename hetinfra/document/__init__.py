"""plan.json as a typed document (pydantic v2): the one place for its keys, types, defaults and
invariants. See docs/plan-document.md."""

from hetinfra.document.allocation import Allocation, RouteShare
from hetinfra.document.plan import Plan, load_plan

__all__ = ["Allocation", "Plan", "RouteShare", "load_plan"]
