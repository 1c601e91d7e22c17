"""A prefill/decode bundle across the nodes of one placement group (issue 37, point 5): what each node
of one replica runs, on every target.

Node ranks put the prefill nodes first, then the decode nodes (``DeployedUnit.role_nodes``; the roles
may run different instance types: heterogeneous P/D). Every node runs its role's engines (an even
share of the role's engines, consecutive GPUs each) with NixlConnector, NIXL's side channel announced
at the node's own address (``$HETINFRA_NODE_IP``) so the other role's engines can reach it, and the
RDMA transport's settings (:data:`TRANSPORT_ENVS`). Ports run on across the replica's nodes (node
``r``'s engines after those of nodes ``< r``), so no two engines of a replica share a port or a NIXL
side-channel port, on one host (loopback tests) or many.

Rank 0, the first prefill node, is the replica's head: the only node the service's gateway (or the
cloud's load balancer, SkyServe, a Kubernetes Service) addresses. It runs the hop (``hetinfra
gateway`` limited to the replica's engines, :mod:`hetinfra.compile.bundle`) on the unit's port, with
its own engines at 127.0.0.1 and every other node's engines at the addresses in
``$HETINFRA_PEERS`` (ranks 1.., in order; each target fills it at the head's start: a Pulumi VM's
find-peers lookup, SkyPilot's ``SKYPILOT_NODE_IPS``, a LeaderWorkerSet's worker names). The head
waits (bounded) for every peer engine's ``/health`` before it serves, then watches them: a peer
engine that misses :data:`PEER_MISSES` polls in a row ends the head, so the replica stops answering
(its load balancer's health check marks it; systemd, SkyServe or Kubernetes restart it, and the
restarted head looks the peers up again). A replica is the group of nodes; it scales as one unit.

The transport settings follow vLLM's NixlConnector usage guide (v0.12.0, "Transport Configuration":
UCX is NIXL's default backend; ``UCX_TLS=all``, ``UCX_NET_DEVICES=all``; NCCL's variables do not
apply) and, on EFA, libfabric's EFA provider (NIXL's libfabric backend page; Dynamo's KV-cache
transfer page: UCX over EFA's SRD is the tested path); llm-d's RDMA page says NIXL runs over
InfiniBand, RoCE and EFA alike.
"""

from __future__ import annotations

import shlex

from hetinfra.catalog.interconnect import ACROSS_NODE_CLOUDS, ACROSS_NODES_REFUSED
from hetinfra.compile.engine import INITIAL_DELAY_SINGLE_NODE_S, BundleEngine, bundle_engines
from hetinfra.compile.unit import DeployedUnit
from hetinfra.errors import InvalidInputError

__all__ = ["EFA_INTERFACES", "HEALTH_POLL_S", "NODE_IP", "across_nodes_refusal", "endpoint_key", "engine_lines", "hop_options",
           "PEERS", "PEER_MISSES", "READY_AT", "TRANSPORT_ENVS", "across_node_script", "node_engines", "peer_endpoints",
           "ready_function", "wait_lines"]

#: how often a node script asks an engine's /health while it starts (and the head its peers' after)
HEALTH_POLL_S = 10
#: the node's own address (VMs: ``hostname -I``'s first; Kubernetes: the pod IP), NIXL's side-channel host
NODE_IP = "HETINFRA_NODE_IP"
#: the head's view of the replica's other nodes: their addresses (or DNS names), ranks 1.. in order
PEERS = "HETINFRA_PEERS"
#: consecutive missed /health polls of a peer engine after which the head stops the replica
PEER_MISSES = 3
#: EFA network cards of an instance type, one EFA interface each (AWS EC2 user guide, "Maximize network
#: bandwidth on Amazon EC2 instances with multiple network cards": P5/P5e up to 32, G6e up to 4; the
#: other types' "network cards" on their instance-type pages); a type not listed: one
EFA_INTERFACES: dict[str, int] = {"p5.48xlarge": 32, "p5e.48xlarge": 32, "p5en.48xlarge": 16, "p6-b200.48xlarge": 8,
                  "p4d.24xlarge": 4, "p4de.24xlarge": 4, "g6e.48xlarge": 4}
_UCX = {"UCX_TLS": "all", "UCX_NET_DEVICES": "all"}
#: the KV transfer's settings per RDMA network (sources in the module's docstring)
TRANSPORT_ENVS = {
    "efa": {**_UCX, "FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1"},
    "infiniband": dict(_UCX),
    "roce": dict(_UCX),
}


def across_nodes_refusal(name: str, nodes: int, link: str, cloud: str, target: str) -> InvalidInputError | None:
    """Why ``target`` (``pulumi``: the cloud's stack; ``kubernetes``: its managed Kubernetes) cannot place
    bundle ``name``'s ``nodes`` nodes together over ``link`` on ``cloud`` (None: it can), as the error
    apply, the stacks and the LeaderWorkerSet compiler raise alike (the reasons:
    hetinfra.catalog.interconnect.ACROSS_NODES_REFUSED)."""
    refused = ACROSS_NODES_REFUSED.get(cloud)
    if refused is None:
        return None
    where = "the Pulumi stacks" if target == "pulumi" else "Kubernetes"
    return InvalidInputError(
        f"{name} is a prefill/decode bundle across {nodes} nodes over {link}, which {where} on {cloud} cannot "
        f"place as planned: {getattr(refused, target)}",
        hint=f"re-plan: the planner offers bundles across nodes only on {', '.join(ACROSS_NODE_CLOUDS)} "
             "(one-node bundles deploy everywhere)")


def endpoint_key(unit: DeployedUnit, role: str) -> str:
    """The hop's ``--endpoint`` key of an engine of ``role``: prefill engines are the unit's
    ``/prefill`` group (gateway.prefill), decode engines the unit itself."""
    return f"{unit.name}/prefill" if role == "prefill" else unit.name


def hop_options(unit: DeployedUnit, es: list[BundleEngine], host: str = "127.0.0.1") -> list[str]:
    """The hop's ``hetinfra gateway PLAN`` options: the unit's port, the engines ``es`` at ``host``."""
    args = ["--host", "0.0.0.0", "--port", str(unit.port), "--no-demand-log", "--reload-interval-s", "0"]
    for e in es:
        args += ["--endpoint", f"{endpoint_key(unit, e.role)}=http://{host}:{e.port}/v1"]
    return args


def engine_lines(es: list[BundleEngine], with_gpus: bool = True) -> list[str]:
    """Bash lines that start ``es`` in the background, each pid in ``pids``."""
    lines = []
    for e in es:
        envs = {k: v for k, v in e.envs.items() if with_gpus or k != "CUDA_VISIBLE_DEVICES"}
        lines += [f"# {e.role} engine on GPU(s) {','.join(map(str, e.gpus))}, port {e.port}",
                  " ".join(f"{k}={v}" for k, v in envs.items()) + f" {e.command} &", "pids+=($!)"]
    return lines


def _per_node(unit: DeployedUnit, rank: int) -> tuple[str, int, int]:
    """(role, engines on node ``rank``, tp) of a bundle across nodes."""
    role, nodes = unit.node_role(rank)[:2]
    _, engines, tp = next(r for r in unit.bundle if r[0] == role)
    return role, engines // nodes, tp


def node_engines(unit: DeployedUnit, rank: int) -> list[BundleEngine]:
    """The engines of node ``rank``: its role's share, on the node's own GPUs, ports and NIXL ports
    after the earlier nodes' engines, the side channel at ``$HETINFRA_NODE_IP``."""
    before = sum(_per_node(unit, r)[1] for r in range(rank))
    role, engines, tp = _per_node(unit, rank)
    _, _, itype, gpu, gpus = unit.node_role(rank)
    return bundle_engines(unit, [(role, engines, tp)], first_port=unit.port + 1 + before, first_index=before,
                          nixl_host=f"${NODE_IP}", node=(itype, gpu, gpus), extra_envs=TRANSPORT_ENVS[unit.link])


def peer_endpoints(unit: DeployedUnit) -> list[tuple[int, str, int]]:
    """(rank, hop endpoint key, port) of every engine on the nodes other than the head."""
    return [(r, endpoint_key(unit, e.role), e.port) for r in range(1, unit.num_nodes) for e in node_engines(unit, r)]


def ready_function(host: str | None = None) -> str:
    """The bash function a node script probes an engine with: ``ready_at HOST PORT`` succeeds when the
    engine at HOST:PORT answers /health within 5 s; with ``host`` fixed, ``ready PORT``."""
    if host is None:
        name, url, args = "ready_at", '"http://%s:%s/health" % tuple(sys.argv[1:3])', '"$1" "$2"'
    else:
        name, url, args = "ready", f'"http://{host}:%s/health" % sys.argv[1]', '"$1"'
    return f"{name}() {{ python3 -c 'import sys, urllib.request; urllib.request.urlopen({url}, timeout=5)' {args} >/dev/null 2>&1; }}"


#: ``ready_at HOST PORT`` (:func:`ready_function`)
READY_AT = ready_function()


def wait_lines(probe: str, what: str) -> list[str]:
    """Bash lines that wait, bounded by the engines' start-up allowance, until ``probe`` (a
    :func:`ready_function` call) succeeds, else end the script naming ``what`` did not answer."""
    tries = INITIAL_DELAY_SINGLE_NODE_S // HEALTH_POLL_S
    return [f"for _ in $(seq 1 {tries}); do {probe} && break; sleep {HEALTH_POLL_S}; done",
            f"{probe} || {{ echo \"hetinfra: {what} did not answer /health in {INITIAL_DELAY_SINGLE_NODE_S} s\" >&2; exit 1; }}"]


def _wait_engines(targets: list[tuple[str, int]], what: str) -> list[str]:
    """Wait for each (host expression, port) to answer /health."""
    return [line for host, port in targets for line in wait_lines(f"ready_at {host} {port}", f"{what} engine {host}:{port}")]


def _head_lines(unit: DeployedUnit, hetinfra: str, plan_path: str) -> list[str]:
    """The head's part after its own engines: find the peers, wait for them, the hop, the watch."""
    peers = peer_endpoints(unit)
    targets = [(f'"${{peers[{r - 1}]}}"', port) for r, _, port in peers]
    hop = " ".join(shlex.quote(x) for x in hop_options(unit, node_engines(unit, 0)))
    extra = " ".join(f'--endpoint "{key}=http://${{peers[{r - 1}]}}:{port}/v1"' for r, key, port in peers)
    checks = " && ".join(f"ready_at {h} {p}" for h, p in targets)
    return [
        f'read -r -a peers <<< "${{{PEERS}:-}}"',
        f'[ "${{#peers[@]}}" -eq {unit.num_nodes - 1} ] || {{ echo "hetinfra: {PEERS} must hold the addresses of '
        f'this replica\'s {unit.num_nodes - 1} other node(s) (ranks 1..{unit.num_nodes - 1}); got \'${{{PEERS}:-}}\'" >&2; exit 1; }}',
        *_wait_engines(targets, "the peer"),
        f'HETINFRA_API_KEY="$VLLM_API_KEY" {hetinfra} gateway {plan_path} {hop} {extra} &',
        "pids+=($!)",
        "# the watch: a peer engine that misses its /health this many polls in a row stops the replica",
        f"( misses=0; while [ \"$misses\" -lt {PEER_MISSES} ]; do sleep {HEALTH_POLL_S}; "
        f"if {checks}; then misses=0; else misses=$((misses + 1)); fi; done; "
        "echo \"hetinfra: a peer node of the bundle stopped answering /health; stopping its head\" >&2 ) &",
        "pids+=($!)",
    ]


def across_node_script(unit: DeployedUnit, hetinfra: str, plan_path: str, rank: int) -> str:
    """Node ``rank``'s bash script: its engines, and on rank 0 the hop over the whole replica and the
    watch over the other nodes; it ends, failing, when any of its processes ends."""
    es = node_engines(unit, rank)
    role, _, itype, gpu, _ = unit.node_role(rank)
    shape = "+".join(f"{n}x{r}(TP{tp})" for r, n, tp in unit.bundle)
    lines = [
        f"# prefill/decode bundle {shape} across {unit.num_nodes} nodes over {unit.link}: node {rank} "
        f"({role}, {itype} {gpu})" + (f", the hop on port {unit.port}" if rank == 0 else ""),
        "set -euo pipefail",
        f'export {NODE_IP}="${{{NODE_IP}:-$(hostname -I | awk \'{{print $1}}\')}}"',
        "pids=()",
        'trap \'kill "${pids[@]}" 2>/dev/null || true\' EXIT',
        *engine_lines(es),
        READY_AT,
        *_wait_engines([("127.0.0.1", e.port) for e in es], "this node's"),
    ]
    if rank == 0:
        lines += _head_lines(unit, hetinfra, plan_path)
    return "\n".join([*lines, 'wait -n "${pids[@]}" || true',
                      'echo "hetinfra: a process of the bundle ended; stopping the node\'s others" >&2',
                      "exit 1"]) + "\n"
