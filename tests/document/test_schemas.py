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
