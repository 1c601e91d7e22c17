"""Facts of the built-in GPU and model catalogs (sources: ../shared/notes/vllm.md sections 4 and 5)."""

from __future__ import annotations

import pytest

from hetinfra.catalog.gpus import GPUS, VISIBLE_MEMORY_GIB, get_gpu, visible_memory_bytes
from hetinfra.catalog.models import ALIASES, MODELS, get_model
from hetinfra.perf.estimator import kv_bytes_per_token_per_gpu

REQUIRED_GPUS = ["T4", "L4", "A10G", "A10", "L40S", "V100", "A100", "A100-80GB", "H100", "H200", "B200"]
REQUIRED_MODELS = ["llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.3-70b",
                   "qwen3-32b", "mistral-7b", "mixtral-8x7b", "phi-4"]


def test_required_gpus_present_and_keyed_by_name():
    for name in REQUIRED_GPUS:
        assert name in GPUS, name
    for key, g in GPUS.items():
        assert key == g.name
        assert g.memory_gb > 0 and g.bandwidth_gbps > 0 and g.bf16_tflops > 0 and g.intra_node_gbps > 0


@pytest.mark.parametrize(
    "name, mem, bw, bf16, fp8, nvlink, link",
    [
        ("H100", 80, 3350, 989, 1979, True, 450),
        ("H200", 141, 4800, 989, 1979, True, 450),
        ("A100", 40, 1555, 312, None, True, 300),
        ("A100-80GB", 80, 2039, 312, None, True, 300),
        ("L4", 24, 300, 121, 242, False, 32),
        ("A10G", 24, 600, 70, None, False, 32),
        ("A10", 24, 600, 125, None, False, 32),
        ("L40S", 48, 864, 362.05, 733, False, 32),
        ("T4", 16, 320, 65, None, False, 16),
        ("V100", 16, 900, 125, None, True, 150),
        ("B200", 180, 7700, 2250, 4500, True, 900),
    ],
)
def test_gpu_facts(name, mem, bw, bf16, fp8, nvlink, link):
    g = GPUS[name]
    assert (g.memory_gb, g.bandwidth_gbps, g.bf16_tflops, g.fp8_tflops, g.nvlink, g.intra_node_gbps) == (
        mem, bw, bf16, fp8, nvlink, link)


def test_get_gpu_is_case_insensitive_and_none_for_unknown():
    assert get_gpu("h100") is GPUS["H100"]
    assert get_gpu("a100-80gb") is GPUS["A100-80GB"]
    assert get_gpu("TPU-v5") is None


def test_visible_memory_is_what_cuda_reports():
    # HBM parts report about the binary size; GDDR parts with ECC lose ~1/16.
    assert visible_memory_bytes(GPUS["H100"]) / 2**30 == pytest.approx(79.1)
    assert visible_memory_bytes(GPUS["L4"]) < 24e9
    for name in VISIBLE_MEMORY_GIB:
        g = GPUS[name]
        assert 0.9 * g.memory_gb * 1e9 < visible_memory_bytes(g) < 1.08 * g.memory_gb * 1e9, name


def test_required_models_present_lowercase():
    for name in REQUIRED_MODELS:
        assert name in MODELS, name
    for key, m in MODELS.items():
        assert key == m.name == key.lower()
        assert m.heads % m.kv_heads == 0
        assert m.layers > 0 and m.params > 1e9


@pytest.mark.parametrize(
    "name, layers, hidden, heads, kv_heads, params, vocab, ctx",
    [
        ("llama-2-7b", 32, 4096, 32, 32, 6.74e9, 32000, 4096),
        ("llama-2-70b", 80, 8192, 64, 8, 68.98e9, 32000, 4096),
        ("llama-3.1-8b", 32, 4096, 32, 8, 8.03e9, 128256, 131072),
        ("llama-3.1-70b", 80, 8192, 64, 8, 70.55e9, 128256, 131072),
        ("qwen3-32b", 64, 5120, 64, 8, 32.76e9, 151936, 40960),
        ("phi-4", 40, 5120, 40, 10, 14.66e9, 100352, 16384),
    ],
)
def test_model_facts(name, layers, hidden, heads, kv_heads, params, vocab, ctx):
    m = MODELS[name]
    assert (m.layers, m.hidden_size, m.heads, m.kv_heads, m.head_dim, m.params, m.vocab_size, m.max_context) == (
        layers, hidden, heads, kv_heads, 128, params, vocab, ctx)


def test_llama_param_counts_match_the_config_formula():
    # P = 2 V h + L [h d (2 n_q + 2 n_kv) + 3 h I + 2 h] + h   (vllm.md s5), I from config.json
    def count(m, inter):
        return (2 * m.vocab_size * m.hidden_size
                + m.layers * (m.hidden_size * m.head_dim * (2 * m.heads + 2 * m.kv_heads)
                              + 3 * m.hidden_size * inter + 2 * m.hidden_size) + m.hidden_size)

    for name, inter in [("llama-2-7b", 11008), ("llama-2-13b", 13824), ("llama-2-70b", 28672),
                        ("llama-3.1-8b", 14336), ("llama-3.1-70b", 28672), ("mistral-7b", 14336)]:
        m = MODELS[name]
        assert count(m, inter) == pytest.approx(m.params, rel=0.005), name


@pytest.mark.parametrize(
    "name, kv_bytes",
    [("llama-3.1-8b", 131072), ("llama-3.1-70b", 327680), ("qwen3-32b", 262144), ("mistral-7b", 131072),
     ("mixtral-8x7b", 131072), ("phi-4", 204800), ("llama-2-7b", 524288)],
)
def test_kv_bytes_per_token_match_vllm_notes(name, kv_bytes):
    assert kv_bytes_per_token_per_gpu(MODELS[name], 1, "bf16") == kv_bytes


def test_moe_active_params():
    mix = MODELS["mixtral-8x7b"]
    assert mix.params == 46.7e9 and mix.active_params == 12.9e9 and mix.active == 12.9e9
    assert MODELS["llama-3.1-8b"].active == 8.03e9


def test_get_model_by_name_or_hf_id():
    assert get_model("Llama-3.1-8B") is MODELS["llama-3.1-8b"]
    assert get_model("meta-llama/Llama-3.1-70B-Instruct") is MODELS["llama-3.1-70b"]
    assert get_model("no-such-model") is None
    for target in ALIASES.values():
        assert target in MODELS
