"""Turn a model's demand spec into request classes with rates.

A histogram bucket (or dataset bucket) becomes one class planned at its UPPER edges, the
conservative size: a request of 180 input tokens in bucket (100, 250] is planned as 250.
Bucket k holds sizes in (edge[k], edge[k+1]]; the first bucket also holds size edge[0].
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path

from hetinfra.errors import InvalidInputError
from hetinfra.csvtext import number_cell
from hetinfra.fileio import read_text
from hetinfra.csvtext import check_width, csv_lines, looks_like_header
from hetinfra.spec.models import DatasetSizes, HistogramSizes, ModelSpec


@dataclass(frozen=True)
class RequestClass:
    """A class of requests of one model, planned at (input_tokens, output_tokens)."""

    name: str
    input_tokens: int
    output_tokens: int
    share: float  # of the model's requests, shares sum to 1
    rate_rps: float  # share * model rate


#: the largest token count a dataset row may give (a negative or astronomic row is a broken export)
MAX_DATASET_TOKENS = 10_000_000

#: The demand log's leading columns (a contract: the gateway writes them, `hetinfra replan
#: --demand-log/--demand-from` reads them; writers may add columns after these)
DEMAND_LOG_COLUMNS = ("timestamp", "model", "input_tokens", "output_tokens", "region")
#: the most bytes of demand log one read takes (all rotations together): the gateway rotates long before
MAX_LOG_BYTES = 1 << 30


def bucket_name(input_hi: int, output_hi: int) -> str:
    return f"in<={input_hi},out<={output_hi}"


def _histogram_classes(weights: list[list[float]], in_edges: list[int], out_edges: list[int]) -> list[tuple[str, int, int, float]]:
    total = sum(map(sum, weights))
    out = []
    for i, row in enumerate(weights):
        for j, w in enumerate(row):
            if w > 0:
                out.append((bucket_name(in_edges[i + 1], out_edges[j + 1]), in_edges[i + 1], out_edges[j + 1], w / total))
    return out


def bucket_index(size: int, edges: list[int]) -> int | None:
    """Index k of the bucket (edge[k], edge[k+1]] holding ``size`` (the first bucket holds its lower edge too:
    a 0-token output under edges from 0); None outside the edges, below the first or above the last. A size
    below the first edge was counted in the first bucket: with ``outside: drop`` a dataset whose edges start
    at 1000 planned its 10-token rows as 2000-token requests, a mix the user had said to leave out."""
    if size < edges[0]:
        return None
    k = bisect.bisect_left(edges, size, lo=1) - 1  # first upper edge >= size
    return k if k < len(edges) - 1 else None


def clipped(size: int, edges: list[int]) -> int:
    """``size`` brought inside the edges (``outside: clip``): up to the first edge, down to the last."""
    return min(max(size, edges[0]), edges[-1])


def dataset_rows(ds: DatasetSizes, base: Path) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """The CSV's (input_tokens, output_tokens) rows by bucket (input index, output index): rows outside the
    edges (below the first, beyond the last) are dropped or clipped (``outside``); a header line and blank
    lines are skipped."""
    from hetinfra.spec.files import spec_file  # the one resolver of a spec's file fields

    path = spec_file("dataset.path", ds.path, base)
    rows: dict[tuple[int, int], list[tuple[int, int]]] = {}
    text = read_text(path, "dataset file", hint="dataset.path is relative to the spec file")
    columns = ["input_tokens", "output_tokens"]  # the columns read; a header may name more
    for lineno, row in csv_lines(text, str(path)):
        if lineno == 1 and looks_like_header(row):
            columns = [c.strip() for c in row] if len(row) > 2 else columns
            continue  # a header (a first row of numbers, 512.0 or 1e3, is data)
        if not row:
            continue  # blank line
        if len(row) < 2:
            raise InvalidInputError(f"{path}:{lineno}: expected 'input_tokens,output_tokens', got {','.join(row)[:60]!r}")
        check_width(row, columns, str(path), lineno)  # '1,024,300' is not (1, 24)
        i, o = (_tokens(row[k], f"{path}:{lineno}", col) for k, col in ((0, "input_tokens"), (1, "output_tokens")))
        if ds.outside == "clip":
            i, o = clipped(i, ds.input_edges), clipped(o, ds.output_edges)
        bi, bo = bucket_index(i, ds.input_edges), bucket_index(o, ds.output_edges)
        if bi is not None and bo is not None:
            rows.setdefault((bi, bo), []).append((i, o))
    return rows


def _tokens(raw: str, where: str, column: str) -> int:
    """A dataset cell: a whole token count in [0, MAX_DATASET_TOKENS] (a negative row is refused)."""
    value = number_cell(raw, where=where, column=column, lo=0, hi=MAX_DATASET_TOKENS, whole=True)
    if value is None:
        raise InvalidInputError(f"{where}: column '{column}' is empty", hint="each row is input_tokens,output_tokens")
    return int(value)


def histogram_from_dataset(ds: DatasetSizes, base: Path) -> list[list[float]]:
    """Count CSV rows into the dataset's buckets (rows beyond the last edge dropped or clipped)."""
    counts = [[0.0] * (len(ds.output_edges) - 1) for _ in range(len(ds.input_edges) - 1)]
    for (bi, bo), rows in dataset_rows(ds, base).items():
        counts[bi][bo] = float(len(rows))
    if sum(map(sum, counts)) == 0:
        from hetinfra.spec.files import spec_file

        path = spec_file("dataset.path", ds.path, base)
        raise InvalidInputError(f"{path}: no request falls inside the dataset's edges",
                                hint="widen input_edges/output_edges or use outside: clip")
    return counts


def request_classes(model: ModelSpec, base: Path) -> list[RequestClass]:
    """The classes of one model with their rates (req/s)."""
    sizes = model.demand.sizes
    if sizes.histogram is not None:
        h: HistogramSizes = sizes.histogram
        raw = _histogram_classes(h.weights, h.input_edges, h.output_edges)
    elif sizes.dataset is not None:
        d = sizes.dataset
        raw = _histogram_classes(histogram_from_dataset(d, base), d.input_edges, d.output_edges)
    else:
        total = sum(c.share for c in sizes.classes)
        raw = [(c.name, c.input_tokens, c.output_tokens, c.share / total) for c in sizes.classes]
    rate = model.demand.rate_rps
    return [RequestClass(n, i, o, s, rate * s) for n, i, o, s in raw]
