"""Atomic file writes, the one I/O helper every stage may import (it imports nothing of hetinfra).

A reader (a cron job, ``pulumi``, another hetinfra run) never sees a half-written file or folder:
files are written to a temporary name in the same directory and renamed into place.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


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
        old = None
        if target.exists():
            old = target.with_name(f".{target.name}.old.{os.getpid()}")
            os.replace(target, old)
        os.replace(staging, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
