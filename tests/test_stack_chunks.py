"""hetinfra.keep_stack_chunks: CPython's frame-stack chunks are kept for reuse, not mapped per call."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

#: in a fresh interpreter: the most page faults 500 calls made at any of 600 call depths (a chunk mapped
#: and unmapped per call at the depth where the calls cross a chunk's end: about one fault per call)
PROBE = textwrap.dedent("""
    import resource, sys
    if sys.argv[1] == "keep":
        from hetinfra import keep_stack_chunks
        assert keep_stack_chunks() and keep_stack_chunks()  # once, and again harmlessly
    def leaf(a=0, b=0, c=0):
        return a
    worst = 0
    def at(depth):
        global worst
        if depth:
            return at(depth - 1)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(500):
            leaf()
        worst = max(worst, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    for depth in range(600):
        at(depth)
    print(worst)
""")


def _worst_faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True)
    return int(out.stdout)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="frame-stack chunks exist from CPython 3.11")
def test_a_call_at_a_chunks_end_maps_no_chunk_once_they_are_kept():
    from hetinfra.sim.core import available

    if not available():
        pytest.skip("the compiled core is not built: the interpreter's allocator stays")
    if _worst_faults("plain") < 400:  # CPython 3.11-3.13 map a chunk per call at that depth
        pytest.skip("this interpreter does not map a frame-stack chunk per call at a chunk's end")
    assert _worst_faults("keep") < 50
