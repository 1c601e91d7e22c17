"""tools/sharegpt_lengths.py: ShareGPT's conversation first turns under vLLM benchmark_serving.py's
filter, from a per-turn trace (the vendored hetinfra/perf/data/sharegpt_first_turns_llama2.csv)."""

from __future__ import annotations

import runpy
from pathlib import Path

from hetinfra.perf.published import size_table

REPO = Path(__file__).resolve().parents[2]


def _tool():
    """The tool's functions (its globals; run_path leaves its __main__ block alone)."""
    return type("Tool", (), runpy.run_path(str(REPO / "tools" / "sharegpt_lengths.py")))


def test_a_row_shorter_than_the_last_conversation_starts_a_new_one():
    """Turn 2 carries turn 1 (10 + 50) and its new prompt; a context of 30 < 60 + 40 is a new conversation."""
    trace = [(10, 50), (70, 40), (30, 5), (40, 2000)]
    assert _tool().first_turns(trace) == [(10, 50), (30, 5)]


def test_the_filter_is_vllms():
    kept = _tool().vllm_filter([(3, 100), (100, 3), (1025, 10), (1000, 1049), (1000, 1048), (4, 4)])
    assert kept == [(1000, 1048), (4, 4)]


def test_the_vendored_table_is_filtered_first_turns(tmp_path):
    """Regenerating from a trace of the vendored pairs (each its own conversation) gives them back."""
    table = size_table("sharegpt")
    trace = tmp_path / "trace.csv"
    # descending contexts: every row starts a conversation, as every vendored row did
    rows = sorted(table, key=lambda r: -r[0])
    trace.write_text("num_prefill_tokens,num_decode_tokens\n" + "".join(f"{a},{b}\n" for a, b in rows))
    text = _tool().render(trace)
    assert text.count("\n") == len(table) + 1
    assert all(4 <= a <= 1024 and b >= 4 and a + b <= 2048 for a, b in table)
