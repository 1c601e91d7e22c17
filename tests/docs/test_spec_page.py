"""docs/reference/spec.md names every key of the service spec (the schema the pydantic models give)."""

from __future__ import annotations

import re

from hetinfra.spec.models import ServiceSpec
from tests.docs.pages import REPO


def test_the_spec_page_names_every_key():
    schema = ServiceSpec.model_json_schema()
    keys = {("ServiceSpec", key) for key in schema["properties"]}
    keys |= {(model, key) for model, body in schema["$defs"].items() for key in body.get("properties", {})}
    page = (REPO / "docs" / "reference" / "spec.md").read_text()
    missing = sorted(f"{model}.{key}" for model, key in keys if not re.search(rf"\b{re.escape(key)}\b", page))
    assert not missing, f"docs/reference/spec.md does not mention: {missing}"
