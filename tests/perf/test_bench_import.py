"""vllm bench serve result files -> profile rows: the max_rps rule, located errors, the CSV, the CLI."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.cli.profile import import_command
from hetinfra.errors import InvalidInputError
from hetinfra.perf.bench_import import (
    SLO,
    evaluate_sweep,
    import_bench_results,
    load_bench_results,
    render_profile_csv,
    write_profile_csv,
)
from hetinfra.perf.profiles import COLUMNS, OPTIONAL_COLUMNS, ProfileRow, load_profiles, parse_profiles_csv

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
HEADER = ",".join(COLUMNS + OPTIONAL_COLUMNS)


def result(rate, ttft, tpot, *, throughput=None, model=MODEL, num_prompts=200, failed=0, sizes=(512, 128),
           metadata=True, p99=None, **extra) -> dict:
    """A result object with the keys `vllm bench serve --save-result --percentile-metrics ttft,tpot,e2el
    --metric-percentiles 50,90,99 --metadata random_input_len=I random_output_len=O` writes (vLLM 0.33)."""
    completed = num_prompts - failed
    thr = rate if throughput is None else throughput
    i, o = sizes
    e2el = ttft + tpot * (o - 1)
    p99 = p99 or (ttft * 1.5, tpot * 1.2)
    doc = {"date": "20250601-120000", "endpoint_type": "openai", "backend": "openai", "label": None,
           "model_id": model, "tokenizer_id": model, "num_prompts": num_prompts}
    if metadata:
        doc.update(random_input_len=str(i), random_output_len=str(o))  # --metadata values are strings
    doc.update({
        "request_rate": rate, "burstiness": 1.0, "max_concurrency": None,
        "duration": completed / thr if thr else 0.0, "completed": completed, "failed": failed,
        "total_input_tokens": i * completed, "total_output_tokens": o * completed,
        "request_throughput": thr, "request_goodput": None, "output_throughput": thr * o,
        "total_token_throughput": thr * (i + o), "max_output_tokens_per_s": thr * o * 1.3,
        "max_concurrent_requests": 12, "rtfx": 0.0, "latencies": [e2el / 1000] * 3, "queue_times": [0.0] * 3,
    })
    for m, v, v99 in (("ttft", ttft, p99[0]), ("tpot", tpot, p99[1]), ("e2el", e2el, e2el * 1.3)):
        doc.update({f"mean_{m}_ms": v, f"median_{m}_ms": v * 0.95, f"std_{m}_ms": v * 0.1,
                    f"p50_{m}_ms": v * 0.95, f"p90_{m}_ms": v * 1.1, f"p99_{m}_ms": v99})
    doc.update(extra)
    return doc


def write_sweep(folder: Path, docs: list[dict], prefix: str = "openai") -> list[Path]:
    paths = []
    for d in docs:
        p = folder / f"{prefix}-{d['request_rate']}qps-Llama-3.1-8B-Instruct-20250601-120000.json"
        p.write_text(json.dumps(d))
        paths.append(p)
    return paths


SLO_2000_100 = SLO(ttft_ms=2000, tpot_ms=100)
TPOT_SWEEP = [(1, 300, 40), (2, 320, 60), (4, 400, 90), (8, 900, 150)]  # rate, mean ttft, mean tpot


def test_tpot_crossing_is_interpolated_between_last_pass_and_first_fail(tmp_path):
    paths = write_sweep(tmp_path, [result(r, a, b) for r, a, b in TPOT_SWEEP])
    res = import_bench_results(paths, gpu="L4", tp=1, pp=1, slo=SLO_2000_100)
    (sweep,) = res.sweeps
    assert sweep.max_rps == pytest.approx(4 + (100 - 90) / (150 - 90) * (8 - 4))  # 4.667
    assert (sweep.last_pass.point.request_rate, sweep.first_fail.point.request_rate) == (4, 8)
    assert sweep.first_fail.reasons == ("mean tpot 150 ms > 100 ms",)
    assert sweep.notes == ()
    (row,) = res.rows
    assert (row.model, row.gpu, row.tp, row.pp, row.input_tokens, row.output_tokens,
            row.ttft_slo_ms, row.tpot_slo_ms) == (MODEL, "L4", 1, 1, 512, 128, 2000.0, 100.0)
    out = tmp_path / "profile.csv"
    write_profile_csv(res.rows, out)
    assert out.read_text() == f"{HEADER}\n{MODEL},L4,1,1,512,128,2000,100,4.667,mean,\n"
    assert load_profiles(out)[0].max_rps == 4.667  # the planner reads it back


def test_failing_point_sits_at_the_achieved_rate_when_the_server_fell_behind(tmp_path):
    docs = [result(r, a, b) for r, a, b in TPOT_SWEEP[:3]] + [result(8, 900, 150, throughput=6.0)]
    (sweep,) = import_bench_results(write_sweep(tmp_path, docs), gpu="L4", tp=1, pp=1, slo=SLO_2000_100).sweeps
    assert sweep.max_rps == pytest.approx(4 + (1 / 6) * (6 - 4))  # 4.333: toward 6 achieved, not 8 offered
    assert sweep.notes == (f"{MODEL} in=512 out=128: at 8 req/s offered the server achieved 6 req/s; "
                           "interpolated toward the achieved rate",)
    # achieved at or below the last passing rate: no interpolation, the passing rate stands
    docs[-1] = result(8, 900, 150, throughput=3.5)
    (sweep,) = import_bench_results(write_sweep(tmp_path, docs), gpu="L4", tp=1, pp=1, slo=SLO_2000_100).sweeps
    assert sweep.max_rps == 4


def test_the_metric_that_crosses_first_decides(tmp_path):
    # TTFT crosses at t = (2000-1000)/(5000-1000) = 0.25, TPOT at t = (100-60)/(120-60) = 0.667
    docs = [result(1, 500, 40), result(2, 1000, 60), result(4, 5000, 120)]
    (sweep,) = import_bench_results(write_sweep(tmp_path, docs), gpu="L4", tp=1, pp=1, slo=SLO_2000_100).sweeps
    assert sweep.max_rps == pytest.approx(2.5)
    assert sweep.first_fail.reasons == ("mean ttft 5000 ms > 2000 ms", "mean tpot 120 ms > 100 ms")


def test_percentile_statistic_uses_its_keys(tmp_path):
    docs = [result(1, 300, 40, p99=(400, 50)), result(2, 320, 60, p99=(500, 80)), result(4, 400, 90, p99=(600, 140))]
    paths = write_sweep(tmp_path, docs)
    (sweep,) = import_bench_results(paths, gpu="L4", tp=1, pp=1, slo=SLO(2000, 100, "p99")).sweeps
    assert sweep.max_rps == pytest.approx(2 + (100 - 80) / (140 - 80) * 2)  # 2.667; the mean would say "all pass"
    (mean,) = import_bench_results(paths, gpu="L4", tp=1, pp=1, slo=SLO_2000_100).sweeps
    assert mean.max_rps == 4 and mean.first_fail is None
    with pytest.raises(InvalidInputError, match=r"key 'p95_ttft_ms' missing") as exc:
        import_bench_results(paths, gpu="L4", tp=1, pp=1, slo=SLO(2000, 100, "p95"))
    assert str(paths[0]) in exc.value.message and "--metric-percentiles 95" in exc.value.hint
    with pytest.raises(InvalidInputError, match="unknown latency statistic 'max'"):
        SLO(2000, 100, "max")


def test_lowest_rate_failing_gives_zero_with_a_note(tmp_path):
    docs = [result(r, 300, t) for r, t in ((1, 120), (2, 130))]
    (sweep,) = import_bench_results(write_sweep(tmp_path, docs), gpu="L4", tp=1, pp=1, slo=SLO_2000_100).sweeps
    assert sweep.max_rps == 0 and sweep.last_pass is None
    assert sweep.notes == (f"{MODEL} in=512 out=128: even the lowest rate 1 req/s misses the SLO "
                           "(mean tpot 120 ms > 100 ms); max_rps 0: sweep lower rates to find a positive one",)
    # one failing point is conclusive too (the harness stops a cell there)
    (one,) = import_bench_results(write_sweep(tmp_path, docs[:1])[:1], gpu="L4", tp=1, pp=1, slo=SLO_2000_100).sweeps
    assert one.max_rps == 0


def test_sweep_that_never_fails_is_a_lower_bound_and_single_passing_point_is_an_error(tmp_path):
    paths = write_sweep(tmp_path, [result(r, 300, 40 + r) for r in (1, 2, 4, 8)])
    (sweep,) = import_bench_results(paths, gpu="L4", tp=1, pp=1, slo=SLO_2000_100).sweeps
    assert sweep.max_rps == 8
    assert "every rate met the SLO" in sweep.notes[0] and "lower bound" in sweep.notes[0]
    with pytest.raises(InvalidInputError, match=r"single-point sweep .*8 req/s meets the SLO"):
        import_bench_results(paths[-1:], gpu="L4", tp=1, pp=1, slo=SLO_2000_100)


def test_failed_requests_fail_a_point_without_interpolation(tmp_path):
    docs = [result(1, 300, 40), result(2, 320, 60), result(4, 400, 70, failed=3)]
    (sweep,) = import_bench_results(write_sweep(tmp_path, docs), gpu="L4", tp=1, pp=1, slo=SLO_2000_100).sweeps
    assert sweep.max_rps == 2
    assert sweep.first_fail.reasons == ("3 of 200 requests failed",)


def test_a_pass_after_the_first_failure_is_noted_not_used(tmp_path):
    docs = [result(1, 300, 40), result(2, 320, 110), result(4, 400, 95)]
    (sweep,) = import_bench_results(write_sweep(tmp_path, docs), gpu="L4", tp=1, pp=1, slo=SLO_2000_100).sweeps
    assert sweep.max_rps == pytest.approx(1 + (100 - 40) / (110 - 40))
    assert "rate(s) 4 pass again after 2 failed" in sweep.notes[0]


def test_files_are_grouped_by_model_and_size_in_any_order(tmp_path):
    a = write_sweep(tmp_path, [result(r, 300, t, sizes=(128, 128)) for r, t in ((2, 50), (1, 40), (4, 150))], "a")
    # no metadata: sizes from the token totals (2048 in, 512 out per request)
    b = write_sweep(tmp_path, [result(r, 300, t, sizes=(2048, 512), metadata=False) for r, t in ((1, 80), (2, 120))],
                    "b")
    res = import_bench_results([b[1], a[0], b[0], a[2], a[1]], gpu="H100", tp=2, pp=1, slo=SLO_2000_100)
    assert [(r.input_tokens, r.output_tokens, round(r.max_rps, 3)) for r in res.rows] == [
        (128, 128, 3.0),  # 2 + (100-50)/(150-50) * (4-2)
        (2048, 512, 1.5),  # 1 + (100-80)/(120-80) * (2-1)
    ]
    assert [c.point.sizes_from for c in res.sweeps[1].checks] == ["totals", "totals"]
    assert res.sweeps[0].rates == (1, 2, 4)


def test_overrides_replace_model_and_sizes(tmp_path):
    paths = write_sweep(tmp_path, [result(r, 300, t, metadata=False) for r, t in ((1, 40), (2, 150))])
    res = import_bench_results(paths, gpu="L4", tp=1, pp=1, slo=SLO_2000_100, model="llama-8b",
                               input_tokens=1000, output_tokens=200)
    assert [(r.model, r.input_tokens, r.output_tokens) for r in res.rows] == [("llama-8b", 1000, 200)]


def test_burst_runs_and_pytorch_companions_are_skipped(tmp_path):
    paths = write_sweep(tmp_path, [result(r, 300, t) for r, t in ((1, 40), (2, 150))])
    burst = tmp_path / "burst.json"
    burst.write_text(json.dumps(result(1, 300, 40, request_rate="inf", request_throughput=9.5)))
    companion = tmp_path / "x.pytorch.json"
    companion.write_text("[]")
    res = import_bench_results([*paths, burst, companion], gpu="L4", tp=1, pp=1, slo=SLO_2000_100)
    assert len(res.rows) == 1 and res.sweeps[0].rates == (1, 2)
    assert res.skipped == (f"{burst}: --request-rate inf (all requests at once) has no place on a rate axis",
                           f"{companion}: PyTorch-benchmark companion file, not a --save-result file")


def test_append_result_files_hold_one_object_per_line(tmp_path):
    p = tmp_path / "appended.json"
    p.write_text("\n".join(json.dumps(result(r, 300, t)) for r, t in ((1, 40), (2, 60), (4, 160))))
    points, skipped = load_bench_results([p])
    assert [(pt.where, pt.request_rate) for pt in points] == [(f"{p}#1", 1), (f"{p}#2", 2), (f"{p}#3", 4)]
    assert evaluate_sweep(points, SLO_2000_100).max_rps == pytest.approx(2 + 40 / 100 * 2)


@pytest.mark.parametrize("text, message", [
    ('{"model_id": "m", "request_rate": 1,', r"{p}:1:\d+: not valid JSON"),
    ("", r"{p}: empty file"),
    ("[1, 2]", r"{p}: expected a JSON object, got list"),
])
def test_malformed_files_are_located(tmp_path, text, message):
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(InvalidInputError, match=message.format(p=p)):
        load_bench_results([p])


@pytest.mark.parametrize("change, message", [
    ({"request_throughput": None}, r"key 'request_throughput' missing"),
    ({"model_id": None}, r"key 'model_id' missing"),
    ({"completed": "200"}, r"key 'completed' must be a number, got \"200\""),
    ({"completed": 12.5}, r"key 'completed' must be a count"),
    ({"request_rate": 0}, r"key 'request_rate' must be > 0"),
    ({"random_input_len": "lots"}, r"key 'random_input_len' must be a token count"),
    ({"mean_tpot_ms": None}, r"key 'mean_tpot_ms' missing \(has median_tpot_ms, p50_tpot_ms"),
])
def test_bad_keys_are_named_with_the_file(tmp_path, change, message):
    doc = result(1, 300, 40)
    for k, v in change.items():
        if v is None:
            del doc[k]
        else:
            doc[k] = v
    p = tmp_path / "r1.json"
    p.write_text(json.dumps(doc))
    other = write_sweep(tmp_path, [result(2, 300, 150)])
    with pytest.raises(InvalidInputError, match=rf"^{p}: " + message):
        import_bench_results([p, *other], gpu="L4", tp=1, pp=1, slo=SLO_2000_100)


def test_unknown_sizes_and_duplicate_rates_are_errors(tmp_path):
    doc = result(1, 300, 40, metadata=False)
    del doc["total_input_tokens"]
    p = tmp_path / "nosize.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(InvalidInputError, match="cannot tell the request sizes") as exc:
        load_bench_results([p])
    assert "--input-tokens" in exc.value.hint
    a = write_sweep(tmp_path, [result(1, 300, 40), result(2, 300, 150)], "a")
    b = write_sweep(tmp_path, [result(2, 300, 150)], "b")
    with pytest.raises(InvalidInputError, match="two runs at request rate 2"):
        import_bench_results([*a, *b], gpu="L4", tp=1, pp=1, slo=SLO_2000_100)
    with pytest.raises(InvalidInputError, match="result file not found"):
        load_bench_results([tmp_path / "missing.json"])


def _row(max_rps, i=512, ttft=2000.0) -> ProfileRow:
    return ProfileRow(MODEL, "L4", 1, 1, i, 128, ttft, 100.0, max_rps, "test")


def test_write_profile_csv_merges_and_replaces_atomically(tmp_path):
    out = tmp_path / "sub" / "profile.csv"
    write_profile_csv([_row(4.0), _row(2.0, i=2048)], out)
    written = write_profile_csv([_row(5.25), _row(1.0, ttft=500.0)], out, merge=True)
    assert [r.max_rps for r in written] == [2.0, 5.25, 1.0]
    assert out.read_text() == (f"{HEADER}\n{MODEL.lower()},L4,1,1,2048,128,2000,100,2,,\n"
                               f"{MODEL},L4,1,1,512,128,2000,100,5.25,,\n{MODEL},L4,1,1,512,128,500,100,1,,\n")
    write_profile_csv([_row(3.0)], out)  # no merge: replaced whole
    assert out.read_text() == f"{HEADER}\n{MODEL},L4,1,1,512,128,2000,100,3,,\n"
    assert [p.name for p in out.parent.iterdir()] == ["profile.csv"]  # no temporary file left
    with pytest.raises(InvalidInputError, match="is a directory"):
        write_profile_csv([_row(1.0)], tmp_path)


def _runner() -> CliRunner:
    try:  # click < 8.2 mixes stderr into stdout unless told not to
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


def test_profile_import_command(tmp_path):
    paths = write_sweep(tmp_path, [result(r, a, b) for r, a, b in TPOT_SWEEP])
    out = tmp_path / "profile.csv"
    res = _runner().invoke(import_command, [*map(str, paths), "--gpu", "L4", "--tp", "1", "--ttft-ms", "2000",
                                            "--tpot-ms", "100", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == [
        f"{MODEL} in=512 out=128: max_rps 4.667 (between 4 req/s (passes) and 8 req/s "
        "(fails: mean tpot 150 ms > 100 ms))",
        f"wrote {out}: 1 row(s) for L4 tp=1 pp=1 under mean ttft<=2000 ms, tpot<=100 ms",
    ]
    assert res.stderr == ""
    assert out.read_text() == f"{HEADER}\n{MODEL},L4,1,1,512,128,2000,100,4.667,mean,\n"


def test_profile_import_command_errors_exit_2_with_location(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    res = _runner().invoke(import_command, [str(bad), "--gpu", "L4", "--tp", "1", "--ttft-ms", "2000",
                                            "--tpot-ms", "100", "--out", str(tmp_path / "p.csv")])
    assert res.exit_code == 2
    assert res.stderr.splitlines() == [
        f"error: {bad}:1:2: not valid JSON (Expecting property name enclosed in double quotes)",
        "  hint: expected the JSON that `vllm bench serve --save-result` writes",
    ]
    assert not (tmp_path / "p.csv").exists()
    res = _runner().invoke(import_command, [str(bad), "--gpu", "L4", "--tp", "1", "--ttft-ms", "2000",
                                            "--tpot-ms", "100", "--statistic", "max", "--out", "p.csv"])
    assert res.exit_code == 2 and "unknown latency statistic 'max'" in res.stderr



@pytest.mark.parametrize("rates, flags, says", [
    ([1e300, 2e300], [], "column 'max_rps' must be a number in [0, 1e+09]"),
    ([1, 2, 4, 8], ["--ttft-ms", "1e-320"], "column 'ttft_slo_ms'"),
    ([1, 2, 4, 8], ["--tpot-ms", "1e308"], "Invalid value for '--tpot-ms'"),  # at the flag: its bound is the reader's
    ([1, 2, 4, 8], ["--tp", "100000"], "Invalid value for '--tp'"),
    ([1, 2, 4, 8], ["--model", " "], "model and gpu must not be empty"),
])
def test_profile_import_never_writes_a_row_the_profile_reader_refuses(tmp_path, rates, flags, says):
    """profile-import (and the harness: both write through write_profile_csv) wrote a 308-digit max_rps,
    a TTFT SLO of 0 and a TP of 100000, which `plan` then refused. The reader's rules decide, once; the
    error names the result file and nothing is written."""
    paths = write_sweep(tmp_path, [result(r, 300 * (1 + k), 40 * (1 + k)) for k, r in enumerate(rates)])
    out = tmp_path / "p.csv"
    args = [*map(str, paths), "--gpu", "L4", "--tp", "1", "--ttft-ms", "2000", "--tpot-ms", "100", "--out", str(out)]
    res = _runner().invoke(import_command, args + flags)
    assert res.exit_code == 2, res.output
    assert says in res.stderr
    assert says.startswith("Invalid value") or "would refuse" in res.stderr and str(tmp_path) in res.stderr
    assert not out.exists()


@pytest.mark.parametrize("text, says", [
    (json.dumps(result(1, 300, 40)).replace('"mean_ttft_ms": 300', '"mean_ttft_ms": -5'), "is a latency, so >= 0"),
    (json.dumps(result(1, 300, 40))[:-1] + ', "model_id": "other"}', "appears twice"),
    (json.dumps(result(1, 300, 40))[:-1] + ', "completed": 1' + "0" * 5000 + "}", "an integer of 5,001 digits"),
])
def test_a_negative_latency_a_key_given_twice_or_a_huge_integer_is_refused(tmp_path, text, says):
    (tmp_path / "r1.json").write_text(text)
    write_sweep(tmp_path, [result(2, 600, 60), result(4, 900, 150)])
    res = _runner().invoke(import_command, [*map(str, sorted(tmp_path.glob("*.json"))), "--gpu", "L4", "--tp", "1",
                                            "--ttft-ms", "2000", "--tpot-ms", "100", "--out", str(tmp_path / "p.csv")])
    assert res.exit_code == 2 and says in res.stderr, res.output


def _accepted(make) -> bool:
    try:
        make()
        return True
    except InvalidInputError:
        return False


def _reads(row: ProfileRow) -> bool:
    return _accepted(lambda: parse_profiles_csv(render_profile_csv([row]), "p.csv"))


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.sampled_from(["mean", "median", "p99.9", "p0.5", "p100", "p999", "p0", "p99.", "max"]),
                 st.integers(0, 1000).map(lambda n: f"p{n}")))
def test_profile_import_takes_the_statistics_the_profile_reader_reads(statistic):
    """profile-import and the harness write rows that a spec's ``profiles:`` reads back: a --statistic
    the reader would refuse at its line (p100, p999) is refused up front, before any sweep, and one
    the reader takes is taken."""
    assert _accepted(lambda: SLO(2000, 100, statistic)) == _reads(dataclasses.replace(_row(1.0), statistic=statistic))


@settings(max_examples=30, deadline=None)
@given(st.one_of(st.none(), st.sampled_from(["0.12.0", "0.11.1.dev85+g1a2b3c", "v0.12.0", "latest", "0.12 0", "$(x)"])))
def test_profile_import_takes_the_engine_versions_the_profile_reader_reads(tmp_path_factory, version):
    """As for the statistic: a --vllm-version the reader refuses (v0.12.0) is refused before anything
    is written, and one it takes is written."""
    paths = write_sweep(tmp_path_factory.mktemp("sweep"), [result(1, 300, 40), result(2, 320, 60), result(4, 400, 130)])
    wrote = _accepted(lambda: import_bench_results(paths, gpu="L4", tp=1, pp=1, slo=SLO_2000_100, vllm_version=version))
    assert wrote == _reads(dataclasses.replace(_row(1.0), vllm_version=version))


@settings(max_examples=30, deadline=None, derandomize=True)
@given(model=st.text(min_size=1, max_size=8) | st.sampled_from(["m\x1b[31m", "a\rb", "a\nb", "a,b", "\u202em"]),
       gpu=st.text(min_size=1, max_size=6) | st.sampled_from(["L4", "L4,x", "\x1b[1mL4", "H100"]))
def test_property_profile_import_writes_only_rows_its_reader_reads_back(tmp_path_factory, model, gpu):
    """A result file's model_id and --gpu are a row's names: profile-import wrote any text there (a
    model_id with a carriage return made a row its own reader split, 'column tp is empty'; a GPU no
    offer can spell matched nothing) and echoed an escape sequence to the terminal as is. Now a row is
    written only where hetinfra.perf.profiles reads it back, with the same names, and what it prints
    is printable (hetinfra.errors.shown)."""
    d = tmp_path_factory.mktemp("names")
    paths = write_sweep(d, [result(r, ttft, tpot, model=model) for r, ttft, tpot in TPOT_SWEEP])
    res = CliRunner().invoke(import_command, [*map(str, paths), "--gpu", gpu, "--tp", "1", "--ttft-ms", "2000",
                                              "--tpot-ms", "100", "--out", str(d / "p.csv")])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert all(ch.isprintable() or ch == "\n" for ch in res.output), repr(res.output)
    if res.exit_code != 0:
        assert res.exit_code == 2 and not (d / "p.csv").exists(), res.output
        return
    [row] = load_profiles(d / "p.csv")
    assert (row.model, row.gpu) == (model.strip().lower(), gpu.strip())
