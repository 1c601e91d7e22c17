"""Which engine a deploy.vllm_version string runs (hetinfra.perf.calibration.engine_key): a release's
suffix (rc1, .post1, +cu121, -dev) never moves it to another engine."""

from __future__ import annotations

import random

from hetinfra.perf.calibration import ASYNC_FROM, DEFAULT_VLLM_VERSION, LEGACY_BEFORE, V1_FROM, engine_key

SUFFIXES = ("rc1", "rc14", "a2", "b3", "dev0", ".post1", ".dev20250101", "+cu121", "-dev", ".0rc2")


def expected(release: tuple[int, ...]) -> str:
    if release < LEGACY_BEFORE:
        return "0.2"
    return "0.6" if release < V1_FROM else "0.14" if release >= ASYNC_FROM else DEFAULT_VLLM_VERSION


def test_a_suffix_never_moves_a_version_to_another_engine():
    # 0.13rc1 read as 0.131 planned on the asynchronous 0.14 engine; 0.5rc1 (0.51) on it instead of the legacy one
    rng = random.Random(35)
    cases = [(0, 13), (0, 5), (0, 6), (0, 1), (0, 14), (0, 5, 9), (0, 13, 1), (0, 7, 3), (0, 8), (0, 7)]
    cases += [tuple(rng.randint(0, 20) for _ in range(rng.choice((2, 3)))) for _ in range(200)]
    for release in cases:
        base = ".".join(map(str, release))
        for suffix in SUFFIXES:
            assert engine_key(base + suffix) == expected(release), base + suffix
            assert engine_key("v" + base + suffix) == expected(release), base + suffix


def test_the_engines_the_docs_name():
    assert [engine_key(v) for v in ("0.2.7", "0.5.9", "0.6.0", "0.7.3", "0.8.0", "0.13.9", "0.14", "0.14.0rc1",
                                    "0.15.0-dev", "1.0.0")] == ["0.2", "0.2", "0.6", "0.6", DEFAULT_VLLM_VERSION,
                                                                DEFAULT_VLLM_VERSION, "0.14", "0.14", "0.14", "0.14"]
