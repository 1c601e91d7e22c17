"""What the gateway needs from the deploying machine and what clients are told to use: the gateway
VMs' Pulumi secrets (client keys, TLS files) and the endpoint lines ``hetinfra apply`` prints."""

from __future__ import annotations

from pathlib import Path

from hetinfra.clientkeys import parse_client_keys
from hetinfra.deploy.state import DeployState
from hetinfra.document import Plan
from hetinfra.fileio import read_text


def gateway_secrets(plan: Plan, env: dict) -> dict[str, str]:
    """Pulumi secrets of the gateway VMs: client keys (``HETINFRA_API_KEY``) and the TLS files."""
    g = plan.deploy.gateway
    if not g.enabled:
        return {}
    out = {}
    if parse_client_keys(env.get("HETINFRA_API_KEY")):  # checked here, not at the gateway's start
        out["hetinfra:gatewayApiKey"] = env["HETINFRA_API_KEY"]
    for key, cfg, path in (("tls_cert", "hetinfra:gatewayTlsCert", g.tls_cert),
                           ("tls_key", "hetinfra:gatewayTlsKey", g.tls_key)):
        if path:  # the one file reader: a FIFO hung apply, a DER (binary) file was a UnicodeDecodeError
            from hetinfra.envpaths import word_path  # as hetinfra.spec.files.spec_file: ~nobody/x was a RuntimeError

            out[cfg] = read_text(word_path(f"deploy.gateway.{key}", path, "give the path of a readable PEM file"),
                                 f"deploy.gateway.{key}",
                                 max_bytes=1 << 20,
                                 hint="give a PEM file (text: -----BEGIN ...), e.g. from `openssl x509 -outform pem`")
    return out


def endpoint_lines(out: Path, plan: Plan, state: DeployState) -> list[str]:
    """What clients use: the gateways' URLs (the one endpoint per service, per region with
    several fleet regions); on the SkyPilot path the gateway task's launch line, filled in."""
    from hetinfra.compile.skypilot_gateway import gateway_task_name

    now = state.model
    lines = []
    if len(now.gateways) == 1:
        lines.append(f"Endpoint: {next(iter(now.gateways.values()))}")
    elif now.gateways:
        lines.append("Endpoints (one gateway per fleet region):")
        lines += [f"  {fleet}: {url}" for fleet, url in sorted(now.gateways.items())]
    g = plan.deploy.gateway
    sky = [a for a in now.allocations if a.path == "skypilot"]
    sky_units = sorted(a.deployment_unit for a in sky)
    name = gateway_task_name(plan.service)
    if g.enabled and sky_units and (out / "skypilot" / f"{name}.yaml").exists():
        eps = " ".join(f"{u}={url}" for u in sky_units for url in now.endpoints.get(u, []))
        lines.append(f"Gateway for the SkyServe units (then `sky status --endpoint {g.port} {name}`):")
        launch = (f"{out / 'skypilot' / (name + '.yaml')} --secret VLLM_API_KEY --secret HETINFRA_API_KEY "
                  f"--env HETINFRA_ENDPOINTS=\"{eps}\"")
        if plan.routing_by_origin:  # one gateway per fleet region, serving its row (docs/regions.md)
            places = sorted({(a.cloud, a.region) for a in sky})
            lines += [f"  sky launch -c {name}-{r} --infra {c}/{r} {launch} --env HETINFRA_REGION={r}" for c, r in places]
        else:
            lines.append(f"  sky launch -c {name} {launch}")
    elif not g.enabled and not now.gateways:
        lines.append("No gateway (deploy.gateway.enabled is false): clients use the units' endpoints "
                     "(`hetinfra status`).")
    return lines
