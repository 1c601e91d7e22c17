"""HiGHS without a word on stdout: ``hetinfra plan --json`` prints JSON and nothing else.

HiGHS 1.16 prints a banner on the C-level stdout when a process creates its first ``Highs``
object, before any option (``output_flag``) can be set. :func:`new_highs` creates that first object
with file descriptor 1 pointed at /dev/null, so the banner goes nowhere; later objects are silent by
``output_flag``.
"""

from __future__ import annotations

import os
import sys
import threading

_banner_swallowed = False

#: held by every solve through Pyomo and by the banner's swallowing. Pyomo's solvers capture the
#: process's stdout and stderr file descriptors for the length of a solve
#: (``pyomo.common.tee.capture_output(capture_fd=True)``) and, since Pyomo 6.9, check on the way out
#: that ``sys.stdout`` is still the stream they set. Two such solves at once on two threads (the
#: plan's and the single-GPU baselines', on a spec with LoRA adapters, whose problems go through
#: Pyomo) swap each other's descriptors: Pyomo raised, a thread died with EBADF, HiGHS's log reached
#: the terminal and ``hetinfra plan`` exited 1. Re-entrant: a warm solve may run a cold one inside.
FD_CAPTURE = threading.RLock()


def swallow_banner() -> None:
    """Create (and drop) the process's first Highs object with stdout closed; idempotent."""
    global _banner_swallowed
    if _banner_swallowed:
        return
    import highspy

    with FD_CAPTURE:  # fd 1 is pointed elsewhere for a moment: not while a Pyomo solve captures it
        if _banner_swallowed:
            return
        sys.stdout.flush()
        saved = os.dup(1)
        try:
            with open(os.devnull, "w") as null:
                os.dup2(null.fileno(), 1)
                highspy.Highs()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        _banner_swallowed = True


def new_highs():
    """A ``highspy.Highs`` whose creation printed nothing."""
    import highspy

    swallow_banner()
    return highspy.Highs()
