"""docs/glossary.md names every class whose name says "Unit", and each with its module (the glossary
is the one statement of what a unit is to each stage)."""

from __future__ import annotations

import re

from tests.docs.pages import REPO
from tests.test_imports import modules


def unit_classes() -> dict[str, str]:
    """class name -> module, for every class of the package whose name contains "Unit" (a line scan:
    parsing every module would cost the suite 2 s; a class statement starts its line)."""
    return {name: module for module, path in modules(REPO).items()
            for name in re.findall(r"^\s*class (\w*Unit\w*)\b", path.read_text(), flags=re.M)}


def test_the_glossary_names_every_unit_class_with_its_module():
    page = (REPO / "docs" / "glossary.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| \w+ \(`([\w.]+)`\)", page, flags=re.M))
    found = unit_classes()
    assert "DeployedUnit" in found and len(found) >= 9
    missing = sorted(set(found) - set(rows))
    assert not missing, f"docs/glossary.md does not define {missing}: add a row to 'One unit, seen by each stage'"
    wrong = {name: (rows[name], module) for name, module in found.items() if module != rows[name]}
    assert not wrong, f"docs/glossary.md names another module (page, code): {wrong}"
