"""What runs now, read from a deployment's state or a plan's out dir (``--state``): the units and
counts a re-plan starts from, and the factors the running plan was verified at."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hetinfra.plan.library import TemplateUnit


def state_file(state: Path) -> Path:
    """The file that says what runs: a deployment's state.json, else the plan.json in ``state``
    (a directory), or ``state`` itself (a file)."""
    from hetinfra.fileio import present  # a link to nothing is read (and refused), not passed over

    return state / "state.json" if present(state / "state.json") else state / "plan.json" if state.is_dir() else state


def running_allocations(state: Path) -> list[dict]:
    """What runs now: the ``allocations`` of :func:`state_file`."""
    from hetinfra.document import load_running
    from hetinfra.document.plan import RUNNING_HINT
    from hetinfra.errors import InvalidInputError
    from hetinfra.fileio import present

    path = state_file(state)
    if not present(path) or path.is_dir():
        raise InvalidInputError(f"--state: no plan.json or state.json at {state}", hint=RUNNING_HINT)
    return load_running(path)


def read_running(state: Path) -> dict[str, int]:
    """Units running now (see running_allocations): unit id -> count."""
    return {a["unit"]: a["count"] for a in running_allocations(state)}


def running_factors(state: Path, units: list[TemplateUnit]) -> dict[str, float]:
    """Template id -> the factor the running plan (plan.json in ``state``) was verified at, for this
    plan's templates: a re-plan's verification starts where the last one ended, as its ILP starts from
    the running fleet. Started from the confidence level instead, the rounds' credits may stop short
    of where they went before (a credit is taken only while the simulation shows 20% slack), and a
    re-plan of an unchanged spec proposed a dearer fleet as a forced move (chat: $3.72/h -> $4.43/h).
    The start is only a start: every round is simulated. None where the state has no plan.json; one
    that is there is read as every command reads it (a broken one is an InvalidInputError, exit 2)."""
    from hetinfra.document import Plan
    from hetinfra.document.load import read_json
    from hetinfra.document.plan import RUNNING_HINT
    from hetinfra.fileio import present

    path = state / "plan.json" if state.is_dir() else state
    if not present(path):
        return {}
    doc = read_json(path, what="plan or state", hint=RUNNING_HINT)
    if isinstance(doc, dict) and "state_version" in doc:
        return {}  # a state.json: it records no templates
    verified = {t.id: float(t.derate) for t in Plan.parse(doc, path).templates}
    return _by_regime(verified, units)


def _by_regime(verified: dict[str, float], units: list[TemplateUnit]) -> dict[str, float]:
    """Template id -> factor for every template of ``units`` whose regime (hetinfra.plan.library.regime_of:
    model, GPU and layout) one of ``verified``'s templates shares. The rounds keep one factor per
    regime, the lowest of its templates' starts (Search.start): with the running plan's factor on its
    own instance type only, the regime's other types kept the confidence level's start and the rounds
    took that as the regime's. A re-plan of chat at 10x its rate ran its first round at the running
    L40S credit (1.92) while the search held 0.82; the miss halved 0.82, the rounds ran out climbing
    back from 0.41, and the plan bought H100s: $58.76/h, where planning afresh gives $37.22/h."""
    from hetinfra.plan.library import regime_of

    factor: dict[str, float] = {}
    for u in units:
        if u.template.id in verified:
            r = regime_of(u.template)
            factor[r] = min(factor.get(r, verified[u.template.id]), verified[u.template.id])
    return {u.template.id: factor[r] for u in units if (r := regime_of(u.template)) in factor}
