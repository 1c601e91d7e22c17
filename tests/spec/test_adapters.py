"""Spec `adapters:`: the shape of an entry, and each bad entry a located exit 2 or 3 (issue 38, point 6)."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.errors import InfeasibleError, InvalidInputError
from hetinfra.spec.adapters import LORA_RANKS, MAX_LORA_RANK, adapters_of, slot_rank
from hetinfra.spec.load import parse_spec_located

BASE = """\
name: lora
models:
  - name: base-8b
    model: llama-3.1-8b
    source: meta-llama/Llama-3.1-8B-Instruct
    slo: {ttft_ms: 2000, tpot_ms: 100}
    demand:
      rate_rps: 10
      sizes: {classes: [{name: a, input_tokens: 500, output_tokens: 200, share: 1}]}
infrastructure: {clouds: [aws], regions: [us-east-1, us-west-2], gpus: [L4]}
adapters:
"""


def _parse(entries: str):
    return parse_spec_located(BASE + entries, "s.yaml")[0]


def test_adapters_parse_with_share_or_rate_and_default_rank():
    spec = _parse("  - {name: sql, base: base-8b, source: org/sql-lora, demand: {share: 0.3}}\n"
                  "  - {name: law, base: base-8b, source: org/law, rank: 64, demand: {rate_rps: 2}, regions: [us-east-1]}\n")
    sql, law = adapters_of(spec, "base-8b")
    assert (sql.rank, sql.demand.share, sql.regions) == (16, 0.3, None)
    assert (law.rank, law.demand.rate_rps, law.regions) == (64, 2.0, ["us-east-1"])


def test_a_spec_without_adapters_has_none():
    assert parse_spec_located(BASE.replace("adapters:\n", ""), "s.yaml")[0].adapters == []


@pytest.mark.parametrize("entry, error, line, words", [
    ("  - {name: sql, base: base-13b, source: org/x, demand: {share: 0.1}}\n", InvalidInputError, 12,
     "base 'base-13b' is not a model"),
    ("  - {name: sql, base: base-8b, source: org/x, demand: {share: 0.1}}\n"
     "  - {name: sql, base: base-8b, source: org/y, demand: {share: 0.1}}\n", InvalidInputError, 13, "already used"),
    # an origin's flow of class a for adapter 'a@us-west-2' would be class a~a@us-west-2's (another flow)
    ("  - {name: 'a@us-west-2', base: base-8b, source: org/x, demand: {share: 0.1}}\n", InvalidInputError, 12,
     "may not contain '@'"),
    ("  - {name: base-8b, base: base-8b, source: org/x, demand: {share: 0.1}}\n", InvalidInputError, 12, "a model"),
    ("  - {name: sql, base: base-8b, source: org/x, rank: 1024, demand: {share: 0.1}}\n", InvalidInputError, 12,
     "above 512"),
    ("  - {name: sql, base: base-8b, source: org/x, demand: {share: 0.1, rate_rps: 1}}\n", InvalidInputError, 12,
     "exactly one of share"),
    ("  - {name: a1, base: base-8b, source: org/x, demand: {share: 0.6}}\n"
     "  - {name: a2, base: base-8b, source: org/y, demand: {share: 0.6}}\n", InvalidInputError, 12, "summing to 1.2"),
    ("  - {name: sql, base: base-8b, source: org/x, demand: {share: 0.1}, regions: [eu-west-1]}\n", InfeasibleError,
     12, "no unit may hold it"),
])
def test_each_bad_adapter_is_a_located_error_with_its_exit_code(entry, error, line, words):
    with pytest.raises(error) as info:
        _parse(entry)
    msg = str(info.value)
    assert f"s.yaml:{line}:" in msg and words in msg, msg
    assert len(msg.splitlines()) <= 2 and info.value.exit_code == (3 if error is InfeasibleError else 2)


def test_bad_adapter_through_the_cli_exits_2_without_a_traceback(tmp_path, run_cli):
    (tmp_path / "s.yaml").write_text(BASE + "  - {name: sql, base: nope, source: org/x, demand: {share: 0.1}}\n")
    code, _, err = run_cli("plan", str(tmp_path / "s.yaml"), "--no-verify", "--no-baselines")
    assert code == 2 and "s.yaml:12:" in err and "Traceback" not in err


@settings(max_examples=60, deadline=None)
@given(st.integers(1, MAX_LORA_RANK))
def test_slot_rank_is_the_smallest_allowed_rank_holding_the_adapter(rank):
    r = slot_rank(rank)
    assert r in LORA_RANKS and r >= rank and all(x < rank for x in LORA_RANKS if x < r)


def test_the_spec_schema_documents_adapters():
    from hetinfra.spec.models import ServiceSpec
    schema = ServiceSpec.model_json_schema()
    assert "adapters" in schema["properties"] and "AdapterSpec" in yaml.safe_dump(schema)
