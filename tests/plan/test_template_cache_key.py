"""The template cache's code key: the source of every module the library's builder imports (its import
graph), so that no edit to a rate-deciding module leaves a stale cached rate (issue 34: a hand-kept list
missed perf/confidence.py and facts.py)."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from hetinfra.plan.template_cache import _code_fingerprint, imported_modules, module_file, rate_module_files

PACKAGE = Path(__file__).resolve().parents[2] / "hetinfra"


def ast_imports(source: str) -> set[str]:
    """What Python's parser says ``source`` imports of hetinfra (``from a import b``: a and a.b)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("hetinfra"):
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("hetinfra")}
    return found


@pytest.mark.parametrize("tree", ["hetinfra", "price_feeds", "solver", "stacks"])
def test_the_line_scan_finds_every_import_the_parser_finds(tree):
    """The key's cheap scan against Python's own parser, over every module of the package."""
    for path in sorted((PACKAGE.parent / tree).rglob("*.py")):
        source = path.read_text()
        missed = ast_imports(source) - imported_modules(source)
        assert not missed, f"{path}: the scan misses {sorted(missed)}"


def test_the_graph_holds_the_modules_a_hand_list_missed():
    files = rate_module_files(PACKAGE)
    for rel in ("hetinfra/perf/confidence.py", "hetinfra/facts.py", "hetinfra/perf/estimator.py",
                "hetinfra/perf/calibration.py", "hetinfra/catalog/gpus.py", "hetinfra/plan/templates_mixed.py"):
        assert rel in files, f"{rel} decides rates and is not in the key"
    assert not any(rel.startswith(("hetinfra/sim/", "hetinfra/compile/", "hetinfra/cli/")) for rel in files)


def test_module_file_reads_the_checkout_and_the_installed_layout(tmp_path):
    assert module_file("hetinfra.perf.confidence", PACKAGE) == PACKAGE / "perf" / "confidence.py"
    assert module_file("hetinfra.price_feeds.offers", PACKAGE) == PACKAGE.parent / "price_feeds" / "offers.py"
    assert module_file("hetinfra.perf.confidence.LEVELS", PACKAGE) is None  # a name, not a module
    installed = tmp_path / "hetinfra" / "price_feeds"
    installed.mkdir(parents=True)
    (installed / "offers.py").write_text("")
    assert module_file("hetinfra.price_feeds.offers", tmp_path / "hetinfra") == installed / "offers.py"


@pytest.fixture
def tree_copy(tmp_path) -> Path:
    """A copy of the source trees the graph can reach, to edit."""
    for name in ("hetinfra", "price_feeds", "solver"):
        shutil.copytree(PACKAGE.parent / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    return tmp_path / "hetinfra"


def test_editing_any_module_of_the_graph_changes_the_key(tree_copy):
    before = _code_fingerprint(tree_copy)
    for rel in rate_module_files(tree_copy):
        path = tree_copy.parent / rel
        source = path.read_bytes()
        path.write_bytes(source + b"\n# edited\n")
        assert _code_fingerprint(tree_copy) != before, f"editing {rel} left the key as it was"
        path.write_bytes(source)
    assert _code_fingerprint(tree_copy) == before


def test_a_new_import_joins_the_graph_and_other_modules_stay_out(tree_copy):
    before = _code_fingerprint(tree_copy)
    (tree_copy / "sim" / "replica.py").write_text((tree_copy / "sim" / "replica.py").read_text() + "\n# edited\n")
    assert _code_fingerprint(tree_copy) == before  # the simulator decides no template's rate
    confidence = tree_copy / "perf" / "confidence.py"
    confidence.write_text(confidence.read_text() + "\n\ndef _later():\n    from hetinfra.sim import replica\n")
    assert "hetinfra/sim/replica.py" in rate_module_files(tree_copy)
    assert _code_fingerprint(tree_copy) != before


def test_a_comment_inside_a_parenthesised_import_ends_its_line_only():
    """``from m import (A,  # note`` then ``B)``: B is still read (a comment once cut the rest of the list)."""
    source = "from hetinfra.plan.rounds import (A,  # noqa: F401\n    B, C)\n"
    assert imported_modules(source) == {"hetinfra.plan.rounds", "hetinfra.plan.rounds.A",
                                        "hetinfra.plan.rounds.B", "hetinfra.plan.rounds.C"}
