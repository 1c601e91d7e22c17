"""Any text in a text flag (round fifteen): every command that answers without a server or a plan
(`profile` against a closed port, `profile-import`, `estimate`, `prices`) ends with a documented exit
code and a short error for any text in any of its free-text flags, never a traceback. `profile
--vllm-cmd "vllm 'x"` was shlex's ValueError ("No closing quotation") as a traceback
(hetinfra.perf.harness.resolve_vllm, the one splitter of a command line a user gives)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.conftest import DOCUMENTED_EXITS, MAX_ERROR_LINES, budget

#: (command line before the flag, the text flags it takes); {r} is a result file of `vllm bench serve`
COMMANDS = {
    "profile": (["profile", "--endpoint", "http://127.0.0.1:9", "--model", "m", "--gpu", "L4", "--tp", "1",
                 "--out", "p.csv", "--rates", "1,2", "--inputs", "128", "--outputs", "128"],
                ["--vllm-cmd", "--statistic", "--vllm-version", "--model", "--gpu", "--inputs", "--rates"]),
    "profile-import": (["profile-import", "{r}", "--gpu", "L4", "--tp", "1", "--ttft-ms", "2000", "--tpot-ms", "100",
                        "--out", "p.csv"], ["--statistic", "--model", "--gpu", "--vllm-version"]),
    "estimate": (["estimate", "--model", "llama-3.1-8b", "--gpu", "L4", "--input", "512", "--output", "128",
                  "--ttft-ms", "2000", "--tpot-ms", "100"], ["--model", "--gpu"]),
    "prices": (["prices", "--limit", "2"], ["--gpu", "--cloud", "--region"]),
}
CASES = [(cmd, flag) for cmd, (_, flags) in COMMANDS.items() for flag in flags]
#: shell quoting, escapes, separators, control characters and any other text
TEXT = st.one_of(st.text(st.sampled_from("'\"\\ =,;:|&$`*?[]{}()<>#~!%-_.\t\x1b\x7f\u202eé１"), min_size=1, max_size=12),
                 st.text(min_size=1, max_size=30).filter(lambda t: "\x00" not in t))


@pytest.fixture(scope="module")
def result_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("textflags") / "r1.json"
    path.write_text(json.dumps({"model_id": "m", "request_rate": 1, "completed": 200, "failed": 0,
                                "request_throughput": 1, "random_input_len": "512", "random_output_len": "128",
                                "mean_ttft_ms": 300, "mean_tpot_ms": 40}))
    return path


@pytest.mark.parametrize("command,flag", CASES, ids=[f"{c} {f}" for c, f in CASES])
@budget(25)
@given(text=TEXT)
def test_any_text_in_a_text_flag_is_a_clean_exit(tmp_path_factory, monkeypatch, result_file, command, flag, text):
    from hetinfra.cli.app import cli

    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
    monkeypatch.setenv("HETINFRA_CACHE_DIR", "off")
    args = [a.replace("{r}", str(result_file)) for a in COMMANDS[command][0]] + [flag, text]
    got = CliRunner().invoke(cli, args)
    trace = "".join(__import__("traceback").format_exception(got.exception)) if got.exception and not isinstance(
        got.exception, SystemExit) else ""
    assert not trace, f"{args}: {trace[-800:]}"
    assert got.exit_code in DOCUMENTED_EXITS, (args, got.exit_code, got.output[-400:])
    if got.exit_code:
        assert len(got.output.strip().splitlines()) <= MAX_ERROR_LINES, got.output
