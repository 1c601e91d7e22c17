"""Measure a profile against a running vLLM server with ``vllm bench serve``.

For each (input, output) cell of the grid, rates are run from lowest to highest, one
``vllm bench serve`` subprocess per rate, each saving its result JSON under ``result_dir``; a
cell stops at the first rate that misses the SLO (higher rates would only miss it further).
The results are then turned into profile rows by :mod:`hetinfra.perf.bench_import` (same
max_rps rule as ``hetinfra profile-import``) and written to the profile CSV.

Only the benchmark *client* runs here; ``vllm`` must be installed on this machine and the
server must be reachable from it. The endpoint is the server's base URL (``http://host:8000``);
a trailing ``/v1`` is dropped because ``vllm bench serve`` appends ``/v1/completions`` itself.
"""

from __future__ import annotations

import math
import os
import shlex
import shutil
import subprocess
import urllib.error
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hetinfra.errors import FeedError, InvalidInputError
from hetinfra.fileio import json_value
from hetinfra.procs import run_group
from hetinfra.perf.bench_import import (
    SLO,
    BenchPoint,
    SweepResult,
    format_number,
    read_objects,
    check_point,
    evaluate_sweep,
    parse_result,
    write_profile_csv,
)
from hetinfra.perf.profiles import ProfileRow, check_names, check_vllm_version

DEFAULT_PERCENTILES = (50, 90, 99)
INSTALL_HINT = ("pip install vllm on a machine that can reach the server (only the `vllm bench serve` client "
                "runs there), or pass --vllm-cmd with the path of the vllm executable")


class BenchError(FeedError):
    """The server or a ``vllm bench serve`` run failed (exit 4, like a failing provider)."""


@dataclass(frozen=True)
class ProgressEvent:
    """Passed to the ``progress`` callback.

    kind: ``"start"`` (a run begins), ``"done"`` (it finished; ``passed`` says whether it met the
    SLO) or ``"skip"`` (a rate not run because a lower rate of its cell already failed).
    ``finished`` counts runs done or skipped so far, out of ``total`` = cells x rates.
    """

    kind: str
    input_tokens: int
    output_tokens: int
    rate: float
    finished: int
    total: int
    passed: bool | None = None


@dataclass(frozen=True)
class BenchRun:
    argv: tuple[str, ...]
    result_path: Path
    log_path: Path
    input_tokens: int
    output_tokens: int
    rate: float
    passed: bool


@dataclass(frozen=True)
class ProfileRun:
    rows: tuple[ProfileRow, ...]  # the rows of this run (the CSV may hold more with merge=True)
    sweeps: tuple[SweepResult, ...]
    runs: tuple[BenchRun, ...]
    skipped: tuple[tuple[int, int, float], ...]  # (input, output, rate) not run: early stop
    out_csv: Path
    result_dir: Path
    csv_rows: int  # rows in the written CSV (more than len(rows) after a merge)


def normalize_endpoint(endpoint: str) -> str:
    """``http://h:8000/v1/`` -> ``http://h:8000``; rejects what is not an http(s) URL."""
    from hetinfra.httpget import checked_url

    url = checked_url((endpoint or "").strip().rstrip("/"), "--endpoint",
                      hint="give the server's base URL, e.g. http://10.0.0.5:8000 (a key: VLLM_API_KEY)")
    if url.endswith("/v1"):
        url = url[: -len("/v1")]
    return url


def resolve_vllm(vllm_cmd: str | Sequence[str]) -> list[str]:
    """The command prefix that runs vllm (``vllm``, a path, or e.g. ``uv run vllm``), split as a POSIX shell
    splits words: a quote left open or a trailing backslash is exit 2 naming --vllm-cmd (shlex's
    ValueError was a traceback after the server was checked)."""
    try:
        argv = shlex.split(vllm_cmd) if isinstance(vllm_cmd, str) else list(vllm_cmd)
    except ValueError as exc:
        raise InvalidInputError(f"--vllm-cmd {vllm_cmd[:60]!r} is not a command line a shell reads ({exc})",
                                hint="close its quotes, or give the path of the vllm executable alone") from None
    if not argv:
        raise InvalidInputError("empty vllm command", hint=INSTALL_HINT)
    exe = shutil.which(argv[0])
    if exe is None:
        where = "not found on PATH" if os.sep not in argv[0] else "not found or not executable"
        raise InvalidInputError(f"`{argv[0]}` {where}: the vllm benchmark client is needed to profile",
                                hint=INSTALL_HINT)
    return argv


def _get(url: str, timeout: float) -> tuple[int, bytes]:
    from hetinfra.httpget import get  # an answer that is not HTTP is an OSError, as no answer is

    return get(url, timeout=timeout, proxies=False)


def check_endpoint(endpoint: str, model: str, timeout_s: float = 5.0) -> list[str]:
    """Ask the server ``GET /health`` then ``GET /v1/models`` (no proxies, like vllm bench's client).

    Returns the model ids it serves (empty if it does not list them). Raises BenchError when it
    does not answer, InvalidInputError when it answers without ``model`` among its models.
    """
    base = normalize_endpoint(endpoint)
    hint = (f"is the server up (vllm serve {model} ...) and reachable from here? "
            "check the host, port and any tunnel; profile from a machine that can reach it")
    for path in ("/health", "/v1/models"):
        url = base + path
        try:
            status, body = _get(url, timeout_s)
        except urllib.error.HTTPError as exc:
            if path == "/health" and exc.code in (404, 405):
                continue  # an OpenAI-compatible server without /health: /v1/models decides
            if path == "/v1/models" and exc.code in (401, 403):
                return []  # --api-key server (vllm bench reads OPENAI_API_KEY): it answered, skip the model check
            raise BenchError(f"endpoint {base} answered GET {path} with HTTP {exc.code}", hint=hint) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise BenchError(f"endpoint {base} not answering (GET {path}: {reason})", hint=hint) from None
        if path == "/v1/models":
            try:
                ids = [m["id"] for m in json_value(body)["data"] if isinstance(m, dict) and "id" in m]
            except (ValueError, KeyError, TypeError):
                return []
            if ids and model not in ids:
                raise InvalidInputError(f"the server at {base} serves {', '.join(ids)}, not {model}",
                                        hint="pass --model with the served model name")
            return ids
    return []


def bench_argv(vllm: Sequence[str], *, base_url: str, model: str, input_tokens: int, output_tokens: int,
               rate: float, num_prompts: int, result_dir: Path, result_filename: str,
               percentiles: Sequence[float] = DEFAULT_PERCENTILES, metadata: Sequence[str] = ()) -> list[str]:
    """The exact ``vllm bench serve`` command line of one run (flags as in vLLM 0.33)."""
    argv = [*vllm, "bench", "serve", "--backend", "openai", "--base-url", base_url, "--model", model,
            "--dataset-name", "random", "--random-input-len", str(input_tokens),
            "--random-output-len", str(output_tokens), "--request-rate", format_number(rate),
            "--num-prompts", str(num_prompts), "--percentile-metrics", "ttft,tpot,e2el",
            "--metric-percentiles", ",".join(format_number(p) for p in percentiles), "--disable-tqdm",
            "--save-result", "--result-dir", str(result_dir), "--result-filename", result_filename]
    # --metadata takes every following KEY=VALUE (nargs="*"), so it comes last
    return argv + ["--metadata", f"random_input_len={input_tokens}", f"random_output_len={output_tokens}",
                   *metadata]


@contextmanager
def _writing(path: Path) -> Iterator[None]:
    """What the sweep writes (its results folder, each run's result and log): an OSError there (a file
    where the folder goes, a folder where a log goes) is exit 2 naming the path; `profile --out
    p.csv` beside a file named p.bench was a FileExistsError traceback."""
    try:
        yield
    except OSError as exc:
        raise InvalidInputError(f"cannot write the benchmark results at {path}: {exc.strerror or exc}",
                                hint="move it aside, or give --result-dir a folder you can write") from None


def default_timeout_s(num_prompts: int, rate: float) -> float:
    """Per-run limit: the arrival span (num_prompts / rate) four times over, plus 10 minutes."""
    return 600.0 + 4.0 * num_prompts / rate


def _last_line(path: Path) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""


def _validate(tp: int, pp: int, gpu: str, model: str, grid: Sequence[tuple[int, int]], rates: Sequence[float],
              num_prompts: int) -> tuple[list[tuple[int, int]], list[float]]:
    if not model or not model.strip():
        raise InvalidInputError("model must not be empty")
    if not gpu or not gpu.strip():
        raise InvalidInputError("gpu must not be empty", hint="use SkyPilot accelerator names (L4, A10G, H100, ...)")
    if tp < 1 or pp < 1:
        raise InvalidInputError(f"tp and pp must be >= 1, got tp={tp} pp={pp}")
    if num_prompts < 1:
        raise InvalidInputError(f"num_prompts must be >= 1, got {num_prompts}")
    cells = list(dict.fromkeys((int(i), int(o)) for i, o in grid))
    if not cells or any(i < 1 or o < 1 for i, o in cells):
        raise InvalidInputError("the grid needs (input, output) token counts >= 1")
    rs = sorted({float(r) for r in rates})
    if any(not math.isfinite(r) or r <= 0 for r in rs):
        raise InvalidInputError("request rates must be finite and > 0")
    if len(rs) < 2:
        raise InvalidInputError("a profile sweep needs at least two request rates",
                                hint="e.g. --rates 1,2,4,8,16,32, up to a rate the server cannot meet the SLO at")
    return cells, rs


def run_profile(endpoint: str, model: str, gpu: str, tp: int, pp: int, grid: Sequence[tuple[int, int]],
                rates: Sequence[float], slo: SLO, out_csv: Path | str, num_prompts: int = 200,
                vllm_cmd: str | Sequence[str] = "vllm", progress: Callable[[ProgressEvent], None] | None = None,
                *, result_dir: Path | str | None = None, timeout_s: float | None = None,
                health_timeout_s: float = 5.0, merge: bool = False, vllm_version: str | None = None) -> ProfileRun:
    """Sweep ``rates`` for every (input, output) of ``grid``, then write the profile CSV.

    ``result_dir`` (default ``<out_csv without .csv>.bench/`` beside it) keeps each run's result
    JSON (``in{I}-out{O}-rate{R}.json``) and its output (``.log``), for ``profile-import`` with
    another SLO later. ``timeout_s`` limits each run (default :func:`default_timeout_s`).
    """
    cells, rs = _validate(tp, pp, gpu, model, grid, rates, num_prompts)
    check_vllm_version(vllm_version, "--vllm-version")  # before the sweep: else its profile could not be read
    model, gpu = model.strip(), gpu.strip()
    check_names(model, gpu)  # so too the rows' names (the CSV is written after the sweep, hours later)
    out_csv = Path(out_csv)
    if out_csv.is_dir():
        raise InvalidInputError(f"--out {out_csv} is a directory", hint="give a file name such as profile.csv")
    base = normalize_endpoint(endpoint)
    vllm = resolve_vllm(vllm_cmd)
    check_endpoint(base, model, health_timeout_s)
    rdir = Path(result_dir) if result_dir is not None else out_csv.with_name(out_csv.stem + ".bench")
    with _writing(rdir):
        rdir.mkdir(parents=True, exist_ok=True)
    pcts = sorted(set(DEFAULT_PERCENTILES) | ({float(slo.statistic[1:])} if slo.statistic.startswith("p") else set()))
    meta = (f"hetinfra_gpu={gpu}", f"hetinfra_tp={tp}", f"hetinfra_pp={pp}")
    bench = _Bench(vllm, base, model, num_prompts, rdir, pcts, meta, timeout_s)
    total, finished = len(cells) * len(rs), 0
    runs: list[BenchRun] = []
    skipped: list[tuple[int, int, float]] = []

    def tell(kind: str, i: int, o: int, r: float, passed: bool | None = None) -> None:
        nonlocal finished
        if kind != "start":  # a run done or skipped
            finished += 1
        if progress is not None:
            progress(ProgressEvent(kind, i, o, r, finished, total, passed))

    sweeps = [bench.sweep(i, o, rs, slo, runs, skipped, tell) for i, o in cells]
    rows = tuple(s.row(gpu, tp, pp, slo, vllm_version) for s in sweeps)
    written = write_profile_csv(rows, out_csv, merge=merge)
    return ProfileRun(rows=rows, sweeps=tuple(sweeps), runs=tuple(runs), skipped=tuple(skipped),
                      out_csv=out_csv, result_dir=rdir, csv_rows=len(written))


@dataclass(frozen=True)
class _Bench:
    """What every ``vllm bench serve`` run of one ``run_profile`` shares: the vllm command, the server's
    base URL, the model, prompts per run, the result folder, the percentiles and metadata saved, and
    the time limit of a run (None: :func:`default_timeout_s`)."""

    vllm: list[str]
    base: str
    model: str
    num_prompts: int
    rdir: Path
    pcts: list[float]
    meta: tuple[str, ...]
    timeout_s: float | None

    def sweep(self, i: int, o: int, rs: Sequence[float], slo: SLO, runs: list[BenchRun],
              skipped: list[tuple[int, int, float]], tell: Callable[..., None]) -> SweepResult:
        """Cell (i, o) at rates ``rs`` from the lowest up, until one misses the SLO (the higher ones are
        skipped); its runs and skipped rates are appended to ``runs`` and ``skipped``."""
        points: list[BenchPoint] = []
        for n, rate in enumerate(rs):
            argv, result, log = self.command(i, o, rate)
            tell("start", i, o, rate)
            point = self.run(argv, result, log, i, o, rate)
            passed = check_point(point, slo).passed
            points.append(point)
            runs.append(BenchRun(tuple(argv), result, log, i, o, rate, passed))
            tell("done", i, o, rate, passed)
            if not passed:
                for later in rs[n + 1:]:
                    skipped.append((i, o, later))
                    tell("skip", i, o, later)
                break
        return evaluate_sweep(points, slo)

    def command(self, i: int, o: int, rate: float) -> tuple[list[str], Path, Path]:
        """The command line of the run at (i, o, rate), its result file (a stale one removed) and its log."""
        name = f"in{i}-out{o}-rate{format_number(rate)}"
        result, log = self.rdir / f"{name}.json", self.rdir / f"{name}.log"
        with _writing(result):
            result.unlink(missing_ok=True)  # never read a stale result of an earlier run
        argv = bench_argv(self.vllm, base_url=self.base, model=self.model, input_tokens=i, output_tokens=o, rate=rate,
                          num_prompts=self.num_prompts, result_dir=self.rdir, result_filename=result.name,
                          percentiles=self.pcts, metadata=self.meta)
        return argv, result, log

    def run(self, argv: list[str], result: Path, log: Path, i: int, o: int, rate: float) -> BenchPoint:
        """Run ``argv`` (output to ``log``) and read the point it saved in ``result``; BenchError if it
        times out, fails or saves nothing."""
        limit = self.timeout_s if self.timeout_s is not None else default_timeout_s(self.num_prompts, rate)
        at = f"in={i} out={o} rate={format_number(rate)} req/s"
        with _writing(log):
            fh = open(log, "w")
        try:
            with fh:
                proc = run_group(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=limit)
        except FileNotFoundError:
            raise InvalidInputError(f"`{self.vllm[0]}` could not be started", hint=INSTALL_HINT) from None
        except subprocess.TimeoutExpired:
            raise BenchError(f"vllm bench serve did not finish within {format_number(limit)} s at {at}",
                             hint=f"raise --timeout or lower --num-prompts; its output: {log}") from None
        if proc.returncode != 0:
            last = _last_line(log)
            raise BenchError(f"vllm bench serve exited with status {proc.returncode} at {at}"
                             + (f": {last}" if last else ""), hint=f"its full output: {log}")
        if not result.exists():
            raise BenchError(f"vllm bench serve wrote no result file at {at} (expected {result})",
                             hint=f"its output: {log}")
        objs = read_objects(result)
        return parse_result(objs[-1][1], objs[-1][0], model=self.model, input_tokens=i, output_tokens=o)
