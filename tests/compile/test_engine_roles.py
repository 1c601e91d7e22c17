"""Both roles' engines of a prefill/decode bundle (hetinfra.compile.engine.bundle_engines, role_flags):
vLLM's NixlConnector flag, one GPU slice, port and NIXL side-channel port per engine."""

from __future__ import annotations

import json
import shlex

import pytest

from hetinfra.compile.engine import KV_TRANSFER_CONFIG, bundle_engines, role_flags, vllm_serve_command
from hetinfra.compile.unit import DeployedUnit


def _unit(**kw) -> DeployedUnit:
    base = dict(name="qwen32-aws-us-east-1-p5en-48xlarge", service_model="qwen32", source="Qwen/Qwen3-32B-FP8",
                cloud="aws", region="us-east-1", instance_type="p5en.48xlarge", gpu="H200", gpus_per_instance=8,
                tp=4, pp=1, engines_per_instance=2, replicas=1, spot=False, precision="fp8", max_model_len=4600)
    return DeployedUnit(**{**base, **kw})


def test_a_colocated_engine_has_no_kv_transfer():
    assert role_flags(_unit().serves) == [] and "kv-transfer" not in vllm_serve_command(_unit())


def test_a_2p1d_node_runs_three_engines_on_disjoint_gpus():
    engines = bundle_engines(_unit(), [("prefill", 2, 2), ("decode", 1, 4)])
    assert [e.role for e in engines] == ["prefill", "prefill", "decode"]
    assert [e.gpus for e in engines] == [(0, 1), (2, 3), (4, 5, 6, 7)]
    assert len({e.port for e in engines}) == 3
    assert len({e.envs["VLLM_NIXL_SIDE_CHANNEL_PORT"] for e in engines}) == 3
    for e in engines:
        argv = shlex.split(e.command)
        cfg = json.loads(argv[argv.index("--kv-transfer-config") + 1])
        assert cfg == json.loads(KV_TRANSFER_CONFIG) and cfg["kv_connector"] == "NixlConnector"
        assert argv[argv.index("--tensor-parallel-size") + 1] == str(len(e.gpus))
        assert "--data-parallel-size" not in argv and argv[argv.index("--port") + 1] == str(e.port)


def test_a_bundle_larger_than_its_node_is_refused():
    with pytest.raises(ValueError, match="needs 12 GPUs"):
        bundle_engines(_unit(), [("prefill", 2, 4), ("decode", 1, 4)])
