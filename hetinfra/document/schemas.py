"""The JSON Schemas hetinfra publishes, each generated from its model: the service spec, plan.json
and state.json. ``hetinfra schema [spec|plan|state]`` prints them; docs/*.schema.json are these,
committed (tests/document/test_schemas.py fails when one is stale)."""

from __future__ import annotations

#: document -> (its model's import path, the committed file under docs/)
DOCUMENTS = {
    "spec": ("hetinfra.spec.models:ServiceSpec", "service.schema.json"),
    "plan": ("hetinfra.document.plan:Plan", "plan.schema.json"),
    "state": ("hetinfra.document.state:State", "state.schema.json"),
}


def json_schema(document: str) -> dict:
    """The JSON Schema of ``document`` (a key of :data:`DOCUMENTS`), in validation mode: what a
    file must be to be read."""
    import importlib

    module, name = DOCUMENTS[document][0].split(":")
    return getattr(importlib.import_module(module), name).model_json_schema(by_alias=True)
