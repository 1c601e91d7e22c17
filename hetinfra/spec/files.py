"""The spec's file fields, checked where the spec file is loaded (hetinfra.spec.load.load_spec) and
found by their type: every field typed :data:`hetinfra.spec.base.FilePath` (profiles, offers, a
dataset, an architecture's config.json: relative to the spec file) or :data:`HostFilePath`
(``deploy.gateway.tls_cert``/``tls_key``, ``deploy.kubernetes.kubeconfig``: read by `apply` on the
deploying machine, relative to its working directory). :func:`spec_file` is the one resolver of such
a path, for this check and for each reader: a leading ``~`` expanded as in the path variables
(``~nobody/x`` was a RuntimeError traceback where pathlib expanded it; the profiles, offers and
kubeconfig readers did not expand it at all), then the rule of path flags (hetinfra.envpaths.path_problem).

A path that can never be read is exit 2 at the field's ``file:line:col``: a loop of symbolic links, a
name no file can have, a folder, FIFO or device, a file that cannot be read. The TLS files were
read only by `apply`: a loop there was refused after `plan` had written OUT, naming no spec line. A
path that is not there passes (a file `apply` reads may exist only on the deploying machine; the
files `plan` reads are reported by their readers)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Annotated, Any, Callable, Iterator, get_args, get_origin

from pydantic import BaseModel

from hetinfra.errors import InvalidInputError, dotted
from hetinfra.spec.base import FileBase

__all__ = ["check_spec_files", "file_fields", "spec_file"]

HINT = ("give the path of a readable file (relative to the spec file; deploy's TLS files and kubeconfig: to the "
        "folder `apply` runs in)")


def spec_file(what: str, value: str, base: Path | None) -> Path:
    """The file a spec field's ``value`` names (``what`` names the field in errors): ``~`` expanded, a
    relative path in ``base`` (the spec's folder; None: the working directory); exit 2 where the
    path cannot be looked up (hetinfra.envpaths.word_path)."""
    from hetinfra.envpaths import word_path

    return word_path(what, value, HINT, base)


def _marks(tp: Any) -> set[str]:
    """The :class:`FileBase` marks inside a type (``FilePath | None``, ``list[FilePath]``)."""
    if get_origin(tp) is Annotated:
        head, *meta = get_args(tp)
        return {str(m) for m in meta if isinstance(m, FileBase)} | _marks(head)
    return set().union(*(_marks(a) for a in get_args(tp)))


def file_fields(model: BaseModel, loc: tuple = ()) -> Iterator[tuple[tuple, str, str]]:
    """(location, path, base mark) of every file path ``model`` (a spec, or a part of one) gives."""
    for name, field in type(model).model_fields.items():
        marks = {str(m) for m in field.metadata if isinstance(m, FileBase)} | _marks(field.annotation)
        yield from _values(getattr(model, name), loc + (name,), marks)


def _values(value: Any, loc: tuple, marks: set[str]) -> Iterator[tuple[tuple, str, str]]:
    if isinstance(value, BaseModel):
        yield from file_fields(value, loc)
    elif isinstance(value, str):
        if marks:
            yield loc, value, min(marks)
    elif isinstance(value, (list, tuple)):
        for k, v in enumerate(value):
            yield from _values(v, loc + (k,), marks)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _values(v, loc + (k,), marks)


def _unreadable(path: Path) -> str | None:
    """Why the file at ``path`` can never be read, or None (not there, or a readable regular file)."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return exc.strerror or str(exc)
    if not stat.S_ISREG(mode):
        from hetinfra.fileio import kind_of

        return f"is {kind_of(mode)}, not a file"
    if not os.access(path, os.R_OK):
        return "cannot be read (permission denied)"
    return None


def check_spec_files(spec: BaseModel, base: Path, locate: Callable[..., str]) -> None:
    """Every file path of ``spec`` (loaded from a file in ``base``) can be read where it is there; else
    an InvalidInputError at the field's line (see the module docstring)."""
    for loc, value, mark in file_fields(spec):
        what = f"{locate(*loc)}: {dotted(loc)}"
        path = spec_file(what, value, base if mark == "spec" else None)
        problem = _unreadable(path)
        if problem:
            shown = value if len(value) <= 60 else value[:57] + "..."
            raise InvalidInputError(f"{what}: {shown!r} {problem}", hint=HINT)
