"""docs/internals/layering.md's "Import layers" list says what tests/test_imports.py enforces."""

from __future__ import annotations

import re

from tests.docs.pages import REPO
from tests.test_imports import ALLOWED


def documented_layers() -> dict[str, set[str]]:
    """stage -> the stages its bullet says it uses ("- `plan` uses spec, catalog (...), ...; never ...")."""
    text = (REPO / "docs" / "internals" / "layering.md").read_text()
    section = text.split("## Import layers", 1)[1]
    layers = {}
    for stage, uses in re.findall(r"^- `(\w+)`(?: \([^)]*\))? uses ([^;]*)", section, flags=re.M):
        uses = re.sub(r"\([^)]*\)", "", uses)
        layers[stage] = set() if uses.strip() == "nothing else" else {w.strip() for w in uses.split(",") if w.strip()}
    return layers


def test_the_page_lists_the_enforced_layers():
    assert documented_layers() == ALLOWED, "update docs/internals/layering.md (Import layers) with tests/test_imports.py"
