"""What the three cloud fleets share: the secret document for the cloud's secret store, boot
scripts (which hold no secret), endpoint outputs, tags."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable, Optional

import pulumi

from hetinfra.stacks.fleet import FleetArgs, FleetUnit
from hetinfra.stacks.boot import SecretRef, fetch_secrets_script
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


def boot_script(fu: FleetUnit, rank: int, args: FleetArgs, ref: SecretRef, secrets: FleetSecrets,
                find_head: Optional[str] = None) -> str:
    """The VM's startup script: no secret in it, only where to read them (``ref``)."""
    keys = ("VLLM_API_KEY", "HF_TOKEN") if secrets.hf_token is not None else ("VLLM_API_KEY",)
    boot = BootConfig(fetch_secrets=fetch_secrets_script(ref, keys), find_head=find_head)
    return startup_script(fu.unit, rank=rank, runtime=args.runtime, boot=boot)


def static_head(ip: str) -> str:
    """find-head.sh for clouds whose head VM has a fixed private address known to the stack."""
    return f"#!/bin/bash\necho HEAD_IP={ip} > /etc/hetinfra/head.env\n"


def user_data(fu: FleetUnit, rank: int, args: FleetArgs, secrets: FleetSecrets, ref: SecretRef,
              head_ip: Optional[pulumi.Input[str]] = None) -> pulumi.Output[str]:
    """Per-VM startup script (single VMs: GCP, Azure); a worker's head lookup is the head's IP."""
    if rank == 0:
        return pulumi.Output.from_input(boot_script(fu, rank, args, ref, secrets))
    return pulumi.Output.from_input(head_ip).apply(lambda ip: boot_script(fu, rank, args, ref, secrets, static_head(ip)))


def build_units(args: FleetArgs, make_vm: Callable[[FleetUnit, int, int, str, Optional[pulumi.Output]], tuple]
                ) -> tuple[dict[str, list], dict[str, pulumi.Output], list[tuple[str, pulumi.Output]]]:
    """Create every VM with ``make_vm(unit, replica, rank, name, head_private_ip)``, which returns
    ``(resource, private_ip, public_ip)``; workers of a pipeline get their head's private IP.
    Returns (endpoints per unit, VM id per VM name, (unit, private IP) of every replica's head: the
    gateway's backends)."""
    endpoints: dict[str, list] = {}
    vms: dict[str, pulumi.Output] = {}
    backends: list[tuple[str, pulumi.Output]] = []
    for fu in args.units:
        heads: dict[int, tuple] = {}
        for replica, rank, name in fu.vm_names:
            head_ip = heads[replica][1] if rank > 0 else None
            res, private_ip, public_ip = make_vm(fu, replica, rank, name, head_ip)
            vms[name] = res.id
            if rank == 0:
                heads[replica] = (res, private_ip, public_ip)
                backends.append((fu.name, private_ip))
                endpoints.setdefault(fu.name, []).append(
                    pulumi.Output.concat("http://", public_ip, f":{args.port}/v1"))
    return endpoints, vms, backends


def unit_output(fu: FleetUnit, members: list[dict], **extra) -> dict:
    """One unit's entry in the stack output ``units``, from which ``hetinfra status`` and ``replan``
    count its live replicas after ``pulumi refresh`` (hetinfra.deploy.drift): the planned replicas,
    nodes per replica, and the resources that carry its capacity (``members``: ``resource`` is the
    Pulumi resource name, ``type`` its type token; ``replica`` None for a group that holds all the
    unit's replicas, else the replica and ``rank`` of the one VM or one-VM group)."""
    return {"replicas": fu.unit.replicas, "nodes": fu.unit.num_nodes, "members": members, **extra}


def vm_units(args: FleetArgs, vm_type: str) -> dict[str, dict]:
    """The ``units`` output of a fleet of single VMs (the names :func:`build_units` gives them)."""
    return {fu.name: unit_output(fu, [{"resource": name, "type": vm_type, "replica": r, "rank": k}
                                      for r, k, name in fu.vm_names]) for fu in args.units}


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


def tags(args: FleetArgs, fu: FleetUnit, name: str) -> dict[str, str]:
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
    g = args.gateway or {}
    scheme = "https" if g.get("tls_cert") else "http"
    return pulumi.Output.concat(f"{scheme}://", public_ip, f":{int(g.get('port', 8080))}/v1")


def gateway_tags(args: FleetArgs, name: str) -> dict[str, str]:
    return {"Name": name, "hetinfra-service": args.service, "hetinfra-role": "gateway"}
