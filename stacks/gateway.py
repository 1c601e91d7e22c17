"""The gateway VM's startup script: `hetinfra gateway` under systemd in front of the region's fleet.

The script installs ``deploy.gateway.package`` in a virtualenv, writes the plan and a root-only env
file (``VLLM_API_KEY`` for the backends, ``HETINFRA_API_KEY`` for clients; both Pulumi secrets),
and starts ``hetinfra gateway /etc/hetinfra/plan.json --host 0.0.0.0 --endpoint UNIT=URL ...`` with
the backends' *private* addresses, a demand log under /var/lib/hetinfra and TLS when a
certificate is given. Placeholders ``@@VLLM_API_KEY@@``, ``@@CLIENT_KEYS@@``, ``@@TLS_CERT@@``,
``@@TLS_KEY@@`` and ``@@ENDPOINTS@@`` are filled by the stack.
"""

from __future__ import annotations

import json
import shlex

SCRIPT = """#!/bin/bash
# hetinfra gateway for service {service} ({cloud}/{region})
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -q && apt-get install -y -q python3-venv
python3 -m venv /opt/hetinfra
/opt/hetinfra/bin/pip install -q {package}
install -d -m 0755 /etc/hetinfra /var/lib/hetinfra
cat > /etc/hetinfra/plan.json <<'HETINFRA_PLAN'
{plan}
HETINFRA_PLAN
umask 077
cat > /etc/hetinfra/gateway.env <<'HETINFRA_ENV'
VLLM_API_KEY=@@VLLM_API_KEY@@
HETINFRA_API_KEY=@@CLIENT_KEYS@@
HETINFRA_ENV
{tls}umask 022
cat > /etc/systemd/system/hetinfra-gateway.service <<'HETINFRA_UNIT'
[Unit]
Description=hetinfra gateway ({service})
After=network-online.target
[Service]
EnvironmentFile=/etc/hetinfra/gateway.env
ExecStart={command} @@ENDPOINTS@@
ExecReload=/bin/kill -HUP $MAINPID
Restart=always
LimitNOFILE=65536
[Install]
WantedBy=multi-user.target
HETINFRA_UNIT
systemctl daemon-reload
systemctl enable --now hetinfra-gateway
"""

TLS = """cat > /etc/hetinfra/tls.crt <<'HETINFRA_CERT'
@@TLS_CERT@@
HETINFRA_CERT
cat > /etc/hetinfra/tls.key <<'HETINFRA_KEY'
@@TLS_KEY@@
HETINFRA_KEY
"""


def gateway_command(gateway: dict, region: str, tls: bool) -> str:
    cmd = ["/opt/hetinfra/bin/hetinfra", "gateway", "/etc/hetinfra/plan.json", "--host", "0.0.0.0",
           "--port", str(gateway.get("port", 8080)), "--region", region,
           "--demand-log", "/var/lib/hetinfra/demand.csv"]
    if tls:
        cmd += ["--tls-cert", "/etc/hetinfra/tls.crt", "--tls-key", "/etc/hetinfra/tls.key"]
    return " ".join(shlex.quote(c) for c in cmd)


def gateway_script(plan: dict, cloud: str, region: str) -> str:
    gateway = (plan.get("deploy") or {}).get("gateway") or {}
    tls = bool(gateway.get("tls_cert"))
    return SCRIPT.format(service=plan["service"], cloud=cloud, region=region,
                         package=shlex.quote(gateway.get("package") or "hetinfra"),
                         plan=json.dumps(plan, indent=1), tls=TLS if tls else "",
                         command=gateway_command(gateway, region, tls))


def fill_gateway(text: str, *, api_key: str, client_keys: str | None, endpoints: list[tuple[str, str]],
                 tls_cert: str | None = None, tls_key: str | None = None) -> str:
    eps = " ".join(f"--endpoint {shlex.quote(f'{u}={url}')}" for u, url in endpoints)
    return (text.replace("@@VLLM_API_KEY@@", api_key).replace("@@CLIENT_KEYS@@", client_keys or "")
            .replace("@@TLS_CERT@@", tls_cert or "").replace("@@TLS_KEY@@", tls_key or "")
            .replace("@@ENDPOINTS@@", eps))
