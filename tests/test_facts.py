"""Facts in one place: the deploy paths' facts (hetinfra.facts) are not written again elsewhere.

In every module of the installed package (the folders pyproject maps into ``hetinfra``) but
hetinfra.facts, the check flags, outside docstrings:

- the number or the string of a port of hetinfra.facts (vLLM's, the gateway's);
- a string that is one of the registry's values: a gateway VM type, a health-check prober range, a
  GPU label a cloud's API takes;
- a tuple, list, set or ``Literal[...]`` whose strings are the precision list or the cloud list
  (as a set: in any order);
- a regex that spells a DNS label (``{0,61}``: hetinfra.facts.is_dns_label is the one rule).

Modules that still write one are counted in :data:`REMAINING` (they belong to other work in progress;
a module may only go down). A planted literal fails.
"""

from __future__ import annotations

import ast
from pathlib import Path

from hetinfra import facts
from tests.test_imports import REPO, modules, parsed, tree_copy  # noqa: F401 (tree_copy: a fixture)

#: module -> literals it still writes (to move to hetinfra.facts; may only go down)
REMAINING: dict[str, int] = {
    "hetinfra.cli.estimate": 1,  # --precision's click.Choice
    "hetinfra.cli.profile_launch": 1,  # the benchmark task's vllm --port
    "hetinfra.plan.feeds": 1,  # the availability feeds' clouds
    "hetinfra.price_feeds.cloud_skus": 10,  # GCE accelerator type -> GPU: GCP.gpu_labels inverted, less P4
    "hetinfra.price_feeds.config": 1,  # the live price sources, which are the clouds' names
    "hetinfra.spec.deploy": 1,  # skypilot_clouds' Literal
    "hetinfra.spec.infrastructure": 1,  # the default infrastructure.clouds
    "hetinfra.spec.models": 1,  # Precision's Literal
}

NUMBERS = {facts.VLLM_PORT, facts.GATEWAY_PORT}
STRINGS = ({str(p) for p in NUMBERS}
           | {c.gateway_vm_type for c in facts.CLOUDS.values()}
           | {r for c in facts.CLOUDS.values() for r in c.health_check_ranges + c.external_lb_check_ranges}
           | {label for c in facts.CLOUDS.values() for label in c.gpu_labels.values()})
LISTS = [set(facts.PRECISIONS), set(facts.CLOUDS)]


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _strings(node: ast.AST) -> set:
    elts = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else []
    return {e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}


def literals(tree: ast.AST) -> list[str]:
    """``line: literal`` of every repeated fact under ``tree`` (see the module docstring)."""
    docs, out = _docstrings(tree), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and id(node) not in docs:
            v = node.value
            if (isinstance(v, int) and not isinstance(v, bool) and v in NUMBERS) or \
                    (isinstance(v, str) and (v in STRINGS or "{0,61}" in v)):
                out.append(f"{node.lineno}: {v!r}")
        group = _strings(node)  # a Literal[...]'s strings are its subscript's tuple
        if group and group in LISTS:
            out.append(f"{node.lineno}: {sorted(group)}")
    return out


#: id of a parsed tree -> (the tree, its literals): the planted-fault test checks a copy of the tree in
#: which all files but the planted ones are the same text, so the same cached tree
#: (tests/test_imports.parsed); a changed file parses to a new tree and is walked again
_LITERALS: dict[int, tuple[ast.AST, list[str]]] = {}


def _tree_literals(tree: ast.AST) -> list[str]:
    if id(tree) not in _LITERALS:  # the tree is held with its literals: its id is never reused
        _LITERALS[id(tree)] = tree, literals(tree)
    return list(_LITERALS[id(tree)][1])


def problems(repo: Path) -> list[str]:
    found = {name: _tree_literals(parsed(path)) for name, path in modules(repo).items()
             if name != "hetinfra.facts"}
    return [f"{m} writes {len(lits)} fact(s) of hetinfra.facts again (allowed {REMAINING.get(m, 0)}): "
            f"{', '.join(lits[:6])}; import it from hetinfra.facts" for m, lits in sorted(found.items())
            if len(lits) > REMAINING.get(m, 0)]


def test_no_module_repeats_a_fact_beyond_its_count():
    assert problems(REPO) == []


def test_a_planted_fact_fails(tree_copy):
    planted = {"hetinfra/gateway/balancer.py": "PORT = 8000\n",
               "stacks/aws.py": "GATEWAY = 'c7i.large'\n",
               "hetinfra/compile/router.py": "P = ['int4', 'fp8', 'bf16', 'fp16', 'int8']\n",
               "price_feeds/offers.py": "import re\nNAME = re.compile(r'^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$')\n"}
    for rel, code in planted.items():
        path = tree_copy / rel
        path.write_text(path.read_text() + "\n\n" + code)
    found = problems(tree_copy)
    for module in ("hetinfra.gateway.balancer", "hetinfra.stacks.aws", "hetinfra.compile.router",
                   "hetinfra.price_feeds.offers"):
        assert any(p.startswith(f"{module} writes") for p in found), (module, found)
    # docstrings and hetinfra.facts itself may
    doc = tree_copy / "hetinfra" / "gateway" / "origins.py"
    doc.write_text('"""Listens on 8080 (c7i.large)."""\n' + doc.read_text())
    own = tree_copy / "hetinfra" / "facts.py"
    own.write_text(own.read_text() + "\nOTHER = 8000\n")
    assert not any(p.startswith(("hetinfra.gateway.origins", "hetinfra.facts ")) for p in problems(tree_copy))
