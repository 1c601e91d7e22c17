"""The built-in accuracy table: published checkpoints only, looked up by repository id."""

from __future__ import annotations

from hetinfra.catalog.accuracy import CHECKPOINTS, builtin_accuracy, known_checkpoints


def test_scores_are_per_checkpoint_and_case_insensitive():
    assert builtin_accuracy("meta-llama/Llama-3.1-8B-Instruct") == 100.0
    assert builtin_accuracy("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic") == 99.7
    assert builtin_accuracy("redhatai/meta-llama-3.1-8b-instruct-quantized.w8a8") == 100.3
    # the same repository under its former owner name
    assert builtin_accuracy("neuralmagic/Meta-Llama-3.1-8B-Instruct-quantized.w4a16") == 98.9
    assert builtin_accuracy("RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8-dynamic") == 99.7


def test_unknown_checkpoints_have_no_score():
    # a precision alone says nothing: another int4 checkpoint may score differently
    for source in ("someone/Llama-3.1-8B-Instruct-AWQ", "Meta-Llama-3.1-8B-Instruct-FP8-dynamic",
                   "RedHatAI/Meta-Llama-3.1-70B-Instruct-quantized.w4a16", "./local/checkpoint"):
        assert builtin_accuracy(source) is None


def test_known_checkpoints_lists_each_repository_once():
    names = known_checkpoints()
    assert len(names) == len(set(n.lower() for n in names)) == len(CHECKPOINTS) - 4  # 4 neuralmagic/ aliases
    assert all(not n.startswith("neuralmagic/") for n in names)
