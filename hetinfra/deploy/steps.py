"""The steps of ``hetinfra apply`` and ``destroy``, typed, and the one loop that runs them.

A step is one thing that changes the clouds and is recorded in state.json when it ends:

- :class:`PulumiUp`: ``pulumi up`` of one project (a cloud's VM stack, or the ``kubernetes`` project);
- :class:`PulumiDestroy`: ``pulumi destroy`` of one project;
- :class:`SkyUp`: ``sky serve up`` (or ``update``) of one deployment unit;
- :class:`SkyDown`: ``sky serve down`` of the units that left the plan, together.

Each step's ``id`` is what state.json's ``operation.steps[].id`` and the error's ``details.step`` have
always said (``pulumi:aws``, ``skypilot:up:<unit>``, ``skypilot:down:<a>,<b>``): a published string,
kept. An operation that stopped resumes from state.json by those ids. A new kind of step (a
disaggregated bundle's prefill and decode services, say) is one more class here and one more case in
the runner that performs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Union

from hetinfra.errors import HetinfraError, ProviderError

__all__ = ["PulumiDestroy", "PulumiStep", "PulumiUp", "SkyDown", "SkyUp", "Step", "run_steps"]


@dataclass(frozen=True)
class PulumiStep:
    """A step on the project OUT/pulumi/<project> (a cloud, or ``kubernetes``)."""

    project: str

    @property
    def id(self) -> str:
        return f"pulumi:{self.project}"


class PulumiUp(PulumiStep):
    """``pulumi up`` of the project."""


class PulumiDestroy(PulumiStep):
    """``pulumi destroy`` of the project."""


@dataclass(frozen=True)
class SkyUp:
    """``sky serve up`` (``update`` when it runs) of one deployment unit."""

    unit: str

    @property
    def id(self) -> str:
        return f"skypilot:up:{self.unit}"


@dataclass(frozen=True)
class SkyDown:
    """``sky serve down`` of the units that left the plan."""

    units: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"skypilot:down:{','.join(self.units)}"


Step = Union[PulumiUp, PulumiDestroy, SkyUp, SkyDown]


def run_steps(out: Path, state, steps: list[Step], perform: Callable[[Step], None],
              echo: Callable[[str], None]) -> None:
    """Run the operation's steps in order (``state``: hetinfra.deploy.state.DeployState, whose
    operation lists their ids), skipping those an earlier run finished; the state is saved after
    each, and the first failure stops the run with a resumable message (exit 4)."""
    for step in steps:
        if state.is_done(step.id):
            echo(f"[{step.id}] done in an earlier run; skipped")
            continue
        state.mark(step.id, "running")
        echo(f"[{step.id}] ...")
        try:
            perform(step)
        except HetinfraError as exc:
            state.mark(step.id, "failed", str(exc))
            raise _stopped(out, step.id, state, exc) from None
        except Exception as exc:  # the Automation API raises CommandError and friends
            state.mark(step.id, "failed", f"{type(exc).__name__}: {_first_lines(str(exc))}")
            raise _stopped(out, step.id, state, exc) from None
        state.mark(step.id, "done")


def _first_lines(text: str, n: int = 3) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:]) if lines else text


def _stopped(out: Path, step: str, state, exc: Exception) -> ProviderError:
    kind, done, steps = state.progress()
    msg = str(exc) if isinstance(exc, HetinfraError) else f"{type(exc).__name__}: {_first_lines(str(exc))}"
    return ProviderError(f"{kind} stopped at step {step} ({done} of {len(steps)} steps done): {msg}",
                         hint=f"what finished is recorded in {state.path}; fix the cause and run "
                              f"`hetinfra {kind} {out}` again to resume",
                         details={"step": step, "steps": steps})
