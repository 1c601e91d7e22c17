"""The gateway VM's startup script: `hetinfra gateway` under systemd in front of the region's fleet.

The script installs ``deploy.gateway.package`` in a virtualenv, writes the plan and a root-only env
file (``VLLM_API_KEY`` for the backends, ``HETINFRA_API_KEY`` for clients; both Pulumi secrets),
and starts ``hetinfra gateway /etc/hetinfra/plan.json --host 0.0.0.0 --endpoint UNIT=URL ...`` with
the backends' *private* addresses, a demand log under /var/lib/hetinfra and TLS when a
certificate is given. The keys and TLS files are read from the cloud's secret store with the VM's
identity before every start (``hetinfra.stacks.boot``); the boot data holds none of them. The
placeholder ``@@ENDPOINTS@@`` is filled by the stack.
"""

from __future__ import annotations

import json
import shlex

from hetinfra.stacks.boot import SecretRef, fetch_secrets_script
from hetinfra.facts import GATEWAY_PORT

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
cat > /opt/hetinfra/fetch-secrets.sh <<'HETINFRA_FETCH'
{fetch}HETINFRA_FETCH
chmod 700 /opt/hetinfra/fetch-secrets.sh
umask 022
cat > /etc/systemd/system/hetinfra-gateway.service <<'HETINFRA_UNIT'
[Unit]
Description=hetinfra gateway ({service})
After=network-online.target
[Service]
ExecStartPre=/opt/hetinfra/fetch-secrets.sh
EnvironmentFile=-/etc/hetinfra/secrets.env
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

def gateway_command(gateway: dict, region: str, tls: bool) -> str:
    cmd = ["/opt/hetinfra/bin/hetinfra", "gateway", "/etc/hetinfra/plan.json", "--host", "0.0.0.0",
           "--port", str(gateway.get("port", GATEWAY_PORT)), "--region", region,
           "--demand-log", "/var/lib/hetinfra/demand.csv"]
    if tls:
        cmd += ["--tls-cert", "/etc/hetinfra/tls.crt", "--tls-key", "/etc/hetinfra/tls.key"]
    return " ".join(shlex.quote(c) for c in cmd)


def gateway_script(plan: dict, cloud: str, region: str, ref: SecretRef) -> str:
    gateway = (plan.get("deploy") or {}).get("gateway") or {}
    tls = bool(gateway.get("tls_cert"))
    files = {"TLS_CERT": "/etc/hetinfra/tls.crt", "TLS_KEY": "/etc/hetinfra/tls.key"} if tls else {}
    return SCRIPT.format(service=plan["service"], cloud=cloud, region=region,
                         package=shlex.quote(gateway.get("package") or "hetinfra"),
                         plan=json.dumps(plan, indent=1),
                         fetch=fetch_secrets_script(ref, ("VLLM_API_KEY", "HETINFRA_API_KEY"), files),
                         command=gateway_command(gateway, region, tls))


def fill_gateway(text: str, *, endpoints: list[tuple[str, str]]) -> str:
    eps = " ".join(f"--endpoint {shlex.quote(f'{u}={url}')}" for u, url in endpoints)
    return text.replace("@@ENDPOINTS@@", eps)
