"""HiGHS without a word on stdout: ``hetinfra plan --json`` prints JSON and nothing else.

HiGHS 1.16 prints a banner on the C-level stdout when a process creates its first ``Highs``
object, before any option (``output_flag``) can be set. :func:`new_highs` creates that first object
with file descriptor 1 pointed at /dev/null, so the banner goes nowhere; later objects are silent by
``output_flag``.
"""

from __future__ import annotations

import os
import sys

_banner_swallowed = False


def swallow_banner() -> None:
    """Create (and drop) the process's first Highs object with stdout closed; idempotent."""
    global _banner_swallowed
    if _banner_swallowed:
        return
    import highspy

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
