"""The committed schemas (docs/*.schema.json) are what `hetinfra schema [spec|plan|state]` prints,
which is generated from the models: a stale file fails here with the command that regenerates it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hetinfra.cli import cli
from hetinfra.document.schemas import DOCUMENTS, json_schema

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("document", sorted(DOCUMENTS))
def test_committed_schema_is_current(document):
    committed = json.loads((REPO / "docs" / DOCUMENTS[document][1]).read_text())
    assert committed == json_schema(document), \
        f"run: hetinfra schema {document} > docs/{DOCUMENTS[document][1]}"


def test_schema_without_argument_prints_the_spec_schema():
    plain, spec = (CliRunner().invoke(cli, args) for args in (["schema"], ["schema", "spec"]))
    assert plain.exit_code == spec.exit_code == 0 and plain.stdout == spec.stdout
    assert json.loads(plain.stdout)["title"] == "ServiceSpec"


@pytest.mark.parametrize("document", ["plan", "state"])
def test_every_field_is_described(document):
    schema = json_schema(document)

    def walk(sub: dict, where: str):
        for name, prop in (sub.get("properties") or {}).items():
            ref = prop.get("$ref", "").rpartition("/")[2]  # pydantic leaves out a field's text equal to its class's
            assert prop.get("description") or schema["$defs"].get(ref, {}).get("description"), \
                f"{where}.{name} has no description"

    walk(schema, document)
    for name, sub in schema["$defs"].items():
        walk(sub, name)


def _bounds_checked(model) -> dict[tuple[str, str], dict]:
    """Every (model, field) of the documents' models whose values are bounded (ge, le, gt, lt), with
    its bounds, walking the nested models."""
    import annotated_types
    from pydantic import BaseModel

    names = {annotated_types.Ge: ("ge", "minimum"), annotated_types.Le: ("le", "maximum"),
             annotated_types.Gt: ("gt", "exclusiveMinimum"), annotated_types.Lt: ("lt", "exclusiveMaximum"),
             annotated_types.MinLen: ("min_length", "minItems"), annotated_types.MaxLen: ("max_length", "maxItems")}
    out, seen, todo = {}, set(), [model]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        for name, field in m.model_fields.items():
            bounds = {names[type(c)][1]: getattr(c, names[type(c)][0]) for c in field.metadata if type(c) in names}
            if bounds:
                out[(m.__name__, field.alias or name)] = bounds
            todo += [t for t in _models_in(field.annotation) if issubclass(t, BaseModel)]
    return out


def _models_in(annotation) -> list:
    import typing

    args = typing.get_args(annotation)
    return [annotation] if isinstance(annotation, type) else [t for a in args for t in _models_in(a)]


@pytest.mark.parametrize("document", sorted(DOCUMENTS))
def test_every_bound_a_document_checks_is_in_its_schema(document):
    """A bound on a field of plan.json or state.json (a share in [0, 1], a rate >= 0, a count's maximum, a
    list's least length) is in the generated JSON Schema too: a bound given on a Number field itself was checked but dropped from the schema
    (Number's own schema replaced it), so a schema-driven editor or validator let a routing share of
    7.0 through that `hetinfra` refuses."""
    import importlib

    module, name = DOCUMENTS[document][0].split(":")
    schema = json_schema(document)
    defs = {**schema.get("$defs", {}), schema["title"]: schema}
    checked = _bounds_checked(getattr(importlib.import_module(module), name))
    assert ("RouteShare", "share") in checked or document != "plan"
    for (model, field), bounds in checked.items():
        prop = defs[model]["properties"][field]
        branches = [prop] + prop.get("anyOf", [])
        # a length: a list's items, a mapping's properties or a string's characters
        same = {"minItems": ("minItems", "minProperties", "minLength"),
                "maxItems": ("maxItems", "maxProperties", "maxLength")}
        assert any(all(any(b.get(name) == v for name in same.get(k, (k,))) for k, v in bounds.items())
                   for b in branches), (model, field, bounds, prop)
