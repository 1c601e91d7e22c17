"""Derive hetinfra/perf/data/sharegpt_first_turns_llama2.csv: the first turn of every ShareGPT
conversation in Microsoft's per-request token counts, filtered as vLLM's benchmark_serving.py samples
ShareGPT (its ``sample_sharegpt_requests``: first prompt and first reply of each conversation; prompts
or replies under 4 tokens dropped, prompts over 1024 or prompt + reply over 2048 dropped).

Input: ``data/processed_traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv`` of microsoft/sarathi-serve
(commit 72339db5, Apache-2.0; the trace Vidur ships by the same name): one row per conversation turn,
``num_prefill_tokens`` (the conversation so far: earlier turns and replies plus the new prompt, Llama 2
tokens) and ``num_decode_tokens`` (the reply). A turn's context holds the previous turn's whole
conversation, so a row whose prefill is shorter than the previous row's prefill + decode starts a new
conversation: its prefill is the conversation's first prompt.

    python tools/sharegpt_lengths.py TRACE.csv > hetinfra/perf/data/sharegpt_first_turns_llama2.csv
    python tools/sharegpt_lengths.py TRACE.csv --check   # compares with the vendored file
"""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

VENDORED = Path(__file__).resolve().parents[1] / "hetinfra" / "perf" / "data" / "sharegpt_first_turns_llama2.csv"


def first_turns(rows: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(prompt, reply) of each conversation's first turn, in trace order."""
    out, previous_total = [], None
    for prefill, decode in rows:
        if previous_total is None or prefill < previous_total:
            out.append((prefill, decode))
        previous_total = prefill + decode
    return out


def vllm_filter(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """benchmark_serving.py's ShareGPT filter (vLLM v0.6.0)."""
    return [(a, b) for a, b in pairs if a >= 4 and b >= 4 and a <= 1024 and a + b <= 2048]


def render(trace: Path) -> str:
    with trace.open() as fh:
        rows = [(int(r["num_prefill_tokens"]), int(r["num_decode_tokens"])) for r in csv.DictReader(fh)]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["input_length", "output_length"])
    w.writerows(vllm_filter(first_turns(rows)))
    return buf.getvalue()


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python tools/sharegpt_lengths.py TRACE.csv [--check]", file=sys.stderr)
        return 2
    text = render(Path(argv[0]))
    if "--check" in argv:
        same = VENDORED.read_text() == text
        print("the vendored table matches" if same else "the vendored table differs")
        return 0 if same else 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
