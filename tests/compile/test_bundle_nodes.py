"""A prefill/decode bundle across the nodes of one placement group (hetinfra.compile.bundle_nodes): each
node's engines, ports and transport, the hop's view of the replica, and the two node scripts run by
bash on loopback as two process groups (the head with the hop, a decode node) with stand-in engines."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import replace

import httpx
import pytest

from hetinfra.compile.artifacts import sky_units
from hetinfra.compile.bundle import engines, node_script
from hetinfra.compile.bundle_nodes import TRANSPORT_ENVS, node_engines, peer_endpoints
from hetinfra.compile.unit import DeployedUnit
from hetinfra.document import Plan
from hetinfra.errors import InvalidInputError
from tests.compile.split_plan import UNIT, free_port_block, split_plan, wait_healthy
from tests.compile.test_bundle import REPO, _stub_vllm


def _unit(shape: str = "hetero") -> DeployedUnit:
    return sky_units(Plan.parse(split_plan(shape)), include_mixed=True)[0]


def test_each_node_runs_its_roles_share_on_its_own_gpu_with_the_rdma_transport():
    u = _unit("hetero")
    assert u.num_nodes == 2 and u.link == "efa"
    assert [u.node_instance_type(r) for r in (0, 1)] == ["p5en.48xlarge", "p4de.24xlarge"]
    head, decode = node_engines(u, 0), node_engines(u, 1)
    assert [e.role for e in head] == ["prefill", "prefill"] and [e.role for e in decode] == ["decode", "decode"]
    assert [e.gpus for e in decode] == [(0, 1, 2, 3), (4, 5, 6, 7)]  # each node numbers its own GPUs
    every = head + decode  # no two engines of a replica share a port or a NIXL side-channel port
    assert len({e.port for e in every}) == len({e.envs["VLLM_NIXL_SIDE_CHANNEL_PORT"] for e in every}) == 4
    assert all(e.envs["VLLM_NIXL_SIDE_CHANNEL_HOST"] == "$HETINFRA_NODE_IP" for e in every)
    assert all(TRANSPORT_ENVS["efa"].items() <= e.envs.items() for e in every)
    # the decode node's engine flags are its own GPU's (A100's chunked-prefill budget, not H200's)
    assert "--max-num-batched-tokens 8192" in head[0].command and "--max-num-batched-tokens 2048" in decode[0].command
    assert engines(u) == head  # the hop's node is the first prefill node
    assert peer_endpoints(u) == [(1, UNIT, decode[0].port), (1, UNIT, decode[1].port)]


def test_a_bundle_across_nodes_without_rdma_or_with_uneven_roles_is_not_a_unit():
    """A unit is judged by plan.json's own rules (hetinfra.document.bundle_shape), word for word."""
    from hetinfra.compile.unit import link_problem
    from hetinfra.document.bundle_shape import node_count_problem, spread_problem

    u = _unit("across")
    for change, why in (({"link": "tcp"}, link_problem("tcp")),
                        ({"role_nodes": (u.role_nodes[0], ("decode", 1, "p5en.48xlarge", "H200", 4))},
                         spread_problem([(2, 4, 1, 8), (2, 4, 1, 4)], "role_nodes")),
                        ({"nodes": 3}, f"nodes {node_count_problem([1, 1], 3)}")):
        with pytest.raises(ValueError) as err:
            replace(u, **change)
        assert str(err.value) == f"DeployedUnit {u.name!r}: {why}" and why
    plan = split_plan("across")
    plan["allocations"][0]["nodes_per_replica"], plan["allocations"][0]["instances"] = 3, 36
    with pytest.raises(InvalidInputError, match="nodes_per_replica is 3, but its bundle's roles run on 1\\+1"):
        Plan.parse(plan)  # hetinfra.document.bundle_shape: refused where plan.json is parsed


@pytest.mark.parametrize("cloud, itype, link", [("gcp", "a3-ultragpu-8g", "roce"),
                                                ("azure", "Standard_ND96isr_H100_v5", "infiniband")])
def test_apply_the_stacks_and_kubernetes_refuse_a_bundle_across_nodes_with_one_text(cloud, itype, link):
    """One refusal (bundle_nodes.across_nodes_refusal), whichever caller meets the bundle first: a
    caller that words its own fails here; and the clouds that may run one are the registry's others."""
    from hetinfra.catalog.interconnect import ACROSS_NODE_CLOUDS, ACROSS_NODES_REFUSED
    from hetinfra.compile.bundle_nodes import across_nodes_refusal
    from hetinfra.compile.kubernetes.workloads import workload
    from hetinfra.deploy.apply import path_of
    from hetinfra.facts import CLOUDS
    from hetinfra.stacks.fleet import fleets_for

    assert set(ACROSS_NODE_CLOUDS) == set(CLOUDS) - set(ACROSS_NODES_REFUSED) and "aws" in ACROSS_NODE_CLOUDS
    doc = split_plan("across")
    a = doc["allocations"][0]
    a.update(cloud=cloud, instance_type=itype)
    a["disaggregation"]["link"] = link
    plan = Plan.parse(doc)
    unit = sky_units(plan, include_mixed=True)[0]
    errors = {}
    for where, call in (("apply", lambda: path_of(plan.allocations[0], "pulumi", plan)),
                        ("stacks", lambda: fleets_for(plan, cloud)),
                        ("kubernetes", lambda: workload("pd", "hetinfra", replace(unit, alternates=()), "qwen32"))):
        with pytest.raises(InvalidInputError) as err:
            call()
        errors[where] = str(err.value)
    pulumi, kube = (str(across_nodes_refusal(unit.name, 2, link, cloud, t)) for t in ("pulumi", "kubernetes"))
    assert errors == {"apply": pulumi, "stacks": pulumi, "kubernetes": kube}
    assert ACROSS_NODES_REFUSED[cloud].pulumi in pulumi and "re-plan" in pulumi and "only on aws" in pulumi
    assert across_nodes_refusal(unit.name, 2, "efa", "aws", "pulumi") is None


def _start(script: str, env: dict, tmp_path) -> subprocess.Popen:
    return subprocess.Popen(["bash", "-c", script.replace("sleep 10", "sleep 0.2")], env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not available")
def test_two_nodes_serve_across_the_hop_and_a_dead_decode_node_stops_the_replica(tmp_path):
    """Two "nodes" on 127.0.0.1 as two process groups, each running its node script under bash: the
    decode node's stand-in engines, the head's prefill stand-ins and the real hop, which finds the
    decode node through HETINFRA_PEERS. A request takes both steps across the nodes; killing the
    decode node's whole session ends the head (its watch), so the replica stops answering. About
    5 s: three processes start, the hop waits for /health on both nodes."""
    # one engine per node (1P1D across the two nodes): the fewest processes that show both steps
    u = replace(_unit("hetero"), port=free_port_block(3), bundle=(("prefill", 1, 4), ("decode", 1, 4)))
    every = node_engines(u, 0) + node_engines(u, 1)
    bin_dir = _stub_vllm(tmp_path, {e.port: e.role for e in every})
    (tmp_path / "plan.json").write_text(u.hop_plan)
    hetinfra = f"{shlex.quote(sys.executable)} -m hetinfra.cli"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "VLLM_API_KEY": "k-node",
           "PYTHONPATH": str(REPO), "HETINFRA_NODE_IP": "127.0.0.1", "HETINFRA_PEERS": "127.0.0.1",
           "MODEL_ID": u.source}
    env.pop("HETINFRA_API_KEY", None)
    decode = _start(node_script(u, hetinfra, str(tmp_path / "plan.json"), rank=1), env, tmp_path)
    head = _start(node_script(u, hetinfra, str(tmp_path / "plan.json"), rank=0), env, tmp_path)
    try:
        url = f"http://127.0.0.1:{u.port}"
        wait_healthy(url, 30, head, decode)
        body = {"model": "qwen32", "prompt": "x " * 200, "max_tokens": 8}
        got = httpx.post(url + "/v1/completions", json=body, headers={"Authorization": "Bearer k-node"}, timeout=10)
        assert got.status_code == 200, got.text
        assert got.json()["prefilled_by"].startswith("prefill-")
        stats = [httpx.get(f"http://127.0.0.1:{e.port}/stats", timeout=5).json() for e in node_engines(u, 1)]
        assert sum(s["with_kv"] for s in stats) == 1  # the decode node got the prefill's KV parameters
        os.killpg(decode.pid, signal.SIGKILL)  # the decode node dies whole
        _, err = head.communicate(timeout=20)  # bounded: 3 missed polls of 0.2 s, then the head ends
        assert head.returncode == 1
        assert "a peer node of the bundle stopped answering" in err
    finally:
        for node in (head, decode):
            try:  # each node's whole session, whatever outlived it
                os.killpg(node.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if node.poll() is None:
                node.wait(timeout=5)


def _shapes():
    """Every bundle across nodes on 8-GPU nodes: per role, engines x TP filling n nodes evenly
    (engines per node x TP <= 8), 1..3 nodes per role, the decode role on the same or another type."""
    for p_tp in (1, 2, 4, 8):
        for d_tp in (1, 2, 4, 8):
            for p_nodes in (1, 2):
                for d_nodes in (1, 3):
                    for p_per in range(1, 8 // p_tp + 1):
                        for d_per in range(1, 8 // d_tp + 1, 2):
                            yield (p_per * p_nodes, p_tp, p_nodes), (d_per * d_nodes, d_tp, d_nodes)


def test_every_shape_across_nodes_lays_out_whole_replicas_each_engine_once():
    """Property: on every node the engines take distinct GPUs of that node; across the replica every
    engine has its own port (none the hop's) and NIXL port; the hop's endpoints (its own node's and
    its peers') name every engine of the replica once, under its role."""
    base = _unit("across")
    count = 0
    for (pe, ptp, pn), (de, dtp, dn) in _shapes():
        u = replace(base, bundle=(("prefill", pe, ptp), ("decode", de, dtp)), nodes=pn + dn,
                    role_nodes=(("prefill", pn, "p5en.48xlarge", "H200", 8), ("decode", dn, "p4de.24xlarge", "A100-80GB", 8)))
        every = [(r, e) for r in range(u.num_nodes) for e in node_engines(u, r)]
        for r in range(u.num_nodes):
            gpus = [g for rank, e in every if rank == r for g in e.gpus]
            assert len(gpus) == len(set(gpus)) and max(gpus) < 8, (pe, ptp, pn, de, dtp, dn, r)
        ports = [e.port for _, e in every]
        assert len(set(ports)) == len(every) == pe + de and u.port not in ports
        assert len({e.envs["VLLM_NIXL_SIDE_CHANNEL_PORT"] for _, e in every}) == len(every)
        own = [e for e in engines(u)]
        reached = [(UNIT + "/prefill" if e.role == "prefill" else UNIT, e.port) for e in own] + \
            [(key, port) for _, key, port in peer_endpoints(u)]
        assert sorted(reached) == sorted((UNIT + "/prefill" if e.role == "prefill" else UNIT, e.port) for _, e in every)
        count += 1
    assert count > 100
