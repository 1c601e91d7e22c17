"""state.json has one writer: hetinfra.deploy.state.DeployState's methods. No other module of the
package changes ``state.doc`` itself (a subscript store or delete, or a mutating call on it)."""

from __future__ import annotations

import ast

from tests.test_imports import REPO, modules, parsed

MUTATORS = {"pop", "setdefault", "update", "clear", "append", "extend", "remove", "insert", "popitem"}


def writes(tree: ast.AST) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
            target = ast.unparse(node.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            target = ast.unparse(node.func.value)
        else:
            continue
        if target == "state.doc" or target.startswith(("state.doc[", "state.doc.")):
            out.append(f"{node.lineno}: {ast.unparse(node)[:60]}")
    return out


def test_only_the_state_module_writes_state_json():
    found = {name: w for name, path in modules(REPO).items()
             if name != "hetinfra.deploy.state" and (w := writes(parsed(path)))}
    assert not found, f"write state.json through hetinfra.deploy.state.DeployState's methods: {found}"


def test_a_planted_write_is_found():
    assert writes(ast.parse("state.doc['live'] = {}\nstate.doc['pulumi'].pop('aws')\nx = state.doc['a']")) == [
        "1: state.doc['live']", "2: state.doc['pulumi'].pop('aws')"]
