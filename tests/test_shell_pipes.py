"""The scripts hetinfra generates run under ``set -o pipefail``: a pipe into a reader that stops early
(``head``) can kill its writer with SIGPIPE, and the whole pipeline then fails with exit 141, at
random (the Ray bootstrap's ``echo "$SKYPILOT_NODE_IPS" | head -n1`` did, once under load). Readers
that read all their input (``sed -n 1p``, ``awk``) do not. No string in the installed package pipes
into ``head``; a planted one fails."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.test_imports import REPO, modules, parsed, tree_copy  # noqa: F401 (tree_copy: a fixture)

#: a pipe into head (or into anything through xargs head): the reader that may stop before its input ends
EARLY_READER = re.compile(r"\|\s*head\b")


def early_readers(repo: Path) -> list[str]:
    out = []
    for name, path in modules(repo).items():
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and EARLY_READER.search(node.value):
                out.append(f"{name}:{node.lineno}: {node.value.strip()[:80]}")
    return out


def test_no_generated_script_pipes_into_head():
    assert early_readers(REPO) == []


def test_a_planted_pipe_into_head_fails(tree_copy):
    (tree_copy / "hetinfra" / "planted.py").write_text('SCRIPT = "ip=$(gcloud compute instances list | head -n1)"\n')
    assert [p.split(":")[0] for p in early_readers(tree_copy)] == ["hetinfra.planted"]
