"""The scripts hetinfra generates run under ``set -o pipefail``: a pipe into a reader that stops early
(``head``) can kill its writer with SIGPIPE, and the whole pipeline then fails with exit 141, at
random (the Ray bootstrap's ``echo "$SKYPILOT_NODE_IPS" | head -n1`` did, once under load). Readers
that read all their input (``sed -n 1p``, ``awk``) do not. No string in the installed package pipes
into ``head``; a planted one fails."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

from tests.test_imports import REPO, _parse, modules, source, tree_copy  # noqa: F401 (tree_copy: a fixture)

#: a pipe into head (or into anything through xargs head): the reader that may stop before its input ends
EARLY_READER = re.compile(r"\|\s*head\b")


def early_readers(repo: Path) -> list[str]:
    out = []
    for name, path in modules(repo).items():
        out += [f"{name}:{line}: {value.strip()[:80]}" for line, value in _early_in(source(path))]
    return out


@functools.lru_cache(maxsize=None)
def _early_in(text: str) -> tuple[tuple[int, str], ...]:
    """(line, string) of each string constant of the module ``text`` that pipes into head; walked once
    per source text (the planted test's tree copy differs from the checkout in one file)."""
    return tuple((node.lineno, node.value) for node in ast.walk(_parse(text))
                 if isinstance(node, ast.Constant) and isinstance(node.value, str) and EARLY_READER.search(node.value))


def test_no_generated_script_pipes_into_head():
    assert early_readers(REPO) == []


def test_a_planted_pipe_into_head_fails(tree_copy):
    (tree_copy / "hetinfra" / "planted.py").write_text('SCRIPT = "ip=$(gcloud compute instances list | head -n1)"\n')
    assert [p.split(":")[0] for p in early_readers(tree_copy)] == ["hetinfra.planted"]
