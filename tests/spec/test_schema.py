"""The committed JSON Schema (docs/service.schema.json) is what `hetinfra schema` prints."""

from __future__ import annotations

import json
from pathlib import Path

from hetinfra.spec.models import ServiceSpec

REPO = Path(__file__).resolve().parents[2]


def test_committed_schema_is_current():
    committed = json.loads((REPO / "docs" / "service.schema.json").read_text())
    assert committed == ServiceSpec.model_json_schema(), "run: hetinfra schema > docs/service.schema.json"


def test_every_field_is_described():
    schema = ServiceSpec.model_json_schema()
    for name, model in schema["$defs"].items():
        for field, prop in model.get("properties", {}).items():
            assert prop.get("description"), f"{name}.{field} has no description"
    for field, prop in schema["properties"].items():
        assert prop.get("description"), f"ServiceSpec.{field} has no description"


def test_example_services_validate():
    import yaml

    for path in (REPO / "services").glob("*.yaml"):
        ServiceSpec.model_validate(yaml.safe_load(path.read_text()))
