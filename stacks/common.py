"""What the three cloud fleets share: secrets, user data per VM, endpoint outputs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import pulumi

from hetinfra.stacks.fleet import FleetArgs, FleetUnit
from hetinfra.stacks.gateway import fill_gateway, gateway_script
from hetinfra.stacks.startup import fill, startup_script

@dataclass
class FleetSecrets:
    """Pulumi secret inputs: the API key vLLM requires and an optional Hugging Face token."""

    api_key: pulumi.Input[str]
    hf_token: Optional[pulumi.Input[str]] = None
    gateway_keys: Optional[pulumi.Input[str]] = None  # HETINFRA_API_KEY of the gateway's clients
    tls_cert: Optional[pulumi.Input[str]] = None
    tls_key: Optional[pulumi.Input[str]] = None


def user_data(fu: FleetUnit, rank: int, args: FleetArgs, secrets: FleetSecrets,
              head_ip: Optional[pulumi.Input[str]] = None) -> pulumi.Output[str]:
    """The VM's startup script with secrets and the head IP filled in, as a secret Output."""
    text = startup_script(fu.unit, rank=rank, runtime=args.runtime, with_hf_token=secrets.hf_token is not None)
    out = pulumi.Output.all(secrets.api_key, secrets.hf_token, head_ip).apply(
        lambda v: fill(text, api_key=v[0], hf_token=v[1], head_ip=v[2]))
    return pulumi.Output.secret(out)


def build_units(args: FleetArgs, make_vm: Callable[[FleetUnit, int, int, str, Optional[pulumi.Output]], tuple]
                ) -> tuple[dict[str, list], dict[str, pulumi.Output]]:
    """Create every VM with ``make_vm(unit, replica, rank, name, head_private_ip)``, which returns
    ``(resource, private_ip, public_ip)``; workers of a pipeline get their head's private IP.
    Returns (endpoints per unit, VM id per VM name)."""
    endpoints: dict[str, list] = {}
    vms: dict[str, pulumi.Output] = {}
    for fu in args.units:
        heads: dict[int, tuple] = {}
        for replica, rank, name in fu.vm_names:
            head_ip = heads[replica][1] if rank > 0 else None
            res, private_ip, public_ip = make_vm(fu, replica, rank, name, head_ip)
            vms[name] = res.id
            if rank == 0:
                heads[replica] = (res, private_ip, public_ip)
                endpoints.setdefault(fu.name, []).append(
                    pulumi.Output.concat("http://", public_ip, f":{args.port}/v1"))
    return endpoints, vms


def field(obj, key: str):
    """A nested output's field: typed objects under the engine, plain dicts under mocks."""
    return obj[key] if isinstance(obj, dict) and key in obj else getattr(obj, key)


def tags(args: FleetArgs, fu: FleetUnit, name: str) -> dict[str, str]:
    return {"Name": name, "hetinfra-service": args.service, "hetinfra-unit": fu.name,
            "hetinfra-model": fu.unit.service_model}


def gateway_user_data(args: FleetArgs, secrets: FleetSecrets, heads: list[tuple[str, pulumi.Input[str]]]
                      ) -> pulumi.Output[str]:
    """The gateway VM's startup script (a secret Output): ``hetinfra gateway`` with one ``--endpoint``
    per replica head, ``(unit, private IP)``, at the fleet's vLLM port."""
    text = gateway_script(args.plan, args.cloud, args.region)
    units = [u for u, _ in heads]
    out = pulumi.Output.all(secrets.api_key, secrets.gateway_keys, secrets.tls_cert, secrets.tls_key,
                            *[ip for _, ip in heads]).apply(
        lambda v: fill_gateway(text, api_key=v[0], client_keys=v[1], tls_cert=v[2], tls_key=v[3],
                               endpoints=[(u, f"http://{ip}:{args.port}/v1") for u, ip in zip(units, v[4:])]))
    return pulumi.Output.secret(out)


def gateway_url(args: FleetArgs, public_ip: pulumi.Input[str]) -> pulumi.Output[str]:
    """The gateway's client URL: ``http(s)://<public IP>:<port>/v1``."""
    g = args.gateway or {}
    scheme = "https" if g.get("tls_cert") else "http"
    return pulumi.Output.concat(f"{scheme}://", public_ip, f":{int(g.get('port', 8080))}/v1")


def gateway_tags(args: FleetArgs, name: str) -> dict[str, str]:
    return {"Name": name, "hetinfra-service": args.service, "hetinfra-role": "gateway"}
