"""What hetinfra writes gets the mode of what it replaces, else the umask's, as ``open`` and ``mkdir``
give (hetinfra.fileio.mode_for). The temporary file or folder a write renames into place is private
(mkstemp's 0600, mkdtemp's 0700), and plan.json, weights.json, state.json and skypilot/ had kept
that mode: unreadable to a gateway or CI job running as another user whatever the umask, and a
profiles.csv or a folder someone had opened to their group lost its mode at the next write."""

from __future__ import annotations

import os
import shutil
import stat
from contextlib import contextmanager
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetinfra.fileio import atomic_write_text
from hetinfra.outdir import replace_dir, staged_dir

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
UMASKS = st.sampled_from([0o002, 0o022, 0o027, 0o077])
FILE_MODES = st.one_of(st.none(), st.sampled_from([0o600, 0o640, 0o644, 0o664, 0o755]))
DIR_MODES = st.one_of(st.none(), st.sampled_from([0o700, 0o750, 0o755, 0o775]))


@contextmanager
def umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@SETTINGS
@given(mask=UMASKS, before=FILE_MODES, n=st.integers(0, 10**6))
def test_a_file_written_keeps_the_mode_it_replaces_else_the_umasks(tmp_path, mask, before, n):
    path = tmp_path / f"f{n}.json"
    path.unlink(missing_ok=True)  # tmp_path is shared by the examples
    if before is not None:
        path.write_text("old\n")
        os.chmod(path, before)
    with umask(mask):
        atomic_write_text(path, "new\n")
    assert path.read_text() == "new\n"
    assert mode(path) == (before if before is not None else 0o666 & ~mask)


@SETTINGS
@given(mask=UMASKS, before=DIR_MODES, sub=DIR_MODES, n=st.integers(0, 10**6))
def test_a_folder_written_whole_keeps_its_mode_and_its_subfolders(tmp_path, mask, before, sub, n):
    """replace_dir (skypilot/, kubernetes/) and staged_dir (OUT): the folder keeps its mode, else the
    umask's; a subfolder the staged copy mirrors keeps its own."""
    out = tmp_path / f"out{n}"
    shutil.rmtree(out, ignore_errors=True)  # tmp_path is shared by the examples
    if before is not None:
        (out / "router").mkdir(parents=True)
        os.chmod(out, before)
        if sub is not None:
            os.chmod(out / "router", sub)
    router = mode(out / "router") if before is not None else None
    with umask(mask):
        with staged_dir(out) as stage:
            replace_dir(stage / "skypilot", {"a.yaml": "a: 1\n"})
            atomic_write_text(stage / "plan.json", "{}\n")
    assert mode(out) == (before if before is not None else 0o777 & ~mask)
    assert mode(out / "skypilot") == 0o777 & ~mask and mode(out / "plan.json") == 0o666 & ~mask
    if before is not None:
        assert mode(out / "router") == router
    with umask(0o077):  # a later run under another umask keeps what the folder and its files have
        with staged_dir(out) as stage:
            replace_dir(stage / "skypilot", {"b.yaml": "b: 1\n"})
            atomic_write_text(stage / "plan.json", "{}\n")
    assert mode(out / "skypilot") == 0o777 & ~mask and mode(out / "plan.json") == 0o666 & ~mask


@SETTINGS
@given(n=st.integers(1, 3), fail_at=st.integers(0, 2), old=st.booleans(), deep=st.booleans(), k=st.integers(0, 10**6))
def test_files_written_together_are_all_written_or_none(tmp_path, monkeypatch, n, fail_at, old, deep, k):
    """atomic_write_texts (simulate's simulation.json and .svg): a failure while writing the k-th file
    (a full disk) leaves every path as it was, no temporary file, and no folder it made. Before, the
    files before it were already renamed into place: on a full disk `simulate --out D` left a new
    simulation.json beside no (or an old) simulation.svg."""
    import errno

    from hetinfra.fileio import atomic_write_texts

    fail_at = min(fail_at, n - 1)
    root = tmp_path / f"w{k}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    folder = root / "a" / "b" if deep else root
    paths = [folder / f"f{i}.txt" for i in range(n)]
    if old and not deep:
        for p in paths:
            p.write_text("old")
    calls = []
    real_fsync = os.fsync

    def fsync(fd):
        calls.append(fd)
        if len(calls) == fail_at + 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    try:
        atomic_write_texts({p: "new" for p in paths})
    except OSError:
        pass
    monkeypatch.setattr(os, "fsync", real_fsync)
    left = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    assert left == (sorted(p.name for p in paths) if old and not deep else [])
    assert all(p.read_text() == "old" for p in paths if p.exists())
