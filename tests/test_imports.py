"""The import graph of the installed package: no circles, dependencies point one way (the table in
docs/internals/layering.md, "Import layers"), public names only across modules, and the plan path never reaches
Pulumi or SkyPilot.

Every ``import`` statement counts, also those inside functions (a lazy import is still a
dependency). The walker reads the source folders that pyproject maps into the ``hetinfra``
namespace; a test plants a circle and a wrong-way import in a copy of the tree to show it fails.
"""

from __future__ import annotations

import ast
import functools
import shutil
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: stage -> the stages it may import (besides the shared base: hetinfra, hetinfra.errors, hetinfra.fileio, hetinfra.foreign, hetinfra.appender, hetinfra.yamltext, hetinfra.httpget,
#: hetinfra.csvtext, hetinfra.envpaths, hetinfra.outdir, hetinfra.facts, hetinfra.architecture, hetinfra.tables, hetinfra.clientkeys). Written out in docs/internals/layering.md ("Import layers"); keep the two in step.
ALLOWED: dict[str, set[str]] = {
    "spec": set(),
    # plan.json and state.json as typed documents: the contract every stage after the planner reads
    "document": {"spec", "catalog"},
    "catalog": set(),
    "perf": {"spec", "catalog"},
    "price_feeds": {"catalog"},
    "solver": set(),
    "sim": {"spec", "catalog", "perf", "document"},
    "plan": {"spec", "catalog", "perf", "price_feeds", "solver", "sim", "document"},
    "compile": {"catalog", "perf", "price_feeds", "plan", "document"},
    "stacks": {"catalog", "price_feeds", "compile", "document"},
    "deploy": {"catalog", "price_feeds", "compile", "document"},
    "replan": {"spec", "catalog", "perf", "price_feeds", "plan", "compile", "deploy", "document"},
    "gateway": {"spec", "catalog", "compile", "document"},
    "cli": {"spec", "catalog", "perf", "price_feeds", "solver", "sim", "plan", "compile", "deploy", "replan",
            "gateway", "document"},
}
BASE = {"hetinfra", "hetinfra.errors", "hetinfra.fileio", "hetinfra.foreign", "hetinfra.appender", "hetinfra.csvtext", "hetinfra.envpaths", "hetinfra.outdir", "hetinfra.yamltext", "hetinfra.httpget", "hetinfra.facts", "hetinfra.procs",
        "hetinfra.architecture", "hetinfra.tables", "hetinfra.clientkeys"}
#: third-party packages only some stages may import
HEAVY = {"pulumi": {"stacks", "deploy"}, "pulumi_kubernetes": {"stacks"}, "kubernetes": {"deploy"}, "sky": {"deploy"}, "pyomo": {"solver"}, "highspy": {"solver"},
         "uvicorn": {"gateway"}, "starlette": {"gateway"}, "httpx": {"gateway"}, "aiohttp": {"gateway"},
         "prometheus_client": {"gateway"}}


#: C extension modules (setup.py): not Python sources, and they import nothing of ours
EXTENSIONS = {"hetinfra.sim._core"}


def package_roots(repo: Path) -> dict[str, Path]:
    """Import name -> folder, from pyproject's package-dir mapping."""
    cfg = tomllib.loads((repo / "pyproject.toml").read_text())
    return {name: repo / folder for name, folder in cfg["tool"]["setuptools"]["package-dir"].items()}


def modules(repo: Path) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for pkg, root in sorted(package_roots(repo).items(), key=lambda kv: -len(kv[0])):
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join([pkg, *parts])
            out.setdefault(name, path)  # a mapped sub-package wins over a folder of the same name
    return out


def parsed(path: Path) -> ast.Module:
    """``path``'s syntax tree, parsed once per source text: the planted-fault tests check copies of the
    tree in which all but one file are the same (the trees are read, never changed)."""
    return _parse(source(path))


def source(path: Path) -> str:
    """``path``'s text, read once, after checking it parses (a file that does not fails here, naming
    the file); its tree is then ``_parse(text)``, from the cache."""
    text = path.read_text()
    try:
        _parse(text)
    except SyntaxError:
        ast.parse(text, str(path))  # raises again, naming the file
    return text


@functools.lru_cache(maxsize=None)
def _parse(text: str) -> ast.Module:
    return ast.parse(text)


def imports(mods: dict[str, Path]) -> tuple[dict[str, set[str]], dict[str, set[str]], list[str]]:
    """(module -> hetinfra modules it imports, module -> top-level third-party names, private imports)."""
    edges: dict[str, set[str]] = {m: set() for m in mods}
    third: dict[str, set[str]] = {m: set() for m in mods}
    private: list[str] = []
    for name, path in mods.items():
        for mod, attr in import_targets(source(path), name, path.name == "__init__.py"):
            if attr is _LOADS:
                if mod in mods:
                    edges[name].add(mod)  # a name a package loads on first use (hetinfra.lazy_names)
                continue
            if f"{mod}.{attr}" in EXTENSIONS or mod in EXTENSIONS:
                continue  # compiled: a leaf, it imports nothing of ours
            if mod.split(".")[0] != "hetinfra":
                third[name].add(mod.split(".")[0])
                continue
            if attr and f"{mod}.{attr}" in mods:
                edges[name].add(f"{mod}.{attr}")
                continue
            if attr and attr.startswith("_") and not attr.startswith("__"):
                private.append(f"{name} imports {attr} from {mod}")
            while mod and mod not in mods:
                mod = mod.rpartition(".")[0]
            if mod:
                edges[name].add(mod)
    return edges, third, private


#: the attribute of a package's string constant in import_targets: a module name it may load on first use
_LOADS = object()


@functools.lru_cache(maxsize=None)
def import_targets(text: str, name: str, is_pkg: bool) -> tuple[tuple[str, object], ...]:
    """What module ``name``'s source ``text`` imports, in the order of its syntax tree's walk: (module,
    imported name or None) per import, and in a package (``__init__.py``) (constant, _LOADS) per string
    constant. Walked once per source text, name and kind: the planted-fault tests check copies of the
    tree in which all but one file are the same (imports() resolves these against each tree's modules)."""
    out: list[tuple[str, object]] = []
    for node in ast.walk(_parse(text)):
        if is_pkg and isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append((node.value, _LOADS))
        elif isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out += [(mod, a.name) for a in node.names]
    return tuple(out)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), or a module importing itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in edges.get(v, ()):
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def stage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ALLOWED else None


def wrong_way(edges: dict[str, set[str]], third: dict[str, set[str]]) -> list[str]:
    bad = []
    for a, targets in sorted(edges.items()):
        sa = stage(a)
        for b in sorted(targets):
            sb = stage(b)
            if b in BASE or sb == sa:
                continue
            if sa is None:  # the shared base imports no stage
                bad.append(f"{a} (shared base) imports {b}")
            elif sb is None or sb not in ALLOWED[sa]:
                bad.append(f"{a} ({sa}) imports {b}: {sa} never uses {sb or b}")
        for lib in sorted(third[a]):
            if lib in HEAVY and sa not in HEAVY[lib]:
                bad.append(f"{a} imports {lib}: only {', '.join(sorted(HEAVY[lib]))} may")
    return bad


def reachable(edges: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(edges.get(m, ()))
    return seen


def check(repo: Path) -> list[str]:
    mods = modules(repo)
    edges, third, private = imports(mods)
    problems = [f"import circle: {' -> '.join(c)}" for c in cycles(edges)]
    problems += wrong_way(edges, third) + private
    for m in sorted(reachable(edges, "hetinfra.cli.plan")):
        for lib in ("pulumi", "pulumi_kubernetes", "sky", "kubernetes"):
            if lib in third[m]:
                problems.append(f"`hetinfra plan` reaches {m}, which imports {lib}")
    return problems


# ---- the tests ---------------------------------------------------------------------------------------

def test_installed_package_has_no_circles_and_respects_the_layout():
    assert check(REPO) == []


def test_every_source_package_is_listed_in_pyproject():
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())
    listed = set(cfg["tool"]["setuptools"]["packages"])
    found = {name.rpartition(".")[0] if path.name != "__init__.py" else name for name, path in modules(REPO).items()}
    assert found == listed


def test_every_stage_has_a_mirrored_test_folder():
    for name in ALLOWED:
        assert (REPO / "tests" / name).is_dir(), f"tests/{name}/ is missing"


@pytest.fixture
def tree_copy(tmp_path):
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(REPO / "pyproject.toml", copy)
    for folder in package_roots(REPO).values():
        shutil.copytree(folder, copy / folder.name, ignore=shutil.ignore_patterns("__pycache__", "data"))
    return copy


def test_a_planted_circle_fails(tree_copy):
    units = tree_copy / "hetinfra" / "spec" / "units.py"
    units.write_text(units.read_text() + "\n\ndef _planted():\n    from hetinfra.spec import load  # noqa\n")
    problems = check(tree_copy)
    assert any(p.startswith("import circle:") and "hetinfra.spec.load" in p and "hetinfra.spec.units" in p
               for p in problems), problems


def test_a_wrong_way_import_and_a_private_name_fail(tree_copy):
    solve = tree_copy / "solver" / "solve.py"
    solve.write_text(solve.read_text() + "\n\ndef _planted():\n    from hetinfra.cli.common import fail  # noqa\n"
                     "    from hetinfra.plan.feeds import _x  # noqa\n")
    problems = check(tree_copy)
    assert "hetinfra.solver.solve (solver) imports hetinfra.cli.common: solver never uses cli" in problems
    assert "hetinfra.solver.solve imports _x from hetinfra.plan.feeds" in problems


def test_pulumi_on_the_plan_path_fails(tree_copy):
    inputs = tree_copy / "hetinfra" / "plan" / "inputs.py"
    inputs.write_text(inputs.read_text() + "\n\ndef _planted():\n    import pulumi  # noqa\n")
    problems = check(tree_copy)
    assert "`hetinfra plan` reaches hetinfra.plan.inputs, which imports pulumi" in problems
    assert "hetinfra.plan.inputs imports pulumi: only deploy, stacks may" in problems


def test_the_kubernetes_client_on_the_plan_path_fails(tree_copy):
    render = tree_copy / "hetinfra" / "compile" / "kubernetes" / "render.py"
    render.write_text(render.read_text() + "\n\ndef _planted():\n    import kubernetes  # noqa\n")
    problems = check(tree_copy)
    assert "`hetinfra plan` reaches hetinfra.compile.kubernetes.render, which imports kubernetes" in problems
    assert "hetinfra.compile.kubernetes.render imports kubernetes: only deploy may" in problems


def test_the_extension_list_is_setup_pys():
    """EXTENSIONS (skipped by the layering check) names exactly the C extensions setup.py builds."""
    import re

    assert set(re.findall(r'Extension\("([\w.]+)"', (REPO / "setup.py").read_text())) == EXTENSIONS


#: package -> why its ``__init__`` may import a submodule of its own when the package loads
INIT_IMPORTS_ALLOWED = {
    "hetinfra.cli": "installs the stop handlers (hetinfra.cli.stops) first, before any thread of ours exists",
}


def init_self_imports(repo: Path) -> list[str]:
    """Each package ``__init__`` that imports a submodule of its own at load time (a module-level
    import, not one under ``if TYPE_CHECKING:`` nor inside a function): "load a submodule" then needs
    "initialise its package", which itself loads a submodule, so two threads importing at once
    (hetinfra.cli.preload's beside the command's) can hold each other's module lock and one of them
    meets Python's import deadlock error. hetinfra.sim and hetinfra.document did; their names now
    load on first use (PEP 562)."""
    found = []
    for name, path in modules(repo).items():
        if path.name != "__init__.py" or name in INIT_IMPORTS_ALLOWED:
            continue
        for node in parsed(path).body:  # module level only: if/try bodies of TYPE_CHECKING skipped
            targets = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            found += [f"{name} imports {t} when it loads" for t in targets if t.startswith(name + ".")]
    return found


def test_no_package_init_loads_its_own_submodules():
    assert init_self_imports(REPO) == []


def test_a_planted_init_import_fails(tree_copy):
    init = tree_copy / "hetinfra" / "sim" / "__init__.py"
    init.write_text(init.read_text() + "\nfrom hetinfra.sim.workload import WorkloadConfig  # noqa\n")
    assert init_self_imports(tree_copy) == ["hetinfra.sim imports hetinfra.sim.workload when it loads"]
