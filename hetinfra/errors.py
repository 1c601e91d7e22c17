"""hetinfra's own exception classes, caught once at the CLI edge.

Every user-facing failure is one of these; its message is one or two lines that say
what is wrong, where, and how to fix it. The class fixes the process exit code.
"""

from __future__ import annotations


def closest(value: str, choices, cutoff: float = 0.5) -> str | None:
    """The choice closest to a mistyped ``value`` (for "did you mean" hints), or None."""
    import difflib

    found = difflib.get_close_matches(value, list(choices), n=1, cutoff=cutoff)
    return found[0] if found else None


def did_you_mean(value: str, choices) -> str:
    """"did you mean 'x'?" or, with nothing close, the first known names."""
    close = closest(value, choices)
    return f"did you mean '{close}'?" if close else f"known: {', '.join(sorted(choices)[:12])}"


class HetinfraError(Exception):
    """Base class. ``exit_code`` is the process exit status the CLI returns."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None, details: dict | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = details or {}

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class InvalidInputError(HetinfraError):
    """The spec, an offers/profiles file or a CLI argument is wrong (exit 2)."""

    exit_code = 2


class InfeasibleError(HetinfraError):
    """No plan satisfies the spec; the message names what to relax (exit 3)."""

    exit_code = 3


class FeedError(HetinfraError):
    """A price/availability feed or a cloud provider failed (exit 4)."""

    exit_code = 4


class ProviderError(FeedError):
    """Pulumi, SkyPilot or a cloud is missing, not logged in, or failed during a deploy (exit 4)."""


class SolverError(HetinfraError):
    """The solver returned something we cannot trust (exit 1: a bug, not user error)."""

    exit_code = 1
