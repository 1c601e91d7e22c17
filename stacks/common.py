"""What the three cloud fleets share: the secret document for the cloud's secret store, boot
scripts (which hold no secret), endpoint outputs, tags."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable, Optional

import pulumi

from hetinfra.stacks.fleet import FleetArgs, VMGroup, vm_name
from hetinfra.stacks.boot import SecretRef, fetch_secrets_script, find_head_script, find_peers_script
from hetinfra.stacks.gateway import fill_gateway, gateway_script
from hetinfra.stacks.startup import BootConfig, startup_script

@dataclass
class FleetSecrets:
    """Pulumi secret inputs: the API key vLLM requires and an optional Hugging Face token."""

    api_key: pulumi.Input[str]
    hf_token: Optional[pulumi.Input[str]] = None
    gateway_keys: Optional[pulumi.Input[str]] = None  # HETINFRA_API_KEY of the gateway's clients
    tls_cert: Optional[pulumi.Input[str]] = None
    tls_key: Optional[pulumi.Input[str]] = None


def secret_document(secrets: FleetSecrets) -> pulumi.Output[str]:
    """The fleet's secrets as one JSON document (a secret Output) for the cloud's secret store."""
    names = ("VLLM_API_KEY", "HF_TOKEN", "HETINFRA_API_KEY", "TLS_CERT", "TLS_KEY")
    values = (secrets.api_key, secrets.hf_token, secrets.gateway_keys, secrets.tls_cert, secrets.tls_key)
    doc = pulumi.Output.all(*values).apply(lambda v: json.dumps({k: x for k, x in zip(names, v) if x}, sort_keys=True))
    return pulumi.Output.secret(doc)


def boot_script(fu: VMGroup, rank: int, args: FleetArgs, ref: SecretRef, secrets: FleetSecrets,
                find_head: Optional[str] = None) -> str:
    """The VM's startup script: no secret in it, only where to read them (``ref``)."""
    keys = ("VLLM_API_KEY", "HF_TOKEN") if secrets.hf_token is not None else ("VLLM_API_KEY",)
    boot = BootConfig(fetch_secrets=fetch_secrets_script(ref, keys), find_head=find_head)
    return startup_script(fu.unit, rank=rank, runtime=args.runtime, boot=boot)


def node_script(fu: VMGroup, replica: int | None, rank: int, args: FleetArgs, ref: SecretRef,
                secrets: FleetSecrets, scope: str) -> str:
    """The boot script of node ``rank`` of a group (see ``VMGroup.groups``): a pipeline worker
    finds its replica's head group (``<unit>-r<replica>-n0``) with the VM's identity at every start
    (``scope``: AWS region, GCP project), so a replaced head is found again. A prefill/decode bundle
    across nodes is the other way round: its head (rank 0, the hop) finds the replica's other nodes."""
    if fu.unit.role_nodes:
        peers = [vm_name(fu.name, replica, k) for k in range(1, fu.unit.num_nodes)]
        return boot_script(fu, rank, args, ref, secrets, find_peers_script(args.cloud, peers, scope) if rank == 0 else None)
    head = vm_name(fu.name, replica, 0) if rank > 0 else None
    return boot_script(fu, rank, args, ref, secrets, find_head_script(args.cloud, head, scope) if head else None)


def build_units(args: FleetArgs, make_groups: Callable[[VMGroup], tuple[pulumi.Output, dict[str, dict]]]
                ) -> tuple[dict[str, list], dict[str, pulumi.Output], list[tuple[str, pulumi.Output]], dict[str, dict]]:
    """Create every unit's groups with ``make_groups(unit)``, which returns (the address of the unit's
    load balancer, a :func:`unit_output` member per group name). Returns (endpoints per unit, the
    cloud's name per group, (unit, address) of each load balancer: the gateway's backends, the
    ``units`` output)."""
    endpoints: dict[str, list] = {}
    groups: dict[str, pulumi.Output] = {}
    backends: list[tuple[str, pulumi.Output]] = []
    units: dict[str, dict] = {}
    for fu in args.units:
        address, members = make_groups(fu)
        endpoints[fu.name] = [pulumi.Output.concat("http://", address, f":{args.port}/v1")]
        groups.update({g: m["name"] for g, m in members.items()})
        backends.append((fu.name, address))
        units[fu.name] = unit_output(fu, members)
    return endpoints, groups, backends, units


def unit_output(fu: VMGroup, members: dict[str, dict], **extra) -> dict:
    """One unit's entry in the stack output ``units``, from which ``hetinfra status`` and ``replan``
    count its live replicas (hetinfra.deploy.drift): the planned replicas, nodes per replica, and
    the self-healing groups that carry its capacity. ``members``: per group name of
    ``VMGroup.groups``, ``resource`` (the Pulumi resource name), ``type`` (its type token),
    ``name`` (the cloud's name of the group) and what the cloud's API finds it by (GCP ``project``
    and ``zone``, Azure the ARM ``id``); each gets the group's ``replica`` (None: one group holds all
    the unit's replicas) and ``rank``."""
    return {"replicas": fu.unit.replicas, "nodes": fu.unit.num_nodes,
            "members": [dict(members[g], replica=r, rank=k) for r, k, g, _ in fu.groups], **extra}


def pick_image(args: FleetArgs, images: dict, role: str, found: pulumi.Input[str]) -> pulumi.Input[str]:
    """The image of ``role`` (hetinfra.compile.images): the id pinned for this region, else ``found``
    (the lookup's newest). Both are recorded in ``images`` (the fleet's part of the ``images``
    output, ``{region: {role: {"id", "latest"}}}``), so a newer image shows without being used."""
    pin = args.images.get(role)
    images.setdefault(args.region, {})[role] = {"id": pin or found, "latest": found}
    return pin or found


def field(obj, key: str):
    """A nested output's field: typed objects under the engine, plain dicts under mocks."""
    return obj[key] if isinstance(obj, dict) and key in obj else getattr(obj, key)


def tags(args: FleetArgs, fu: VMGroup, name: str) -> dict[str, str]:
    return {"Name": name, "hetinfra-service": args.service, "hetinfra-unit": fu.name,
            "hetinfra-model": fu.unit.service_model}


def gateway_user_data(args: FleetArgs, ref: SecretRef, heads: list[tuple[str, pulumi.Input[str]]]
                      ) -> pulumi.Output[str]:
    """The gateway VM's startup script: ``hetinfra gateway`` with one ``--endpoint`` per backend,
    ``(unit, address)``, at the fleet's vLLM port; its keys and TLS files come from the secret store."""
    text = gateway_script(args.plan, args.cloud, args.region, ref)
    units = [u for u, _ in heads]
    return pulumi.Output.all(*[ip for _, ip in heads]).apply(
        lambda v: fill_gateway(text, endpoints=[(u, f"http://{ip}:{args.port}/v1") for u, ip in zip(units, v)]))


def gateway_url(args: FleetArgs, public_ip: pulumi.Input[str]) -> pulumi.Output[str]:
    """The gateway's client URL: ``http(s)://<public IP>:<port>/v1``."""
    scheme = "https" if (args.gateway or {}).get("tls_cert") else "http"
    return pulumi.Output.concat(f"{scheme}://", public_ip, f":{args.gateway_port}/v1")


def gateway_tags(args: FleetArgs, name: str) -> dict[str, str]:
    return {"Name": name, "hetinfra-service": args.service, "hetinfra-role": "gateway"}
