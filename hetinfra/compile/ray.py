"""The Ray bootstrap of a multi-node pipeline replica: one script for every deploy path (the SkyPilot
task's ``run``, the Pulumi VMs' ``serve.sh``, the Kubernetes LeaderWorkerSet's pods).

Rank 0 starts Ray's head, waits until every node of the replica has joined (at most
``RAY_JOIN_TIMEOUT_S``, then fails with a message rather than serve a partial pipeline), then
``exec``s ``vllm serve``; every other rank waits for the head to answer, then ``exec``s a blocking
``ray start`` that joins it. The ports and the timeout, and why: hetinfra.facts. Flags on every
node: ``--node-ip-address`` (the private address the other nodes reach), ``--num-gpus`` (the GPUs
one node gives the pipeline), ``--dashboard-agent-listen-port`` (off SkyPilot's own agent port)
and ``--disable-usage-stats`` (no telemetry from a fleet). The paths differ only in where a node
learns its address, its head's address and its rank (:class:`RayNode`).

Text only: no import of Ray, SkyPilot or Pulumi.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from hetinfra.facts import RAY_DASHBOARD_AGENT_PORT, RAY_DASHBOARD_PORT, RAY_JOIN_TIMEOUT_S, RAY_POLL_S, RAY_PORT

__all__ = ["RAY_COUNT_NODES", "RayNode", "ray_pipeline_script"]

#: the shell command that prints how many Ray nodes are alive: the head waits on it before vllm serve
RAY_COUNT_NODES = ("python3 -c 'import ray; ray.init(logging_level=\"ERROR\"); "
                   "print(sum(1 for n in ray.nodes() if n[\"Alive\"]))' 2>/dev/null | tail -n1")


class Pipeline(Protocol):
    """What the script needs of a unit (a hetinfra.compile.unit.DeployedUnit)."""

    num_nodes: int  # nodes of one replica
    pp: int
    tp: int
    gpus_per_instance: int


@dataclass(frozen=True)
class RayNode:
    """Where a deploy path's node finds, as shell expressions, its own address, its head's and its
    rank in the replica (0: the head)."""

    node_ip: str
    head_ip: str
    rank: str


def _indent(text: str, pad: str) -> str:
    return "".join(pad + line if line else line for line in text.splitlines(keepends=True))


def _head(unit: Pipeline, serve: str, flags: str) -> str:
    n, tries = unit.num_nodes, RAY_JOIN_TIMEOUT_S // RAY_POLL_S
    return f"""\
ray start --head --port={RAY_PORT} --dashboard-port={RAY_DASHBOARD_PORT} {flags}
n=0
for i in $(seq 1 {tries}); do
  n=$({RAY_COUNT_NODES} || echo 0)
  [ "$n" -ge {n} ] 2>/dev/null && break
  echo "waiting for Ray nodes: $n/{n}"; sleep {RAY_POLL_S}
done
if ! [ "$n" -ge {n} ] 2>/dev/null; then
  echo "Ray: only $n of {n} nodes joined within {RAY_JOIN_TIMEOUT_S} s" >&2; exit 1
fi
{serve}"""


def _worker(flags: str) -> str:
    return f"""\
for i in $(seq 1 {RAY_JOIN_TIMEOUT_S // RAY_POLL_S}); do
  ray health-check --address="$RAY_ADDRESS" >/dev/null 2>&1 && break
  sleep {RAY_POLL_S}
done
exec ray start --address="$RAY_ADDRESS" {flags} --block
"""


def ray_pipeline_script(unit: Pipeline, node: RayNode, serve: str, *, role: str | None = None) -> str:
    """The bash script of one node of a multi-node pipeline replica of ``unit``. ``serve``: the head's
    serving lines (the last one ``exec vllm serve ...``); ``role``: ``head`` or ``worker`` for a path
    whose head and workers run different scripts (Kubernetes), None to choose by ``node.rank``."""
    if role not in (None, "head", "worker"):
        raise ValueError(f"role must be head, worker or None; got {role!r}")
    serve = serve if serve.endswith("\n") else serve + "\n"
    flags = (f"--disable-usage-stats --num-gpus={unit.gpus_per_instance} --node-ip-address=\"$NODE_IP\" "
             f"--dashboard-agent-listen-port={RAY_DASHBOARD_AGENT_PORT}")
    where = ("nodes (one stage per node" if unit.num_nodes == unit.pp
             else f"stages on {unit.num_nodes} nodes ({unit.pp // unit.num_nodes} per node")
    text = f"""\
# Pipeline of {unit.pp} {where}, TP={unit.tp} inside a node) over a user-space Ray
# cluster on port {RAY_PORT} (hetinfra.compile.ray). Rank 0 starts the head, waits for every node,
# then serves; the other ranks join Ray and stay in it.
set -euo pipefail
NODE_IP={node.node_ip}
HEAD_IP={node.head_ip}
export VLLM_HOST_IP="$NODE_IP" RAY_ADDRESS="$HEAD_IP:{RAY_PORT}"
"""
    if role == "head":
        return text + _head(unit, serve, flags)
    if role == "worker":
        return text + _worker(flags)
    return (text + f'if [ "{node.rank}" = "0" ]; then\n' + _indent(_head(unit, serve, flags), "  ")
            + "else\n" + _indent(_worker(flags), "  ") + "fi\n")
