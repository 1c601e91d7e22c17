"""Request classes from histograms, datasets and explicit classes."""

from __future__ import annotations

import json

import pytest

from hetinfra.spec.demand import bucket_index, request_classes
from hetinfra.spec.models import ModelSpec
from tests.conftest import shared_path

EDGES = [0, 25, 100, 250, 500, 1000, 2000]


def _model(sizes: dict, rate: float = 10) -> ModelSpec:
    return ModelSpec.model_validate({"name": "m", "model": "llama-2-7b", "source": "x",
                                     "slo": {"ttft_ms": 1000, "tpot_ms": 100},
                                     "demand": {"rate_rps": rate, "sizes": sizes}})


@pytest.mark.parametrize("size,idx", [(0, 0), (1, 0), (25, 0), (26, 1), (100, 1), (2000, 5), (2001, None)])
def test_bucket_index_upper_edge_inclusive(size, idx):
    assert bucket_index(size, EDGES) == idx


def test_histogram_classes_planned_at_upper_edges(tmp_path):
    m = _model({"histogram": {"input_edges": [0, 100, 1000], "output_edges": [0, 50, 500],
                              "weights": [[1, 0], [2, 1]]}}, rate=8)
    got = [(c.name, c.input_tokens, c.output_tokens, c.rate_rps) for c in request_classes(m, tmp_path)]
    assert got == [("in<=100,out<=50", 100, 50, 2.0), ("in<=1000,out<=50", 1000, 50, 4.0),
                   ("in<=1000,out<=500", 1000, 500, 2.0)]


def test_explicit_classes_normalized(tmp_path):
    m = _model({"classes": [{"name": "a", "input_tokens": 10, "output_tokens": 5, "share": 3},
                            {"name": "b", "input_tokens": 20, "output_tokens": 5, "share": 1}]}, rate=4)
    assert [(c.name, c.share, c.rate_rps) for c in request_classes(m, tmp_path)] == [("a", 0.75, 3.0), ("b", 0.25, 1.0)]


@pytest.mark.parametrize("case,outside", [("V1", "drop"), ("V2", "clip")])
def test_dataset_reproduces_melange_workload(tmp_path, case, outside):
    """Bucketing the Arena lengths CSV gives the fixture's V1 (drop) and V2 (clip) distributions."""
    csv_path = shared_path("data", "melange-release", "arena_lmsys_chat_1m_token_lengths.csv")
    fixtures = json.loads(shared_path("data", "melange-release", "melange_regression_fixtures.json").read_text())
    m = _model({"dataset": {"path": str(csv_path), "input_edges": EDGES, "output_edges": EDGES, "outside": outside}})
    shares = {c.name: c.share for c in request_classes(m, tmp_path)}
    dist = fixtures["cases"][case]["workload_distribution"]
    for i in range(6):
        for j in range(6):
            assert shares.get(f"in<={EDGES[i + 1]},out<={EDGES[j + 1]}", 0.0) == pytest.approx(dist[i][j], rel=1e-9)
