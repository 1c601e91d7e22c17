"""Schema = loader: the published JSON Schema (docs/service.schema.json) accepts every example and
every spec snippet of the docs, and every spec the loader accepts (hypothesis-generated), so an
editor never flags a valid file; what the schema refuses, the loader refuses too."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from hetinfra.errors import InvalidInputError
from hetinfra.spec.load import parse_spec_text
from tests.fuzz.conftest import budget

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "docs" / "service.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def doc_snippets() -> list[tuple[str, dict]]:
    """Full specs (a mapping with name and models) in the YAML code blocks of README.md and docs/*.md."""
    out = []
    for md in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        if not md.exists():
            continue
        for i, block in enumerate(re.findall(r"```ya?ml\n(.*?)```", md.read_text(), re.S)):
            try:
                doc = yaml.safe_load(block)
            except yaml.YAMLError:
                continue
            if isinstance(doc, dict) and "name" in doc and "models" in doc:
                out.append((f"{md.name}#{i}", doc))
    return out


EXAMPLES = [(p.name, yaml.safe_load(p.read_text())) for p in sorted((REPO / "services").glob("*.yaml"))]


@pytest.mark.parametrize("where,doc", EXAMPLES + doc_snippets(), ids=lambda x: x if isinstance(x, str) else "")
def test_examples_and_doc_snippets_validate_against_the_schema(where, doc):
    if where.endswith(".yaml"):
        parse_spec_text(yaml.safe_dump(doc), where)  # the examples are valid specs
    else:
        try:  # a docs snippet with elided parts ('...') is an illustration, not a spec
            parse_spec_text(yaml.safe_dump(doc), where)
        except InvalidInputError:
            pytest.skip(f"{where}: not a complete spec (the loader refuses it too)")
    errors = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in VALIDATOR.iter_errors(doc)]
    assert not errors, f"{where}: {errors[:3]}"


BASE = next(doc for name, doc in EXAMPLES if name == "chat.yaml")
DURATIONS = st.one_of(st.integers(1, 100_000), st.floats(0.5, 100_000),
                      st.builds(lambda n, u: f"{n}{u}", st.integers(1, 500), st.sampled_from(["ms", "s", " s", "min"])))


@st.composite
def valid_specs(draw):
    doc = copy.deepcopy(BASE)
    m = doc["models"][0]
    m["slo"]["ttft_ms"] = draw(DURATIONS)
    m["slo"]["tpot_ms"] = draw(st.one_of(st.integers(1, 1000), st.sampled_from(["80ms", "0.1s"])))
    m["demand"]["rate_rps"] = draw(st.one_of(st.integers(1, 1000), st.floats(0.001, 1e6)))
    m["max_spot_fraction"] = draw(st.floats(0, 1))
    doc["planning"] = {"headroom": draw(st.floats(0, 0.99)), "verify": {"load": draw(st.floats(0.1, 10))},
                       "time_limit_s": draw(st.integers(1, 3600))}
    if draw(st.booleans()):
        doc["budget_usd_per_hour"] = draw(st.floats(0.01, 1e6))
    if draw(st.booleans()):
        m["architecture"] = {"layers": 32, "hidden_size": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128,
                             "params": draw(st.sampled_from(["8B", "8.03e9", 8_030_000_000, "70b"]))}
        m.pop("model", None)
    return doc


@budget(60)
@given(valid_specs())
def test_every_spec_the_loader_accepts_the_schema_accepts(doc):
    text = yaml.safe_dump(doc, sort_keys=False)
    try:
        parse_spec_text(text, "generated.yaml")
    except InvalidInputError:
        return  # not valid after all (a cross-field rule): the schema may say either
    errors = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in VALIDATOR.iter_errors(yaml.safe_load(text))]
    assert not errors, errors[:3]


@budget(40)
@given(path=st.sampled_from([("models", 0, "demand", "rate_rps"), ("models", 0, "slo", "ttft_ms"),
                             ("planning", "headroom"), ("name",), ("infrastructure", "spot")]),
       value=st.one_of(st.booleans(), st.text(max_size=5), st.just(-1), st.just([1]), st.none()))
def test_what_the_schema_refuses_the_loader_refuses(path, value):
    doc = copy.deepcopy(BASE)
    cur = doc
    for k in path[:-1]:
        cur = cur.setdefault(k, {}) if isinstance(k, str) else cur[k]
    cur[path[-1]] = value
    if not list(VALIDATOR.iter_errors(doc)):
        return
    with pytest.raises(InvalidInputError):
        parse_spec_text(yaml.safe_dump(doc), "generated.yaml")
