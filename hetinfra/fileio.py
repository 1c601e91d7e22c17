"""File I/O every stage may import (it imports only hetinfra.errors): the one way to read a user's
file, and atomic writes.

Reading (:func:`read_text`): a regular file only (not a directory, FIFO or device, which would
hang or fill memory), at most a stated size, UTF-8 with or without a BOM (spreadsheets write one);
every failure is an InvalidInputError naming the file and what to do (exit 2), never a traceback.

Writing: a reader (a cron job, ``pulumi``, another hetinfra run) never sees a half-written file or
folder: files are written to a temporary name in the same directory and renamed into place.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path

from hetinfra.errors import InvalidInputError

#: the largest file hetinfra reads by default (a spec, an offers or profiles CSV, a plan): 64 MiB
MAX_READ_BYTES = 64 << 20


def read_text(path: str | Path, what: str = "file", *, max_bytes: int = MAX_READ_BYTES,
              hint: str | None = None) -> str:
    """The text of the regular file ``path`` (``what`` names it in errors, e.g. "offers CSV")."""
    p = Path(path)
    try:
        info = os.stat(p)
    except FileNotFoundError:
        raise InvalidInputError(f"{what} not found: {p}", hint=hint) from None
    except OSError as exc:
        raise InvalidInputError(f"cannot read {what} {p}: {exc.strerror or exc}", hint=hint) from None
    if stat.S_ISDIR(info.st_mode):
        raise InvalidInputError(f"{what} {p} is a directory, not a file", hint=hint)
    if not stat.S_ISREG(info.st_mode):
        raise InvalidInputError(f"{what} {p} is not a regular file (a pipe, socket or device)", hint=hint)
    if info.st_size > max_bytes:
        raise InvalidInputError(f"{what} {p} is {info.st_size} bytes, more than the {max_bytes} allowed",
                                hint="split it or pass a smaller file")
    try:
        with open(p, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise InvalidInputError(f"cannot read {what} {p}: {exc.strerror or exc}", hint=hint) from None
    if len(data) > max_bytes:
        raise InvalidInputError(f"{what} {p} grew past the {max_bytes} bytes allowed while it was read")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise InvalidInputError(f"{what} {p}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
                                hint="save the file as UTF-8") from None


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def replace_dir(target: Path, files: dict[str, str]) -> None:
    """Make ``target`` contain exactly ``files`` (name -> text), swapping a fully written copy in."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.new.", dir=target.parent))
    try:
        for name, text in files.items():
            (staging / name).parent.mkdir(parents=True, exist_ok=True)  # names may hold sub-folders
            (staging / name).write_text(text)
        _swap_in(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _swap_in(stage: Path, target: Path) -> None:
    """Put the folder ``stage`` where ``target`` is (two renames: the old one is moved aside first)."""
    old = None
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
        os.replace(target, old / target.name)
    os.replace(stage, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def number_cell(raw: str | None, *, where: str, column: str, lo: float, hi: float,
                whole: bool = False) -> float | None:
    """A CSV cell as a finite number in [lo, hi] (None when empty), or an InvalidInputError naming
    ``where`` (file:line) and the column: the one parser of every number read from a user's CSV."""
    raw = (raw or "").strip()
    if raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        raise InvalidInputError(f"{where}: column '{column}' is {raw[:40]!r}, not a number") from None
    if value != value or not lo <= value <= hi or (whole and value != int(value)):
        kind = "a whole number" if whole else "a number"
        raise InvalidInputError(f"{where}: column '{column}' must be {kind} in [{lo:g}, {hi:g}], got {raw[:40]!r}")
    return value


def _non_finite_at(doc: object, path: str = "$") -> str | None:
    """JSON path of the first NaN or infinity in ``doc``, or None."""
    if isinstance(doc, float) and doc != doc or doc in (float("inf"), float("-inf")):
        return path
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, (list, tuple)) else ()
    for key, value in items:
        found = _non_finite_at(value, f"{path}.{key}" if isinstance(doc, dict) else f"{path}[{key}]")
        if found:
            return found
    return None


def dumps_strict(doc: object, **kwargs) -> str:
    """JSON text of ``doc`` that every JSON parser reads: NaN and infinities are a bug, raised (with
    the path of the value) instead of written as the non-JSON tokens NaN/Infinity."""
    try:
        return json.dumps(doc, allow_nan=False, **kwargs)
    except ValueError:
        from hetinfra.errors import HetinfraError

        raise HetinfraError(f"internal error: a non-finite number at {_non_finite_at(doc)} would make the JSON "
                            "invalid", hint="please report this with the command and its input") from None


def _link_tree(src: Path, dst: Path) -> None:
    """Mirror ``src`` into ``dst`` with hard links (copies where links fail): the new tree starts as
    the old one at no cost, and atomic writes into it (rename over a link) leave the old tree as it was."""
    for root, dirs, files in os.walk(src):
        rel = Path(root).relative_to(src)
        for d in dirs:
            (dst / rel / d).mkdir(exist_ok=True)
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
    ``target`` whole, on an error it is removed and ``target`` is as it was. The files in ``fresh``
    (the deploy state, which `apply` may rewrite meanwhile) are taken from ``target`` again just
    before the swap, so they are kept apart from what the block wrote."""
    target.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{target.name}.new.", dir=target.parent))
    try:
        os.chmod(stage, stat.S_IMODE(os.stat(target).st_mode) if target.is_dir() else 0o755)
        if target.is_dir():
            _link_tree(target, stage)
        yield stage
        for name in fresh if target.is_dir() else ():
            if (target / name).is_file():
                (stage / name).unlink(missing_ok=True)
                os.link(target / name, stage / name)
        _swap_in(stage, target)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
