"""``hetinfra gateway``: run the service's one public endpoint (see hetinfra.gateway).

Only click is imported here at module level; starlette, uvicorn, aiohttp and prometheus_client load
inside the command, so ``hetinfra --help`` and ``hetinfra plan`` never pay for them.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from hetinfra.cli.common import COMMAND_SETTINGS, MAX_ROTATIONS, MAX_WAIT_S, FiniteFloat, UserPath, WholeRange, fail
from hetinfra.facts import GATEWAY_PORT


@click.command("gateway", context_settings=COMMAND_SETTINGS)
@click.argument("source", metavar="PLAN_OR_OUT_DIR", type=UserPath(exists=True, path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0 for all).")
@click.option("--port", type=WholeRange(0, 65535), default=GATEWAY_PORT, show_default=True, help="Port to listen on.")
@click.option("--endpoint", "endpoints", multiple=True, metavar="UNIT=URL",
              help="A backend of UNIT (the allocation's unit or deployment_unit), e.g. http://10.0.0.5:8000/v1; "
                   "repeat for replicas. Overrides what `hetinfra apply` recorded in OUT/state.json for that unit.")
@click.option("--demand-log", type=UserPath(dir_okay=False, path_type=Path),
              help="Append one CSV row per request (no contents) for `hetinfra replan --demand-log`. "
                   "Default: OUT/gateway/demand.csv when given an OUT folder; off for a plan.json.")
@click.option("--no-demand-log", is_flag=True, help="Keep no demand log.")
@click.option("--demand-log-max-mb", type=FiniteFloat(min=0.001, max=1_048_576), default=64.0, show_default=True,
              help="Rotate the demand log at this size.")
@click.option("--demand-log-keep", type=WholeRange(0, MAX_ROTATIONS), default=5, show_default=True,
              help="Rotated demand logs kept (demand.csv.1 ... .N).")
@click.option("--region", default="",
              help="The gateway's region, one the plan declares (exact case): it serves this region's row of the "
                   "plan (routing_by_origin) to requests without an x-hetinfra-origin header (or with an undeclared "
                   "one), and the demand log records it as their origin.")
@click.option("--max-body-kb", type=WholeRange(1, 1_048_576), default=4096, show_default=True,
              help="Largest request body accepted (413 above).")
@click.option("--retries", type=WholeRange(0, 10), default=2, show_default=True,
              help="Other backends tried on a connect error, timeout or 5xx before the first byte.")
@click.option("--max-connections", type=WholeRange(1, 100_000), default=512, show_default=True,
              help="Connections kept open (keep-alive) per backend host; requests beyond wait for one.")
@click.option("--connect-timeout-s", type=FiniteFloat(min=0.01, max=MAX_WAIT_S), default=3.0, show_default=True,
              help="Longest wait for a connection to a backend: to open one, or for a free one while "
                   "--max-connections are busy.")
@click.option("--read-timeout-s", type=FiniteFloat(min=0.01, max=MAX_WAIT_S), default=600.0, show_default=True,
              help="Longest wait for any read from a backend (the first token included).")
@click.option("--client-timeout-s", type=FiniteFloat(min=0.01, max=MAX_WAIT_S), default=30.0, show_default=True,
              help="Longest a client may take to send a request (its headers and body), plus a second per 16 KiB "
                   "it sent; a slower connection is closed (408).")
@click.option("--max-clients", type=WholeRange(1, 1_000_000),
              help="Client connections served at once; one more is answered 503 and closed at once. "
                   "[default: half the process's open-file limit]")
@click.option("--health-interval-s", type=FiniteFloat(min=0.05, max=MAX_WAIT_S), default=5.0, show_default=True,
              help="How often every backend's /health is checked.")
@click.option("--fall", type=WholeRange(1, 1000), default=2, show_default=True,
              help="Failed checks in a row that eject a backend (a connect error ejects at once).")
@click.option("--rise", type=WholeRange(1, 1000), default=2, show_default=True,
              help="Good checks in a row that re-admit an ejected backend.")
@click.option("--reload-interval-s", type=FiniteFloat(min=0, max=MAX_WAIT_S), default=2.0, show_default=True,
              help="Poll plan.json / router/weights.json / state.json for changes (0: on SIGHUP only).")
@click.option("--tokenizer", "tokenizers", multiple=True, metavar="MODEL=PATH",
              help="A local tokenizer.json (or its folder) for exact prompt counts; needs the tokenizers package. "
                   "Without it prompts are approximated at 4 characters per token.")
@click.option("--tls-cert", type=UserPath(dir_okay=False, exists=True), help="Serve HTTPS with this certificate...")
@click.option("--tls-key", type=UserPath(dir_okay=False, exists=True), help="...and this private key.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True, help="Least severe message the gateway and its server (uvicorn) log.")
def gateway_command(source: Path, host: str, port: int, endpoints: tuple[str, ...], demand_log: Path | None,
                    no_demand_log: bool, demand_log_max_mb: float, demand_log_keep: int, region: str,
                    max_body_kb: int, retries: int, max_connections: int, connect_timeout_s: float, read_timeout_s: float,
                    client_timeout_s: float, max_clients: int | None, health_interval_s: float, fall: int, rise: int, reload_interval_s: float,
                    tokenizers: tuple[str, ...], tls_cert: str | None, tls_key: str | None, log_level: str) -> None:
    """Serve PLAN_OR_OUT_DIR's models behind one OpenAI-compatible endpoint, routing by request class.

    \b
    Client keys: HETINFRA_API_KEY ("key" or "name:key", comma-separated; unset = no client auth).
    Backend key: VLLM_API_KEY (sent to the backends, never to clients).
    Reloads the routing on SIGHUP and when its files change; in-flight requests are kept.
    """
    import logging

    from hetinfra.errors import HetinfraError, InvalidInputError

    try:
        from hetinfra.clientkeys import parse_client_keys
        from hetinfra.gateway.listen import check_bind, check_tls
        from hetinfra.gateway.server import GatewayConfig, serve
        from hetinfra.gateway.table import parse_endpoint_overrides

        if bool(tls_cert) != bool(tls_key):
            raise InvalidInputError("--tls-cert and --tls-key go together")
        toks = _tokenizer_paths(tokenizers)
        if no_demand_log:
            demand_log = None
        elif demand_log is None and source.is_dir():
            demand_log = source / "gateway" / "demand.csv"
        logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        keys = parse_client_keys(os.environ.get("HETINFRA_API_KEY"))
        _warn_open(keys)
        config = GatewayConfig(
            source=str(source), endpoints=parse_endpoint_overrides(endpoints), client_keys=keys,
            backend_key=_backend_key(), max_body_bytes=max_body_kb * 1024, retries=retries,
            connect_timeout_s=connect_timeout_s, read_timeout_s=read_timeout_s, health_interval_s=health_interval_s,
            fall=fall, rise=rise, reload_interval_s=reload_interval_s,
            demand_log=str(demand_log) if demand_log else None,
            demand_log_max_bytes=int(demand_log_max_mb * (1 << 20)), demand_log_keep=demand_log_keep,
            region=region, tokenizers=toks, max_connections=max_connections)
        check_tls(tls_cert, tls_key)
        check_bind(host, port)
        serve(config, host, port, log_level=log_level, ssl_certfile=tls_cert, ssl_keyfile=tls_key,
              client_timeout_s=client_timeout_s, max_clients=max_clients)
    except HetinfraError as exc:
        fail(exc, False)


def _tokenizer_paths(items: tuple[str, ...]) -> dict[str, str]:
    """--tokenizer MODEL=PATH, repeated -> {model: path}."""
    from hetinfra.errors import InvalidInputError

    out = {}
    for item in items:
        model, sep, path = item.partition("=")
        if not sep:
            raise InvalidInputError(f"--tokenizer {item!r} is not MODEL=PATH")
        out[model] = path
    return out


def _backend_key() -> str | None:
    """VLLM_API_KEY, sent to the backends as a Bearer token: the client keys' rule (a newline there
    cannot be sent in a header; hetinfra.facts.key_problem), exit 2 at start, never quoting it."""
    from hetinfra.errors import InvalidInputError
    from hetinfra.facts import key_problem

    key = os.environ.get("VLLM_API_KEY") or None
    why = key and key_problem(key)
    if why:
        raise InvalidInputError(f"VLLM_API_KEY {why}", hint="give the engines' key as apply set it (printable ASCII)")
    return key


def _warn_open(keys: dict[str, str]) -> None:
    """Say which side of the gateway runs without a key."""
    if not keys:
        click.echo("warning: HETINFRA_API_KEY is not set: the gateway accepts requests from anyone who can "
                   "reach it", err=True)
    if not os.environ.get("VLLM_API_KEY"):
        click.echo("warning: VLLM_API_KEY is not set: requests reach the backends without a key", err=True)
