"""Two runs writing one out dir at once swap in turn (hetinfra.outdir._swap_turn): a swap moves OUT
aside, then renames its copy into place. Run B swapping between run A's two renames found no OUT,
put its copy there, and A's second rename then failed onto B's folder: an OSError traceback in A
(`plan --out OUT` beside another `plan --out OUT`, or a `replan`), and A's old OUT left behind in a
``.OUT.old.*`` folder. In turn, both succeed and the last swap's OUT is the one kept, whole."""

from __future__ import annotations

import os
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetinfra.fileio import atomic_write_text
from hetinfra.outdir import staged_dir

pytestmark = pytest.mark.xdist_group("outdir_turns")


def _racing(monkeypatch, out):
    """Run A and run B, each writing ``who.txt`` into ``out`` by staged_dir; B swaps while A is
    between its two renames (A waits there up to 0.25 s for B to finish: B, unblocked, swaps in
    milliseconds where nothing makes it wait its turn). Returns each run's error."""
    aside, b_done = threading.Event(), threading.Event()
    real_replace = os.replace

    def replace(src, dst):
        real_replace(src, dst)
        if threading.current_thread().name == "A" and str(src) == str(out) and not aside.is_set():
            aside.set()  # A has moved OUT aside: B may swap now
            b_done.wait(0.25)

    monkeypatch.setattr(os, "replace", replace)
    errors = {}

    def run(who: str) -> None:
        try:
            with staged_dir(out) as stage:
                atomic_write_text(stage / "who.txt", who)
                if who == "B":
                    aside.wait(5.0)
        except BaseException as exc:  # noqa: BLE001 - the race's failure is the finding
            errors[who] = exc
        finally:
            if who == "B":
                b_done.set()

    threads = [threading.Thread(target=run, args=(w,), name=w) for w in "AB"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return errors


@settings(max_examples=4, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(state=st.booleans(), n=st.integers(0, 10**6))
def test_two_runs_writing_one_out_dir_swap_in_turn(tmp_path, monkeypatch, state, n):
    """``state``: OUT holds a state.json (owned by `apply`), which each swap takes fresh from OUT."""
    out = tmp_path / f"out{n}"
    if not out.exists():
        out.mkdir()
        (out / "who.txt").write_text("before")
        if state:
            (out / "state.json").write_text("{}\n")
    with monkeypatch.context() as patched:
        errors = _racing(patched, out)
    assert errors == {}
    assert (out / "who.txt").read_text() == "B"  # the last swap's, whole
    assert (out / "state.json").exists() == state
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(f".out{n}.")) == []
