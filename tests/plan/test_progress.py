"""Progress of `hetinfra plan` (hetinfra.plan.progress): a status line with the verification round,
the solver's blocks and the requests simulated, on a terminal only; nothing on pipes or under
--json, and the plan is the same with or without it."""

from __future__ import annotations

import io
import json

import pytest
import yaml

from hetinfra.plan.pipeline import plan_document
from hetinfra.plan.progress import Progress, progress_for


class Terminal(io.StringIO):
    """A stream that says it is a terminal (what a pseudo-terminal's stderr says)."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(scope="module")
def small_spec(tmp_path_factory):
    spec = {"name": "small", "models": [{
        "name": "chat-8b", "model": "llama-3.1-8b", "source": "meta-llama/Llama-3.1-8B-Instruct",
        "slo": {"ttft_ms": 1500, "tpot_ms": 100},
        "demand": {"rate_rps": 2, "sizes": {"classes": [{"name": "c", "input_tokens": 500, "output_tokens": 200,
                                                          "share": 1.0}]}}}],
        "infrastructure": {"clouds": ["aws"], "gpus": ["L4", "A10G"]},
        "planning": {"verify": {"requests": 1000}}}
    path = tmp_path_factory.mktemp("progress") / "small.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_only_a_terminal_without_json_gets_progress():
    assert progress_for(io.StringIO(), as_json=False) is None  # a pipe or a file
    assert progress_for(Terminal(), as_json=True) is None  # --json: stdout is a document, stderr stays quiet
    p = progress_for(Terminal(), as_json=False)
    assert isinstance(p, Progress)
    p.close()


def test_the_line_shows_rounds_blocks_and_requests_and_changes_no_plan(small_spec):
    stream = Terminal()
    progress = Progress(stream)
    try:
        shown = plan_document(small_spec, with_baselines=False, template_cache=False, progress=progress)[1].to_dict()
        last = progress.line()
    finally:
        progress.close()
    silent = plan_document(small_spec, with_baselines=False, template_cache=False)[1].to_dict()
    for doc in (shown, silent):
        doc["solver"].pop("build_s"), doc["solver"].pop("solve_s")
    assert shown == silent
    text = stream.getvalue()
    assert "verification round 1/" in text and "solver block" in text and "s budget" in text
    simulated = int(last.rsplit("|", 1)[1].split()[0].replace(",", ""))
    assert simulated >= 1000 * shown["fidelity"]["rounds"] * 0.9  # requests routed to units, every round


@pytest.mark.parametrize("flags", [(), ("--json",)])
def test_nothing_on_a_pipe(small_spec, run_cli, flags):
    code, stdout, err = run_cli("plan", str(small_spec), "--no-baselines", "--no-template-cache", *flags)
    assert code == 0, err
    assert "requests simulated" not in err and "verification round" not in err
    if flags:
        assert json.loads(stdout)["fidelity"]["verified"]
