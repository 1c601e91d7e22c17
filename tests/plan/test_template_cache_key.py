"""The template cache's code key: the source of every module the library's builder imports (its import
graph), so that no edit to a rate-deciding module leaves a stale cached rate (issue 34: a hand-kept list
missed perf/confidence.py and facts.py)."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

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
                "hetinfra/perf/calibration.py", "hetinfra/catalog/gpus.py", "hetinfra/plan/templates_mixed.py",
                "hetinfra/perf/aic_backend.py", "hetinfra/perf/kernel_fit.py", "hetinfra/perf/published.py"):
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


def test_the_kernel_backends_release_enters_the_key_when_it_decides_rates(tmp_path, monkeypatch):
    """planning.estimator aiconfigurator/auto: the rates follow aiconfigurator-core's kernel database,
    which ships in its wheel, so its version is in the key; builtin plans do not depend on it."""
    from hetinfra.plan import template_cache
    from hetinfra.plan.inputs import resolve
    from hetinfra.spec.load import load_spec
    from tests.plan.test_template_cache import _write
    from tests.solver.test_mixed_pipelines import _spec

    def keys(estimator: str) -> list[str]:
        spec = _spec(tmp_path, mixed=False)
        spec.setdefault("planning", {})["estimator"] = estimator
        path = _write(tmp_path, spec)
        loaded, text, locate = load_spec(path)
        inputs = resolve(loaded, path, text, None, locate)
        cache = template_cache.TemplateCache(tmp_path)
        return [cache.key(inputs, pm) for pm in inputs.models]

    release = {"v": "0.12.0"}
    monkeypatch.setattr(template_cache, "_aiconfigurator_version", lambda: release["v"])
    builtin, auto = keys("builtin"), keys("auto")
    release["v"] = "0.13.0"
    assert keys("builtin") == builtin
    assert keys("auto") != auto


def test_a_fresh_process_takes_the_stored_fingerprint_until_the_graph_changes(tree_copy, tmp_path, monkeypatch):
    """The cache directory keeps the fingerprint (a fresh `hetinfra plan` then skips reading the import
    graph); an edited module or a module added beside the graph's makes it read the graph again."""
    from hetinfra.plan import template_cache

    store = tmp_path / "cache"
    before = _code_fingerprint(tree_copy, store)
    assert (store / template_cache.FINGERPRINT_FILE).is_file()
    reads = []
    real = template_cache.rate_module_files
    monkeypatch.setattr(template_cache, "rate_module_files", lambda package: reads.append(1) or real(package))

    def fresh() -> str:
        template_cache._FINGERPRINTS.clear()  # what a new process starts with
        return _code_fingerprint(tree_copy, store)

    assert fresh() == before and not reads
    confidence = tree_copy / "perf" / "confidence.py"
    confidence.write_text(confidence.read_text() + "\n# edited\n")
    assert fresh() != before and len(reads) == 1
    (tree_copy / "perf" / "new_module.py").write_text("")  # a folder of the graph changed: read it again
    fresh()
    assert len(reads) == 2
    assert fresh() and len(reads) == 2


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8)


_FRESH: dict = {}  # the key and code-fingerprint.json a fresh process computes: the same in every example


def _fresh_fingerprint(tmp_path_factory) -> tuple[str, dict]:
    """(the key, the stored document) of a fresh process, computed once for the examples below."""
    from hetinfra.plan import template_cache

    if not _FRESH:
        store = tmp_path_factory.mktemp("cache")
        template_cache._FINGERPRINTS.clear()  # a fresh process: the key is computed and stored
        _FRESH["real"] = _code_fingerprint(PACKAGE, store)
        _FRESH["doc"] = json.loads((store / template_cache.FINGERPRINT_FILE).read_text())
    return _FRESH["real"], json.loads(json.dumps(_FRESH["doc"]))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(part=st.sampled_from(["package", "digest", "stats", "a stat"]),
       value=json_values | st.lists(st.integers(0, 2**63), min_size=2, max_size=2),  # a stat's own shape too
       path=st.text(max_size=12) | st.just("/tmp/a\0b"))
def test_any_stored_fingerprint_gives_the_real_key(tmp_path_factory, part, value, path):
    """code-fingerprint.json sits in a cache anyone can edit: whatever it holds, the key is the graph's
    own, or the stored digest where only that was edited and typed (docs/trust.md: the cache is not
    signed); never an error (a stats path holding a NUL byte was a ValueError traceback in every plan)."""
    from hetinfra.plan import template_cache

    store = tmp_path_factory.mktemp("cache")
    real, doc = _fresh_fingerprint(tmp_path_factory)
    if part == "a stat":
        doc["stats"][path] = value
    else:
        doc[part] = value
    (store / template_cache.FINGERPRINT_FILE).write_text(json.dumps(doc))
    template_cache._FINGERPRINTS.clear()
    got = _code_fingerprint(PACKAGE, store)
    if part == "digest" and isinstance(value, str):  # a typed edit with the stats intact: trusted, as documented
        assert got == value
    else:
        assert got == real
