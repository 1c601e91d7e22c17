"""One Ray bootstrap for every deploy path (hetinfra.compile.ray): the SkyPilot task's run, the Pulumi
VMs' serve.sh and the Kubernetes pods run, under bash with stub commands, the same commands on the
head and on a worker, and fail the same way when a node does not join."""

from __future__ import annotations

import os
import shutil

import pytest

from hetinfra.compile.kubernetes.workloads import workload
from hetinfra.compile.ray import RayNode, ray_pipeline_script
from hetinfra.compile.skypilot import task_config
from hetinfra.facts import RAY_JOIN_TIMEOUT_S, RAY_POLL_S
from tests.compile.test_skypilot import A100_AZ_PP2, _run_bash, _stub_bin

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="bash not available")
HEAD, WORKER = "10.0.0.5", "10.0.0.6"


def _scripts(rank: int) -> dict[str, tuple[str, dict]]:
    """Path -> (the script node ``rank`` runs, the environment its platform gives it)."""
    from hetinfra.stacks.startup import serve_script

    lws = workload("chat", "ns", A100_AZ_PP2, "llama-70b")["spec"]["leaderWorkerTemplate"]
    pod = lws["leaderTemplate" if rank == 0 else "workerTemplate"]["spec"]["containers"][0]
    me = HEAD if rank == 0 else WORKER
    return {
        "skypilot": (task_config(A100_AZ_PP2)["run"],
                     {"SKYPILOT_NODE_RANK": str(rank), "SKYPILOT_NODE_IPS": f"{HEAD}\n{WORKER}"}),
        # hostname -I is stubbed below to print this node's address; find-head.sh gives workers HEAD_IP
        "vm": (serve_script(A100_AZ_PP2), {"NODE_RANK": str(rank), "STUB_IP": me,
                                           **({"HEAD_IP": HEAD} if rank else {})}),
        "kubernetes": (pod["command"][2], {"POD_IP": me, "LWS_LEADER_ADDRESS": HEAD}),
    }


def _calls(script: str, env: dict, tmp_path, nodes_alive: int) -> tuple[int, list[str], str]:
    b = _stub_bin(tmp_path, nodes_alive)
    (b / "hostname").write_text('#!/bin/bash\necho "$STUB_IP"\n')
    (b / "hostname").chmod(0o755)
    log = tmp_path / "log"
    out = _run_bash(script, {"PATH": f"{b}{os.pathsep}{os.environ['PATH']}", "STUB_LOG": str(log),
                             "MODEL_ID": "m", "VLLM_API_KEY": "k", **env}, tmp_path)
    return out.returncode, (log.read_text().splitlines() if log.exists() else []), out.stderr


@pytest.mark.parametrize("rank", [0, 1])
def test_every_path_runs_the_same_commands(rank, tmp_path):
    seen = {}
    for path, (script, env) in _scripts(rank).items():
        (tmp_path / path).mkdir()
        code, calls, err = _calls(script, env, tmp_path / path, A100_AZ_PP2.num_nodes)
        assert code == 0, (path, err)
        seen[path] = calls
    assert seen["skypilot"] == seen["vm"] == seen["kubernetes"]
    first, last = seen["vm"][0], seen["vm"][-1]
    if rank == 0:
        assert first.startswith(f"ray start --head --port=6379 --dashboard-port=8265 --disable-usage-stats "
                                f"--num-gpus=4 --node-ip-address={HEAD} --dashboard-agent-listen-port=52366")
        assert last.startswith("vllm serve m ")
    else:
        assert first == f"ray health-check --address={HEAD}:6379"
        assert last == (f"ray start --address={HEAD}:6379 --disable-usage-stats --num-gpus=4 "
                        f"--node-ip-address={WORKER} --dashboard-agent-listen-port=52366 --block")


def test_every_head_gives_up_when_a_node_does_not_join(tmp_path):
    tries = f"seq 1 {RAY_JOIN_TIMEOUT_S // RAY_POLL_S}"
    for path, (script, env) in _scripts(0).items():
        assert tries in script, path
        (tmp_path / path).mkdir()
        quick = script.replace(tries, "seq 1 2").replace(f"sleep {RAY_POLL_S}", "true")
        code, calls, err = _calls(quick, env, tmp_path / path, 1)
        assert code == 1 and f"only 1 of 2 nodes joined within {RAY_JOIN_TIMEOUT_S} s" in err, path
        assert not any(c.startswith("vllm") for c in calls), path


def test_a_role_is_head_worker_or_chosen_by_rank():
    node = RayNode("$IP", "$HEAD", "$RANK")
    both = ray_pipeline_script(A100_AZ_PP2, node, "exec vllm serve m")
    assert 'if [ "$RANK" = "0" ]' in both
    head = ray_pipeline_script(A100_AZ_PP2, node, "exec vllm serve m", role="head")
    assert "exec vllm serve m\n" in head and "ray health-check" not in head and "$RANK" not in head
    with pytest.raises(ValueError, match="role must be"):
        ray_pipeline_script(A100_AZ_PP2, node, "x", role="leader")


def test_every_path_that_installs_ray_pins_click_the_same_way():
    """SkyPilot's setup and the Pulumi VMs' virtualenv install Ray beside the same click pin (the Ray
    CLI breaks with click 8.3.0/8.3.1); the container runtime brings its own Ray."""
    from hetinfra.facts import RAY_CLICK_PIN
    from hetinfra.stacks.startup import BootConfig, RuntimeConfig, startup_script

    assert f'"{RAY_CLICK_PIN}"' in task_config(A100_AZ_PP2)["setup"]
    for rank in range(A100_AZ_PP2.num_nodes):
        vm = startup_script(A100_AZ_PP2, rank=rank, runtime=RuntimeConfig(runtime="virtualenv"),
                            boot=BootConfig(fetch_secrets="true", find_head="true"))
        assert f'"ray[default]" "{RAY_CLICK_PIN}"' in vm
