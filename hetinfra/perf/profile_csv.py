"""Profile CSV rows out: the number format of its cells and messages, rendering, and the atomic write
that merges with an existing file (hetinfra.perf.bench_import turns benchmark results into the rows;
hetinfra.perf.profiles reads the file back)."""

from __future__ import annotations

import csv
import io
import math
from contextlib import nullcontext
from collections.abc import Iterable
from pathlib import Path

from hetinfra.errors import InvalidInputError
from hetinfra.perf.profiles import COLUMNS, OPTIONAL_COLUMNS, ProfileRow, cell_key

__all__ = ["check_out", "format_number", "render_profile_csv", "write_profile_csv"]


def format_number(v: float) -> str:
    """Numbers for CSV cells and messages: 4.0 -> '4', 14/3 -> '4.667'."""
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    s = f"{round(float(v), 3):.3f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def render_profile_csv(rows: Iterable[ProfileRow]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS + OPTIONAL_COLUMNS)
    for r in rows:
        w.writerow([r.model, r.gpu, r.tp, r.pp, r.input_tokens, r.output_tokens,
                    format_number(r.ttft_slo_ms), format_number(r.tpot_slo_ms), format_number(r.max_rps),
                    r.statistic or "", r.vllm_version or ""])
    return buf.getvalue()


def is_profile_header(line: str) -> bool:
    """Whether ``line`` (a file's first) names every column a profile CSV needs: the file is one."""
    return set(COLUMNS) <= {cell.strip() for cell in line.split(",")}


def check_out(path: Path | str) -> None:
    """InvalidInputError where ``path`` (``--out``) holds another file than a profile CSV: a result JSON
    given as both an input and --out of `profile-import` was replaced by the CSV. Checked before
    anything is measured or read, and again where the file is written."""
    from hetinfra.foreign import refuse_foreign

    refuse_foreign(path, "--out", is_profile_header, hint="give the profile CSV a path of its own (profile.csv)")


def write_profile_csv(rows: Iterable[ProfileRow], path: Path | str, *, merge: bool = False) -> list[ProfileRow]:
    """Write ``rows`` as a profile CSV, atomically (temporary file renamed into place).

    ``merge``: keep the rows of an existing file at ``path`` that no new row replaces (same model,
    gpu, tp, pp, sizes and SLO); new rows follow them. Returns the rows written. ``max_rps`` is
    written to 3 decimals.
    """
    from hetinfra.fileio import atomic_write_text, written_through
    from hetinfra.outdir import folder_turn

    path = Path(path)
    rows = list(rows)
    if path.exists() and path.is_dir():
        raise InvalidInputError(f"--out {path} is a directory", hint="give a file name such as profile.csv")
    _loads_back(rows)
    check_out(path)
    # read and written in one turn of its folder: merges into one file at once each keep the others' rows
    with folder_turn(written_through(path).parent) if merge else nullcontext():
        rows = _merged(rows, path) if merge else rows
        atomic_write_text(path, render_profile_csv(rows), through_links=True)  # --out names it
    return rows


def _merged(rows: list[ProfileRow], path: Path) -> list[ProfileRow]:
    """The rows of the file at ``path`` (if any) that no row of ``rows`` replaces (same model, GPU, layout,
    sizes and SLOs), then ``rows``."""
    from hetinfra.perf.profiles import load_profiles

    if not path.exists():
        return rows
    new = {cell_key(r) for r in rows}  # the cell a row measures: a new row replaces an old one of it
    return [r for r in load_profiles(path) if cell_key(r) not in new] + rows


def _loads_back(rows: list[ProfileRow]) -> None:
    """Refuse (exit 2, nothing written) rows that the profile reader would refuse, naming the row's source:
    the reader's rules are the one statement of a valid row (hetinfra.perf.profiles), so no writer
    (profile-import, the profile harness) states them again or writes a file `plan` cannot load
    (a request_rate of 1e300 was written as a 308-digit max_rps, --ttft-ms 1e-320 as 0, --tp 100000)."""
    from hetinfra.perf.profiles import check_names, parse_profiles_csv

    for row in rows:  # one at a time, so the refusal names the row's own source
        try:  # the names first: a carriage return in one would split the rendered row before it is read
            check_names(row.model, row.gpu, ": column 'model'", ": column 'gpu'")
            parse_profiles_csv(render_profile_csv([row]), "")
        except InvalidInputError as exc:
            why = exc.message.partition(": ")[2]
            raise InvalidInputError(f"{row.origin}: makes a profile row that `plan` would refuse: {why}",
                                    hint="check the result file and the flags (--model, --gpu, --tp, --ttft-ms, "
                                         "--tpot-ms); nothing was written") from None
