"""The engine module (hetinfra.compile.engine) and the unit's vocabulary (hetinfra.compile.unit): what a
unit serves, and the one vLLM command line every target runs."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from hetinfra.compile.engine import adapter_flags, vllm_serve_command
from hetinfra.compile.unit import LORA_RANKS, Adapter, DeployedUnit, Serves

REPO = Path(__file__).resolve().parents[2]


def unit(**kw) -> DeployedUnit:
    base = dict(name="chat-aws-us-east-1-g6e-xlarge", service_model="chat", source="org/base", cloud="aws",
                region="us-east-1", instance_type="g6e.xlarge", gpu="L40S", gpus_per_instance=1, tp=1, pp=1,
                engines_per_instance=1, replicas=2, spot=False, precision="bf16", max_model_len=4096)
    return DeployedUnit(**{**base, **kw})


def test_a_unit_says_what_it_serves():
    u = unit()
    assert u.serves == Serves("chat", "org/base", (), "colocated")
    assert u.serves.names() == ("chat",)
    tuned = unit(adapters=[Adapter("chat-legal", "org/legal-lora", 16)])
    assert tuned.serves.names() == ("chat", "chat-legal") and isinstance(tuned.adapters, tuple)


def test_without_adapters_the_command_line_is_as_before():
    assert adapter_flags(unit().serves) == []
    assert "lora" not in vllm_serve_command(unit())


def test_adapters_become_vllms_lora_flags():
    u = unit(adapters=(Adapter("a", "org/a", 8), Adapter("b", "org/b", 20)))
    flags = adapter_flags(u.serves)
    assert flags == ["--enable-lora", "--max-loras", "2", "--max-lora-rank", "32", "--lora-modules", "a=org/a", "b=org/b"]
    line = vllm_serve_command(u)
    assert " ".join(flags) in line and line.index("--enable-lora") < line.index("--host")


def test_fewer_slots_than_adapters_keep_the_rest_in_host_memory():
    adapters = tuple(Adapter(f"a{i}", f"org/a{i}", 16) for i in range(5))
    flags = adapter_flags(unit(adapters=adapters, max_loras=2).serves)
    assert flags[:7] == ["--enable-lora", "--max-loras", "2", "--max-lora-rank", "16", "--max-cpu-loras", "5"]
    assert flags[-5:] == [f"a{i}=org/a{i}" for i in range(5)]
    assert "--max-cpu-loras" not in adapter_flags(unit(adapters=adapters, max_loras=8).serves)


@pytest.mark.parametrize("change, message", [
    (dict(role="router"), "role must be one of colocated, prefill, decode"),
    (dict(adapters=(Adapter("a", "org/a", LORA_RANKS[-1] + 1),)), "rank a positive integer up to 512"),
    (dict(adapters=(Adapter("a b", "org/a", 8),)), "without whitespace"),
])
def test_what_a_unit_cannot_serve_today_is_refused(change, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(unit(), **change)


def test_every_target_takes_the_engine_from_the_engine_module():
    """SkyPilot, the Pulumi stacks, Kubernetes and profile --launch import the image and the command line
    from hetinfra.compile.engine; none defines its own."""
    users = {"hetinfra/compile/skypilot.py", "stacks/startup.py", "hetinfra/compile/kubernetes/workloads.py",
             "hetinfra/cli/profile_launch.py"}
    engine_names = {"vllm_image", "vllm_serve_command", "serve_envs", "engine_flags", "vllm_pip_spec"}
    for rel in sorted(users):
        tree = ast.parse((REPO / rel).read_text())
        imported = {(node.module, alias.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    for alias in node.names}
        assert any(module == "hetinfra.compile.engine" for module, _ in imported), rel
        defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        assert not defined & engine_names, f"{rel} defines {defined & engine_names}: use hetinfra.compile.engine"
