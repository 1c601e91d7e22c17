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


# ---- read-modify-writes of one file take its folder's turn too (hetinfra.outdir.folder_turn) ----------------

def _row(k: int):
    from hetinfra.perf.profiles import ProfileRow

    return ProfileRow(model="m", gpu="L4", tp=1, pp=1, input_tokens=100 + k, output_tokens=50, ttft_slo_ms=2000,
                      tpot_slo_ms=100, max_rps=1.5 + k, origin=f"run {k}", statistic="p99")


@settings(max_examples=5, deadline=None, derandomize=True, database=None)
@given(writers=st.integers(2, 4), before=st.integers(1, 3), link=st.booleans())
def test_merges_into_one_profile_at_once_keep_every_row(tmp_path_factory, writers, before, link):
    """`profile-import --merge --out p.csv` (and `profile --merge`) run at once, each with rows of its own
    cells, into one file (``before`` rows there already: the file named directly or through a link): every
    row is kept. Each had read the file, merged its rows and written it back as it read it, so the last
    writer dropped the others' rows (eight imports at once kept four or five of eight). The readers here
    wait for one another (up to 0.3 s) once they have read: where the reads are not in turn, all read first."""
    from hetinfra.perf import profiles
    from hetinfra.perf.profile_csv import write_profile_csv

    folder = tmp_path_factory.mktemp("merge")
    path = folder / "p.csv"
    write_profile_csv([_row(100 + k) for k in range(before)], path)
    if link:  # a link to a shared file
        (folder / "shared").mkdir()
        os.replace(path, folder / "shared" / "p.csv")
        os.symlink(folder / "shared" / "p.csv", folder / "link.csv")
        path = folder / "link.csv"
    real_load, read = profiles.load_profiles, threading.Barrier(writers)

    def load_then_wait(p):
        got = real_load(p)
        try:
            read.wait(0.3)
        except threading.BrokenBarrierError:
            pass
        return got

    errors = []

    def merge(k):
        try:
            write_profile_csv([_row(k)], path, merge=True)
        except BaseException as exc:  # noqa: BLE001 - a failure is the finding
            errors.append(exc)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(profiles, "load_profiles", load_then_wait)
        threads = [threading.Thread(target=merge, args=(k,)) for k in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
    assert errors == []
    kept = {r.input_tokens for r in profiles.load_profiles(path)}
    assert kept == {100 + k for k in range(writers)} | {200 + k for k in range(before)}
    assert not link or (folder / "link.csv").is_symlink()
