"""The out dir, written whole or not at all (it imports hetinfra.errors, hetinfra.csvtext and hetinfra.fileio only),
with the modes of what it replaces, else the umask's (hetinfra.fileio.mode_for):
:func:`staged_dir` gives a hard-linked copy of OUT to write into and swaps it in, :func:`kept_dir`
puts OUT back as it was when a block fails, :func:`replace_dir` makes a folder hold exactly some
files. The swap holds SIGINT/SIGTERM/SIGHUP between its two renames, so OUT is never missing; a
copy a killed run left beside OUT is removed by the next run."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from hetinfra.csvtext import whole_number
from hetinfra.errors import HetinfraError, InvalidInputError
from hetinfra.fileio import mode_for

__all__ = ["folder_turn", "glob_escape", "kept_dir", "out_dir", "replace_dir", "staged_dir"]


def replace_dir(target: Path, files: dict[str, str]) -> None:
    """Make ``target`` contain exactly ``files`` (name -> text), swapping a fully written copy in."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = _new_stage(target)
    try:
        os.chmod(staging, mode_for(target, 0o777))  # mkdtemp's 0700 is private: keep the folder's, else the umask's
        for name, text in files.items():
            (staging / name).parent.mkdir(parents=True, exist_ok=True)  # names may hold sub-folders
            (staging / name).write_text(text)
        with _swap_turn(target):
            _swap_in(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


#: signals that would stop the process between the two renames of a swap; held until it is done
_SWAP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def _new_stage(target: Path) -> Path:
    """An empty folder beside ``target``, named ``.<name>.new.<pid>.<random>`` (the pid lets a later
    run tell a copy whose writer was killed from one still being written)."""
    return Path(tempfile.mkdtemp(prefix=f".{target.name}.new.{os.getpid()}.", dir=target.parent))


@contextmanager
def _swap_turn(target: Path) -> Iterator[None]:
    """Hold the out dirs of ``target``'s folder for one swap (:func:`folder_turn`): two runs writing one OUT
    at once (two `plan --out OUT`, a `replan` beside a `plan`) swapped in turn, and one could find OUT
    moved aside by the other, put its copy there, and then fail to rename onto the other's (an OSError
    traceback, the old OUT left in a ``.OUT.old.*`` folder). In turn, the last one's OUT is the one kept,
    whole. The state files a swap takes fresh (``fresh``) are taken in the same turn."""
    with folder_turn(target.parent):
        yield


@contextmanager
def folder_turn(folder: Path) -> Iterator[None]:
    """One process at a time among those that take ``folder``'s turn: ``flock`` on the folder (the
    nearest one there, where ``folder`` is not made yet), released when its descriptor closes, by a
    killed process too. Out dir swaps take it, and so does every read-modify-write of a file others
    write too (`profile --merge`, `profile-import --merge` into one profiles.csv: eight imports at once
    kept four or five of their eight rows, each writing back the file as it had read it). A folder that
    cannot be opened (no read permission) is written without a turn, as before."""
    folder = Path(folder)
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _swap_in(stage: Path, target: Path) -> None:
    """Put the folder ``stage`` where ``target`` is (two renames: the old one is moved aside first).
    SIGINT/SIGTERM/SIGHUP wait until both renames are done: ``target`` is never missing."""
    old = None
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _SWAP_SIGNALS)
    try:
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.{os.getpid()}.", dir=target.parent))
            os.replace(target, old / target.name)
        os.replace(stage, target)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def _remove_stale_stages(target: Path) -> None:
    """Copies beside ``target`` left by a run that was killed outright (SIGKILL, a power cut): a
    ``.<name>.new.<pid>.*`` or ``.<name>.old.<pid>.*`` folder whose process is gone."""
    if not target.is_dir():
        return  # an .old copy may be all that is left of target: keep it for the user
    for kind in ("new", "old"):
        for leftover in target.parent.glob(f".{glob_escape(target.name)}.{kind}.*"):
            pid = whole_number(leftover.name[len(target.name) + len(kind) + 3:].split(".", 1)[0])
            if pid is not None and pid != os.getpid() and not _alive(pid):
                shutil.rmtree(leftover, ignore_errors=True)


def glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)


def out_dir(target: Path) -> Path:
    """The folder an out dir swap replaces, as an absolute path, or an InvalidInputError (exit 2):

    - a symlink to a folder is written through (the folder it points to is replaced, the link stays);
      a symlink to nothing or to a file is refused;
    - an out dir that is the current directory or holds it (``--out .``, ``--out ..``) is refused:
      the swap would move the folder the user stands in, and the copy would be made inside itself.
    (Files the out dir holds, a spec among them, are kept: the copy starts as the old folder.)"""
    if target.is_symlink():
        pointed = target.resolve()
        if not pointed.is_dir():
            raise InvalidInputError(f"--out {target} is a symlink to {'a file' if pointed.exists() else 'nothing'} "
                                    f"({pointed})", hint="point it at a folder, or choose another --out")
    absolute = target.resolve()
    try:
        here = Path.cwd().resolve()
    except OSError:
        here = None
    if here is not None and (absolute == here or absolute in here.parents):
        raise InvalidInputError(f"--out {target} is the current directory or holds it; an out dir is replaced "
                                "whole, so it cannot be the folder you run from", hint="pass a sub-folder such as "
                                "--out out/chat")
    return absolute


def _link_tree(src: Path, dst: Path) -> None:
    """Mirror ``src`` into ``dst`` with hard links (copies where links fail): the new tree starts as
    the old one at no cost, and atomic writes into it (rename over a link) leave the old tree as it was.
    Folders keep their modes (mkdir's would follow the umask: a 0750 skypilot/ became 0700 under 077).
    A symbolic link stays a link to what it named, one to a folder too: os.walk lists it among the
    folders (without entering it), and it was made an empty folder, so a user's OUT/data -> /mnt/data
    came out of every `plan --out` and `replan` as an empty data/."""
    for root, dirs, files in os.walk(src):
        rel = Path(root).relative_to(src)
        for d in dirs:
            if (Path(root) / d).is_symlink():
                os.symlink(os.readlink(Path(root) / d), dst / rel / d)
                continue
            (dst / rel / d).mkdir(exist_ok=True)
            os.chmod(dst / rel / d, mode_for(Path(root) / d, 0o777))
        for f in files:
            a, b = Path(root) / f, dst / rel / f
            if a.is_symlink():
                os.symlink(os.readlink(a), b)
                continue
            try:
                os.link(a, b)
            except OSError:
                shutil.copy2(a, b)


@contextmanager
def staged_dir(target: Path, fresh: tuple[str, ...] = ("state.json",)):
    """Yield a folder beside ``target`` that starts as a copy of it; on a clean exit it replaces
    ``target`` whole, on an error (or SIGINT/SIGTERM, which the CLI turns into SystemExit) it is
    removed and ``target`` is as it was. The files in ``fresh`` (the deploy state, which `apply` may
    rewrite meanwhile) are taken from ``target`` again just before the swap, so they are kept apart
    from what the block wrote. ``target`` is checked by :func:`out_dir`; copies a killed run left
    beside it are removed first."""
    target = out_dir(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_stages(target)
    stage = _new_stage(target)
    try:
        os.chmod(stage, mode_for(target, 0o777))
        if target.is_dir():
            _link_tree(target, stage)
        yield stage
        with _swap_turn(target):
            for name in fresh if target.is_dir() else ():
                if (target / name).is_file():
                    (stage / name).unlink(missing_ok=True)
                    os.link(target / name, stage / name)
            _swap_in(stage, target)
    except BaseException as exc:
        shutil.rmtree(stage, ignore_errors=True)
        if isinstance(exc, HetinfraError):  # a file of the copy that a reader refused, named as the user knows it
            exc.message = exc.message.replace(str(stage), str(target))
            exc.hint = exc.hint and exc.hint.replace(str(stage), str(target))
        raise


@contextmanager
def kept_dir(target: Path, fresh: tuple[str, ...] = ("state.json",)):
    """Keep a hard-linked copy of the out dir ``target`` beside it while the block runs, and yield
    ``keep``: an error raised before ``keep()`` was called puts the copy back whole (the files in
    ``fresh``, which the block may rightly change, taken from ``target`` as they are then), so a
    block that writes ``target`` and then fails a check leaves it as it was; after ``keep()``, or on
    a clean exit, what the block wrote stays. Every writer of an out dir replaces files (atomic
    renames, :func:`staged_dir`'s swap), so the links keep the old contents. A copy a killed run left
    is removed by the next :func:`staged_dir` (it is named like its stages)."""
    target = out_dir(target)
    _remove_stale_stages(target)
    copy = _new_stage(target)
    kept = []
    try:
        os.chmod(copy, mode_for(target, 0o777))
        _link_tree(target, copy)
        yield lambda: kept.append(True)
    except BaseException:
        if not kept:
            with _swap_turn(target):
                for name in fresh:
                    (copy / name).unlink(missing_ok=True)
                    if (target / name).is_file():
                        os.link(target / name, copy / name)
                _swap_in(copy, target)
        raise
    finally:
        shutil.rmtree(copy, ignore_errors=True)
