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


def test_every_one_node_shape_lays_out_disjoint_gpus_ports_and_side_channels():
    """Property over every (x, a, y, b) the planner offers on an 8-GPU node (templates_pd._single_node):
    the engines take every GPU once, each engine its own port (none the hop's) and NIXL port, and the
    hop addresses each engine under its role."""
    from hetinfra.compile.bundle import engines, hop_args
    from hetinfra.plan.templates_pd import _single_node

    shapes = list(_single_node(8, [1, 2, 4, 8]))
    assert len(shapes) > 20
    for x, a, y, b in shapes:
        u = _unit(tp=b, engines_per_instance=y, bundle=(("prefill", x, a), ("decode", y, b)), hop_plan="{}",
                  hetinfra_package="hetinfra")
        es = engines(u)
        gpus = [g for e in es for g in e.gpus]
        assert sorted(gpus) == list(range(8)), (x, a, y, b)
        assert [e.role for e in es] == ["prefill"] * x + ["decode"] * y
        ports = [e.port for e in es]
        assert len(set(ports)) == len(es) and u.port not in ports
        assert len({e.envs["VLLM_NIXL_SIDE_CHANNEL_PORT"] for e in es}) == len(es)
        args = hop_args(u)
        targets = [args[i + 1] for i, v in enumerate(args) if v == "--endpoint"]
        assert sum(t.startswith(f"{u.name}/prefill=") for t in targets) == x and len(targets) == x + y


@pytest.mark.parametrize("bundle, message", [
    ((("decode", 1, 4), ("prefill", 1, 4)), "bundle must be"),
    ((("prefill", 1, 4), ("decode", 1, 2)), "must equal gpus_per_instance"),
])
def test_a_bundle_that_cannot_run_on_its_node_is_refused(bundle, message):
    with pytest.raises(ValueError, match=message):
        _unit(bundle=bundle, hop_plan="{}", hetinfra_package="hetinfra")
