"""plan.json's ``inputs.spec_path``: where the plan's spec is, found from whatever folder a command
runs in (docs/reference/plan-json.md).

It was written as `hetinfra plan` was given it, relative to the folder `plan` ran in, and `simulate`
joined it to the plan's folder when the current folder did not have it: `hetinfra simulate
/tmp/x/chat` run from /tmp looked for /tmp/x/chat/services/chat.yaml. Now

* a plan made for an OUT folder (`plan --out OUT`, `replan --state OUT`) stores the spec's path
  relative to OUT (:func:`stored_spec_path`), so OUT and its spec moved together still find each
  other; copies of plan.json in OUT's sub-folders (``proposed/``, ``pulumi/<cloud>/``) keep OUT's value;
* a plan printed with ``--json`` and no OUT stores the absolute path;
* a reader (:func:`spec_file`) takes an absolute path as it is, and a relative one against the plan
  file's folder or a folder above it (the copies), else the current folder: how plan.json files
  written before this rule are read, from where `plan` ran. Where several of these hold a file, the
  one whose text hashes to ``inputs.spec_sha256`` wins (the spec the plan was made from).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["spec_candidates", "spec_file", "stored_spec_path"]


def stored_spec_path(spec: str | Path, out: str | Path | None) -> str:
    """``inputs.spec_path`` of a plan of the spec at ``spec`` (as given, relative to the current
    folder) made for the OUT folder ``out`` (None: none, printed): relative to OUT, else absolute.
    Real paths on both sides: a folder reached through a symbolic link is left by ``..`` from where
    it really lies."""
    where = os.path.realpath(spec)
    if out is None:
        return where
    try:
        return os.path.relpath(where, os.path.realpath(out))
    except ValueError:  # another drive (Windows): no relative path
        return where


def spec_candidates(plan_file: Path, stored: str) -> list[Path]:
    """Where ``stored`` (``inputs.spec_path`` of the plan.json at ``plan_file``) may be, in order."""
    path = Path(stored)
    if path.is_absolute():
        return [path]
    folder = plan_file.absolute().parent
    return [*(f / path for f in (folder, *folder.parents)), Path.cwd() / path]


def spec_file(plan_file: Path, stored: str | None, sha256: str | None) -> tuple[Path | None, list[Path]]:
    """The spec of the plan.json at ``plan_file`` (``stored``: its ``inputs.spec_path``; ``sha256``:
    its ``inputs.spec_sha256``) and the places looked in; None where no place holds a file."""
    if not stored:
        return None, []
    looked = spec_candidates(plan_file, stored)
    found = list(dict.fromkeys(p for p in looked if _is_file(p)))
    for p in found:
        if sha256 and _sha256(p) == sha256:
            return p, looked
    return (found[0] if found else None), looked


def _is_file(path: Path) -> bool:
    """Whether a regular file is at ``path``; False where no file can be (Path.is_file raises on a name
    over 255 bytes or a NUL byte: a spec_path edited so was a traceback in simulate and replan)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def _sha256(path: Path) -> str | None:
    """As ``inputs.spec_sha256`` hashes a spec (hetinfra.spec.load reads it with hetinfra.fileio)."""
    from hetinfra.errors import HetinfraError
    from hetinfra.fileio import read_text, sha256_text

    try:
        return sha256_text(read_text(path, "spec file"))
    except HetinfraError:
        return None
