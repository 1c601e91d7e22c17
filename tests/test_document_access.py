"""plan.json and state.json are read through their models (hetinfra.document), not by string key.

What the check flags, precisely: in a module of the installed package (the folders pyproject maps
into ``hetinfra``) other than the document's own modules and the writers (:data:`OWNERS`), every

- subscript read ``x["key"]`` (a load: writes such as ``doc["key"] = ...`` are the writers' business), and
- call ``x.get("key", ...)``

whose constant string key is a **document key**: a field name of the Plan or State model tree that
no ServiceSpec model uses and that is not a common word other JSON formats use as well
(:data:`COMMON`). ``x`` can be anything: a dict read from plan.json, state.json or one of their
sections looks like any other dict to the AST.

Readers that still index the plan's dict are counted in :data:`REMAINING` (module -> reads today); a
module may only go down. A new module that reads a document key, or a module that reads more than its
count, fails; a test plants such a read to show it.
"""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from tests.test_imports import REPO, modules, package_roots, tree_copy  # noqa: F401 (tree_copy: a fixture)

#: the document's own modules and the modules that write plan.json / state.json
OWNERS = {"hetinfra.document", "hetinfra.plan.plan_json", "hetinfra.plan.purchase", "hetinfra.plan.failover",
          "hetinfra.plan.verify", "hetinfra.deploy.state"}
#: document keys that are also everyday words in other JSON hetinfra handles (Pulumi, SkyPilot, the
#: simulator's reports, HTTP bodies): not flagged, or every unrelated dict would be
COMMON = {"id", "kind", "status", "count", "error", "rows", "level", "best", "bound", "gap", "met", "nodes", "tp",
          "pp", "reason", "running", "started", "stopped", "steps", "outputs", "endpoint", "dir", "hits", "misses",
          "from", "engine", "estimator", "method", "variables", "constraints", "iterations", "as_of", "sha256",
          "service", "unit", "template", "instances", "instance_type", "confidence", "variant", "sources",
          "purchase", "utilization", "rps", "derate", "periods", "levels", "terms", "feasible", "chosen", "served",
          "live", "images", "pulumi", "skypilot", "warnings", "placement", "stages", "slug", "solver", "allocation",
          "multipliers", "max_model_len", "cost_usd_per_hour", "experimental", "resumed", "updated_at",
          "started_at", "finished_at", "safety_stop", "blocks", "by_model", "by_region", "gpu", "gpus", "layers",
          "spec_path", "endpoints", "models", "routing", "deploy", "classes", "name", "share", "rate_rps", "objects",
          "context", "namespace", "kubeconfig", "kubernetes"}
#: module -> document-key reads it still makes (to migrate to the models; may only go down)
REMAINING: dict[str, int] = {
    "hetinfra.cli.profile": 1,
    "hetinfra.cli.profile_launch": 10,
    "hetinfra.compile.artifacts": 13,
    "hetinfra.compile.checkpoint": 1,
    "hetinfra.compile.network": 2,
    "hetinfra.compile.pulumi_project": 4,
    "hetinfra.compile.router": 8,
    "hetinfra.compile.skypilot_gateway": 1,
    "hetinfra.deploy.apply": 21,
    "hetinfra.deploy.destroy": 6,
    "hetinfra.deploy.drift": 5,
    "hetinfra.deploy.health": 4,
    "hetinfra.deploy.images": 1,
    "hetinfra.deploy.kube": 5,
    "hetinfra.deploy.preflight": 13,
    "hetinfra.deploy.preview": 6,
    "hetinfra.gateway.origins": 5,
    "hetinfra.gateway.table": 4,
    "hetinfra.plan.origins_json": 1,
    "hetinfra.plan.pending": 3,
    "hetinfra.plan.summary": 62,
    "hetinfra.plan.template_cache": 1,
    "hetinfra.price_feeds.offers": 2,
    "hetinfra.price_feeds.validate": 2,
    "hetinfra.replan.diff": 3,
    "hetinfra.replan.run": 5,
    "hetinfra.replan.safe": 5,
    "hetinfra.sim.compare": 4,
    "hetinfra.sim.engines": 5,
    "hetinfra.sim.minimal": 4,
    "hetinfra.sim.network": 2,
    "hetinfra.sim.plan_sim": 14,
    "hetinfra.stacks.fleet": 2,
    "hetinfra.stacks.global_entry": 1,
}


def _model_names(model: type[BaseModel], seen: set) -> set[str]:
    out: set[str] = set()
    if model in seen:
        return out
    seen.add(model)
    for name, f in model.model_fields.items():
        out.add(f.alias or name)
        todo = [f.annotation]
        while todo:
            t = todo.pop()
            if isinstance(t, type) and issubclass(t, BaseModel):
                out |= _model_names(t, seen)
            else:
                todo.extend(typing.get_args(t))
    return out


def document_keys() -> set[str]:
    from hetinfra.document import Plan
    from hetinfra.document.state import State
    from hetinfra.spec.models import ServiceSpec

    spec = _model_names(ServiceSpec, set())
    return (_model_names(Plan, set()) | _model_names(State, set())) - spec - COMMON


def _owned(module: str) -> bool:
    return any(module == o or module.startswith(o + ".") for o in OWNERS)


def key_reads(repo: Path, keys: set[str]) -> dict[str, list[str]]:
    """module -> ``line: key`` of every flagged read (see the module docstring)."""
    out: dict[str, list[str]] = {}
    for name, path in modules(repo).items():
        if _owned(name):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            key = None
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
                key = node.slice.value if isinstance(node.slice, ast.Constant) else None
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                    and node.args and isinstance(node.args[0], ast.Constant):
                key = node.args[0].value
            if isinstance(key, str) and key in keys:
                out.setdefault(name, []).append(f"{node.lineno}: {key}")
    return out


def problems(repo: Path) -> list[str]:
    found = key_reads(repo, document_keys())
    return [f"{m} reads plan.json/state.json by key {len(reads)} time(s) (allowed {REMAINING.get(m, 0)}): "
            f"{', '.join(reads[:6])}; read the model (hetinfra.document) instead"
            for m, reads in sorted(found.items()) if len(reads) > REMAINING.get(m, 0)]


def test_no_module_reads_the_documents_by_key_beyond_its_count():
    assert problems(REPO) == []


def test_the_flagged_keys_are_the_documents_own():
    keys = document_keys()
    assert {"deployment_unit", "skypilot_task", "nodes_per_replica", "plan_version", "state_version"} <= keys
    assert not keys & {"name", "port", "count", "status"}  # spec keys and everyday words are not flagged


def test_a_planted_key_read_fails(tree_copy):
    target = tree_copy / "hetinfra" / "gateway" / "balancer.py"
    target.write_text(target.read_text() + "\n\ndef _planted(plan):\n"
                      "    return [a['deployment_unit'] for a in plan.get('allocations', [])]\n")
    found = problems(tree_copy)
    assert any(p.startswith("hetinfra.gateway.balancer reads plan.json/state.json by key") and "deployment_unit" in p
               for p in found), found
    # the document's own modules may
    own = tree_copy / "hetinfra" / "document" / "plan.py"
    own.write_text(own.read_text() + "\n\ndef _planted(plan):\n    return plan['deployment_unit']\n")
    assert not any(p.startswith("hetinfra.document") for p in problems(tree_copy))
