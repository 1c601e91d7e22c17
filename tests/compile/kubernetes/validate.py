"""Offline validation of generated manifests: built-in kinds with kubernetes-validate (Kubernetes
KUBE_VERSION's schemas, strict), CRDs against their vendored openAPIV3Schema (SOURCES.md), with
unknown fields rejected as the strict built-in check does."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import jsonschema
import kubernetes_validate
import kubernetes_validate.utils

# kubernetes_validate.validate reads the kind's schema and its version's 2 MB _definitions.json from
# disk on every call (~20 ms, hundreds of calls a run): read each file once per process. The
# validation is the library's own; it only reads the schemas.
kubernetes_validate.utils.schema_contents = cache(kubernetes_validate.utils.schema_contents)

CRDS = Path(__file__).with_name("crds")
KUBE_VERSION = "1.33.0"
#: kinds with no published CRD schema (GKE installs ComputeClass itself)
UNPUBLISHED = {("cloud.google.com/v1", "ComputeClass")}


def _strict(schema: dict) -> dict:
    """Reject unknown fields wherever the schema lists its properties (what the API server prunes)."""
    if isinstance(schema, dict):
        schema = {k: _strict(v) for k, v in schema.items()}
        if "properties" in schema and "additionalProperties" not in schema \
                and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema["additionalProperties"] = False
        if schema.get("x-kubernetes-int-or-string"):
            schema.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    elif isinstance(schema, list):
        return [_strict(s) for s in schema]
    return schema


@cache
def crd_schemas() -> dict[tuple[str, str], jsonschema.protocols.Validator]:
    out = {}
    for path in sorted(CRDS.glob("*.json")):
        doc = json.loads(path.read_text())
        schema = _strict(doc["openAPIV3Schema"])
        schema["properties"]["metadata"] = {"type": "object"}  # the API server checks metadata itself
        out[(doc["apiVersion"], doc["kind"])] = jsonschema.Draft7Validator(schema)
    return out


def validate(obj: dict) -> None:
    """Raise AssertionError naming the object and the first problem."""
    key = (obj.get("apiVersion"), obj.get("kind"))
    where = f"{key[1]} {obj.get('metadata', {}).get('name')}"
    if key in UNPUBLISHED:
        return
    schemas = crd_schemas()
    if key in schemas:
        errors = sorted(schemas[key].iter_errors(obj), key=lambda e: list(e.path))
        assert not errors, f"{where}: {errors[0].message} at {'/'.join(map(str, errors[0].path))}"
        return
    try:
        kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        raise AssertionError(f"{where}: {exc.message} at {'/'.join(map(str, exc.path))}") from None
