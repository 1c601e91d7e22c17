"""One replica of a prefill/decode bundle as every target runs it (issue 37, point 5): one node, its
prefill and decode vLLM engines (:func:`hetinfra.compile.engine.bundle_engines`: NixlConnector, a GPU
slice, a port and a NIXL side-channel port each) and, in front of them on the unit's port, the
**hop**: ``hetinfra gateway`` over this node's engines only (``--endpoint UNIT/prefill=...`` for its
prefill engines, ``--endpoint UNIT=...`` for its decode ones), so the two-step request of
:mod:`hetinfra.gateway.prefill` and its failure handling (another prefill engine, else decode-only;
the decode step's retries) run on the node.

Why on the node and not in the service's gateway: the plan prices a one-node bundle's KV transfer
at the node's NVLink. A gateway in front of several replicas (SkyServe's load balancer, a
Kubernetes Service) would pair a prefill engine of one node with a decode engine of another, and
the KV would cross the network the plan did not price. With the hop on the node, the service's
gateway addresses a bundle like any unit (one endpoint per replica), and both roles scale together
at the planned ratio: a replica is the whole node.

The hop routes with the plan trimmed to its unit (:func:`hop_plan`: a few KB, so it fits a VM's boot
data) and asks clients for the engines' key (``HETINFRA_API_KEY`` = ``VLLM_API_KEY``): what reaches
the node's port needs the key the engines need. It starts once every engine answers ``/health``,
and the node stops (SkyServe, systemd or Kubernetes restart it) when any of its processes ends.

A bundle across nodes (plan.json ``disaggregation.roles[].nodes`` > 0: prefill nodes and decode
nodes, of one instance type or of two, in one placement group over RDMA) runs each node's engines
with the node's address as NIXL's side channel and the RDMA transport's settings, and the hop on the
first prefill node, which learns the other nodes' addresses at start (:mod:`hetinfra.compile.bundle_nodes`).
"""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING

from hetinfra.compile.bundle_nodes import (HEALTH_POLL_S, across_node_script, endpoint_key, engine_lines,
                                           hop_options, node_engines, ready_function, wait_lines)
from hetinfra.compile.engine import BundleEngine, bundle_engines
from hetinfra.compile.unit import DeployedUnit, link_problem
from hetinfra.document.bundle_shape import role_node
from hetinfra.errors import InvalidInputError

if TYPE_CHECKING:
    from hetinfra.document import Allocation, Plan

__all__ = ["HEALTH_POLL_S", "bundle_of", "endpoint_key", "engines", "hop_args", "hop_plan", "hop_install", "node_script",
           "role_nodes_of"]

def bundle_of(a: "Allocation") -> tuple[tuple[str, int, int], ...]:
    """The (role, engines, tp) of a split allocation, prefill first."""
    return tuple((r.role, r.engines, r.tp) for r in a.disaggregation.roles)


def role_nodes_of(a: "Allocation") -> tuple[tuple[str, int, str, str, int], ...]:
    """A bundle across nodes: per role (role, nodes, instance type, gpu, GPUs per node), a role's own
    instance type where plan.json names one (heterogeneous P/D), else the allocation's; () for a
    one-node bundle. Its roles' nodes add up to its nodes_per_replica (plan.json's parse checks it:
    hetinfra.document.bundle_shape); one without RDMA between its nodes is refused (exit 2)."""
    roles = a.disaggregation.roles
    if not any(r.nodes for r in roles):
        return ()
    why = link_problem(a.disaggregation.link)
    if why:
        raise InvalidInputError(f"{a.deployment_unit}: {why}",
                                hint="re-plan: a bundle across nodes needs EFA, InfiniBand or RoCE between them")
    return tuple((r.role, r.nodes, *role_node(r, a)) for r in roles)


def hop_plan(plan: "Plan", a: "Allocation") -> str:
    """The plan as the node's hop needs it: only ``a`` (its model, template and routing rows, each
    class wholly to ``a``; the model's classes ``a`` does not serve left unmet); compact JSON, keys sorted
    (the same plan gives the same text)."""
    rows = plan.routing.get(a.model) or {}
    routing = {a.model: {cls: [r.model_copy(update={"share": 1.0}) for r in rs if r.unit == a.unit]
                         for cls, rs in rows.items() if any(r.unit == a.unit for r in rs)}}
    # verification's record and the regions' rows concern the other units too; its $/h is the unit's, as every
    # plan's figures add up (hetinfra.document.consistency: the hop's `hetinfra gateway` reads it as a plan)
    cost = a.cost_usd_per_hour
    # the model's classes other units serve (an adapter's the bundle does not hold) are none of the hop's: its
    # plan leaves them unserved, as every class with demand is routed or unmet (the hop's gateway refused it)
    others = {f"{a.model}/{c.name}": c.rate_rps for m in plan.models if m.name == a.model for c in m.classes
              if c.rate_rps and c.name not in routing[a.model]}
    trimmed = plan.model_copy(update={
        "allocations": [a], "routing": routing, "cost_usd_per_hour": cost, "unmet_rps": others,
        "models": [m.model_copy(update={"cost_usd_per_hour": cost}) for m in plan.models if m.name == a.model],
        "templates": [t for t in plan.templates if t.id == a.template], "baselines": [], "warnings": [],
        "fidelity": None, "routing_by_origin": None})
    return json.dumps(trimmed.to_dict(), sort_keys=True, separators=(",", ":"))


def hop_install(venv: str) -> str:
    """The bash line that puts hetinfra (``$HETINFRA_PACKAGE``) in its own virtualenv at ``venv``, apart
    from vLLM's packages. Debian's python3 has no ``venv`` without python3-venv: installed then, with
    sudo where there is one (a VM's user) and without (the vLLM image runs as root, without sudo)."""
    sudo = "$(command -v sudo)"
    return (f"python3 -m venv {venv} || {{ {sudo} apt-get update -q && {sudo} apt-get install -y -q python3-venv "
            f"&& python3 -m venv {venv}; }}; {venv}/bin/pip install -q \"$HETINFRA_PACKAGE\"")


def engines(unit: DeployedUnit) -> list[BundleEngine]:
    """The engines of the node that runs the hop: ports from the unit's port + 1 up (the hop listens
    on the unit's port); a bundle across nodes: its first prefill node's (bundle_nodes.node_engines)."""
    return node_engines(unit, 0) if unit.role_nodes else bundle_engines(unit, list(unit.bundle),
                                                                         first_port=unit.port + 1)


def hop_args(unit: DeployedUnit, host: str = "127.0.0.1") -> list[str]:
    """The hop's ``hetinfra gateway PLAN`` options: the unit's port, this node's engines at ``host``
    (a bundle across nodes adds the other nodes' engines at start: bundle_nodes)."""
    return hop_options(unit, engines(unit), host)


def node_script(unit: DeployedUnit, hetinfra: str, plan_path: str, rank: int = 0) -> str:
    """The bash script of a bundle's node: every engine in the background, then (once each answers
    /health) the hop on the unit's port; the script ends, failing, when any of them ends.
    ``hetinfra``: the hetinfra executable; ``plan_path``: where :func:`hop_plan`'s text was written (both
    as the shell reads them: ``$HOME`` expands). A bundle across nodes: node ``rank``'s script
    (:func:`hetinfra.compile.bundle_nodes.across_node_script`)."""
    if unit.role_nodes:
        return across_node_script(unit, hetinfra, plan_path, rank)
    ports = " ".join(str(e.port) for e in engines(unit))
    hop = " ".join(shlex.quote(x) for x in hop_args(unit))
    return "\n".join([
        f"# prefill/decode bundle {'+'.join(f'{n}x{r}(TP{tp})' for r, n, tp in unit.bundle)} on this node; "
        f"the hop (hetinfra gateway) on port {unit.port} in front of it",
        "set -euo pipefail",
        "pids=()",
        'trap \'kill "${pids[@]}" 2>/dev/null || true\' EXIT',
        *engine_lines(engines(unit)),
        ready_function("127.0.0.1"),
        f"for port in {ports}; do",
        *(f"  {line}" for line in wait_lines('ready "$port"', "the engine on port $port")),
        "done",
        f'HETINFRA_API_KEY="$VLLM_API_KEY" {hetinfra} gateway {plan_path} {hop} &',
        "pids+=($!)",
        'wait -n "${pids[@]}" || true',
        'echo "hetinfra: a process of the bundle ended; stopping the node\'s others" >&2',
        "exit 1",
    ]) + "\n"
