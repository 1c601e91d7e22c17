"""The spec loader's limits: alias bombs, recursive aliases, duplicate keys, sizes, strict and finite
numbers, and the strings that reach a shell or a resource name. Each is refused with exit 2 and a
located message (fast: the limits are checked before anything is built)."""

from __future__ import annotations

import copy

import pytest
import yaml

from hetinfra.errors import InvalidInputError
from hetinfra.spec.load import parse_spec_text

GOOD = {
    "name": "chat",
    "models": [{"name": "chat-8b", "model": "llama-3.1-8b", "source": "meta-llama/Llama-3.1-8B-Instruct",
                "slo": {"ttft_ms": 2000, "tpot_ms": 120},
                "demand": {"rate_rps": 4, "sizes": {"classes": [
                    {"name": "short", "input_tokens": 200, "output_tokens": 100, "share": 1}]}}}],
    "infrastructure": {"clouds": ["aws"], "gpus": ["L4"]},
}


def _with(path: str, value) -> str:
    doc = copy.deepcopy(GOOD)
    cur = doc
    parts = path.split(".")
    for p in parts[:-1]:
        cur = cur[int(p)] if p.isdigit() else cur.setdefault(p, {})
    cur[parts[-1]] = value
    return yaml.safe_dump(doc, sort_keys=False)


def refused(text: str, fragment: str) -> str:
    with pytest.raises(InvalidInputError) as info:
        parse_spec_text(text, "s.yaml")
    assert fragment in str(info.value), str(info.value)
    assert len(str(info.value).splitlines()) <= 4
    return str(info.value)


def test_an_alias_bomb_is_refused_before_it_expands():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(8))
    refused(bomb, "expands to more than")


def test_a_recursive_alias_is_refused():
    refused("name: &n [*n]\n", "YAML")


def test_duplicate_keys_are_refused_with_both_lines():
    text = yaml.safe_dump(GOOD, sort_keys=False) + "infrastructure:\n  clouds: [gcp]\n"
    msg = refused(text, "duplicate key 'infrastructure'")
    assert "first at line" in msg


def test_yaml_merge_keys_still_work():
    text = ("x-slo: &slo {ttft_ms: 2000, tpot_ms: 120}\n" + yaml.safe_dump(GOOD, sort_keys=False)).replace(
        "slo:\n      ttft_ms: 2000\n      tpot_ms: 120", "slo:\n      <<: *slo")
    with pytest.raises(InvalidInputError, match="x-slo"):  # unknown top-level key, not a YAML error
        parse_spec_text(text, "s.yaml")


@pytest.mark.parametrize("path,value,fragment", [
    ("infrastructure.regions", [f"r{i}" for i in range(2000)], "at most 1000"),
    ("models.0.demand.sizes", {"histogram": {"input_edges": list(range(101)), "output_edges": list(range(101)),
                                             "weights": [[1] * 100] * 100}}, "at most 65"),
    ("infrastructure.availability", [{"cloud": "aws", "region": "us-east-1", "gpu": "L4", "max_gpus": 1_000_000}],
     "less than or equal to 100000"),
    ("models.0.demand.rate_rps", True, "valid number"),
    ("models.0.demand.rate_rps", float("nan"), "finite"),
    ("models.0.demand.rate_rps", float("inf"), "finite"),
    ("models.0.demand.rate_rps", 1e-300, "greater than or equal to 0.001"),
    ("models.0.slo.ttft_ms", "1e999ms", "finite"),
    ("models.0.source", "x; rm -rf /", "reaches generated scripts"),
    ("models.0.source", "--trust-remote-code", "start with '-'"),
    ("models.0.source", "a\nb", "printable"),
    ("infrastructure.gpus", ["L4 && id"], "names cloud resources"),
    ("deploy.gateway.package", "hetinfra`id`", "reaches generated scripts"),
    ("deploy.vllm_version", "0.11.0\n", "must look like"),
    ("name", "chat\n", "lowercase"),
])
def test_limits_types_and_strings(path, value, fragment):
    refused(_with(path, value), fragment)


def test_a_huge_spec_is_refused_by_its_size():
    text = yaml.safe_dump(GOOD) + "#" + "x" * (1 << 20)
    refused(text, "more than the")


def test_negative_dataset_rows_are_refused(tmp_path):
    from hetinfra.spec.demand import dataset_rows
    from hetinfra.spec.models import DatasetSizes

    (tmp_path / "sizes.csv").write_text("input_tokens,output_tokens\n120,80\n-5,80\n")
    ds = DatasetSizes(path="sizes.csv", input_edges=[0, 100, 1000], output_edges=[0, 100, 1000])
    with pytest.raises(InvalidInputError, match=r"sizes.csv:3: column 'input_tokens' must be a whole number"):
        dataset_rows(ds, tmp_path)


def test_an_offer_of_a_million_gpus_is_refused():
    from hetinfra.price_feeds.offers import parse_offers_csv

    head = "cloud,region,instance_type,gpu,gpu_count,gpu_memory_gb,vcpus,memory_gb,price_per_hour,spot_price_per_hour\n"
    with pytest.raises(InvalidInputError, match=r"o.csv:2: column 'gpu_count' must be a whole number in \[1, 64\]"):
        parse_offers_csv(head + "lab,r1,n1,L4,1000000,24,4,16,1.0,\n", name="o.csv")
    with pytest.raises(InvalidInputError, match="'price_per_hour'"):
        parse_offers_csv(head + "lab,r1,n1,L4,1,24,4,16,nan,\n", name="o.csv")
