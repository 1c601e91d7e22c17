"""Request classes from histograms, datasets and explicit classes."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def _edges():
    """Strictly increasing edges from any first edge (0 or above), 2 to 6 of them."""
    return st.lists(st.integers(0, 5000), min_size=2, max_size=6, unique=True).map(sorted)


def _reference(size: int, edges: list[int], outside: str) -> int | None:
    """The bucket a size belongs to, as the spec's docs say: (edge[k], edge[k+1]], the first bucket holding its
    lower edge too; outside the edges dropped, or clipped to the nearer one."""
    if outside == "clip":
        size = min(max(size, edges[0]), edges[-1])
    if not edges[0] <= size <= edges[-1]:
        return None
    return next(k for k in range(len(edges) - 1) if size <= edges[k + 1])


@settings(max_examples=80, deadline=None)
@given(_edges(), _edges(), st.lists(st.tuples(st.integers(0, 6000), st.integers(0, 6000)), min_size=1, max_size=30),
       st.sampled_from(["drop", "clip"]))
def test_property_a_dataset_row_below_the_first_edge_is_outside_its_edges(tmp_path_factory, ins, outs, rows, outside):
    """A dataset row below the first edge is outside the edges, as one beyond the last: ``outside: drop`` drops it,
    ``clip`` counts it in the first bucket. It was counted in the first bucket under ``drop`` too (edges from 1000:
    10-token rows planned as requests of the first bucket's size). The demand log's vectorized reading of the
    same edges (replan's size mix) buckets every size the same way."""
    import numpy as np

    from hetinfra.errors import InvalidInputError
    from hetinfra.replan.demand_log import _bucket
    from hetinfra.spec.demand import histogram_from_dataset
    from hetinfra.spec.models import DatasetSizes

    d = tmp_path_factory.mktemp("ds")
    (d / "d.csv").write_text("".join(f"{i},{o}\n" for i, o in rows))
    ds = DatasetSizes(path="d.csv", input_edges=ins, output_edges=outs, outside=outside)
    want = [[0.0] * (len(outs) - 1) for _ in range(len(ins) - 1)]
    for i, o in rows:
        bi, bo = _reference(i, ins, outside), _reference(o, outs, outside)
        if bi is not None and bo is not None:
            want[bi][bo] += 1
    if not sum(map(sum, want)):
        with pytest.raises(InvalidInputError, match="no request falls inside"):
            histogram_from_dataset(ds, d)
    else:
        assert histogram_from_dataset(ds, d) == want
    sizes = np.array([i for i, _ in rows])
    assert _bucket(sizes, ins).tolist() == [-1 if (k := bucket_index(int(s), ins)) is None else k for s in sizes]
