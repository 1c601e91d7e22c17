"""Built-in accuracy scores of published quantized checkpoints, for variants that give none.

One scale for every entry: the checkpoint's OpenLLM v1 score as a percent of the 16-bit
(bf16) checkpoint's ("recovery"), evaluated with Meta's prompting where available, as the Red Hat AI
(formerly Neural Magic) model cards report it for their Llama-3.1 quantizations (the evaluation
behind Kurtic et al., "Give Me BF16 or Give Me Death"? Accuracy-Performance Trade-Offs in LLM
Quantization, ACL 2025, arXiv:2411.02355). The 16-bit checkpoints are the reference, 100.0.

A score belongs to one checkpoint (its quantization recipe), not to a precision: another int4
checkpoint of the same model may score differently, so only these repository ids are looked up
(case-insensitive; the neuralmagic/ and RedHatAI/ names are the same repositories). Entries are
only those whose numbers were read from the model cards in the same form; anything else needs a
user-given ``accuracy`` (Llama-3.1-70B's INT8 and INT4 cards were not found in that form, so they
are not here).
"""

from __future__ import annotations

#: what the built-in scores measure (shown where a built-in score is used)
SCALE = "OpenLLM v1 recovery, % of the bf16 checkpoint (Red Hat AI model cards)"

_REFERENCE = 100.0

# repository id (the quantized ones without their owner, see _OWNERS) -> score. Each cites its card.
_CARDS: dict[str, float] = {
    # meta-llama/Llama-3.1-8B-Instruct, the bf16 reference of the 8B cards below.
    "meta-llama/Llama-3.1-8B-Instruct": _REFERENCE,
    "meta-llama/Meta-Llama-3.1-8B-Instruct": _REFERENCE,
    # RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic: "99.7% for OpenLLM v1 (using Meta's prompting
    # when available)" (FP8 weights and activations, dynamic per-token scales).
    "Meta-Llama-3.1-8B-Instruct-FP8-dynamic": 99.7,
    # RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8: "100.3% for OpenLLM v1" (INT8 W8A8).
    "Meta-Llama-3.1-8B-Instruct-quantized.w8a8": 100.3,
    # RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16: "98.9% for OpenLLM v1" (INT4 weights, GPTQ,
    # group size 128).
    "Meta-Llama-3.1-8B-Instruct-quantized.w4a16": 98.9,
    # meta-llama/Llama-3.1-70B-Instruct, the bf16 reference of the 70B card below.
    "meta-llama/Llama-3.1-70B-Instruct": _REFERENCE,
    "meta-llama/Meta-Llama-3.1-70B-Instruct": _REFERENCE,
    # RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8-dynamic: "99.7% for OpenLLM v1".
    "Meta-Llama-3.1-70B-Instruct-FP8-dynamic": 99.7,
}

#: owners under which the quantized checkpoints above are published (one repository, renamed)
_OWNERS = ("RedHatAI", "neuralmagic")

#: repository id as published -> score
CHECKPOINTS: dict[str, float] = {
    full: score
    for key, score in _CARDS.items()
    for full in ([key] if "/" in key else [f"{owner}/{key}" for owner in _OWNERS])
}
_BY_ID = {k.lower(): v for k, v in CHECKPOINTS.items()}


def builtin_accuracy(source: str) -> float | None:
    """The built-in score of checkpoint ``source`` (a Hugging Face repo id, any case), or None."""
    return _BY_ID.get(source.strip().lower())


def known_checkpoints() -> list[str]:
    """The repository ids with a built-in score, for messages (RedHatAI/ names only: neuralmagic/ is the same)."""
    return [k for k in CHECKPOINTS if not k.startswith("neuralmagic/")]
