"""What a VM learns at boot from its cloud, through its own identity (text only; no Pulumi import).

**Secrets.** The fleet's secrets (``VLLM_API_KEY``, ``HF_TOKEN``; the gateway's ``HETINFRA_API_KEY``,
``TLS_CERT``, ``TLS_KEY``) are one JSON document in the cloud's secret store, written by the stack
from Pulumi secrets: AWS Secrets Manager, GCP Secret Manager, Azure Key Vault. The boot data holds
only the secret's *name*; ``/opt/hetinfra/fetch-secrets.sh`` reads the value with the instance's
identity (EC2 instance profile, GCE service account, Azure managed identity) into a root-only env
file each time vLLM (re)starts. Rotating a key changes the store, never the boot data, so no VM is
replaced: restart the service (or let the group roll instances) to pick it up.

**Pipeline heads.** The nodes of a multi-node pipeline replica are separate one-VM groups (so a
lost node is replaced in place); a worker finds its replica's head by the head group's name, with
the same identity, on every (re)start (``/opt/hetinfra/find-head.sh`` writes ``HEAD_IP``).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

SECRETS_ENV = "/etc/hetinfra/secrets.env"
HEAD_ENV = "/etc/hetinfra/head.env"

# JSON (stdin) -> KEY=VALUE lines for the keys asked for; multi-line values (TLS) go to files.
_TO_ENV = ("python3 -c 'import json,sys; d=json.load(sys.stdin); "
           "[print(k+\"=\"+str(d[k])) for k in sys.argv[1:] if d.get(k) and \"\\n\" not in str(d[k])]'")


@dataclass(frozen=True)
class SecretRef:
    """Where the fleet's secret document lives: ``cloud``, its name or id, and the cloud's scope
    (AWS region, GCP project, Azure vault name)."""

    cloud: str
    name: str
    scope: str


def read_secret_json(ref: SecretRef) -> str:
    """Shell that prints the secret document (JSON) using the instance's identity."""
    if ref.cloud == "aws":
        return (f"aws secretsmanager get-secret-value --region {shlex.quote(ref.scope)} "
                f"--secret-id {shlex.quote(ref.name)} --query SecretString --output text")
    if ref.cloud == "gcp":
        return (f"gcloud secrets versions access latest --secret={shlex.quote(ref.name)} "
                f"--project={shlex.quote(ref.scope)}")
    if ref.cloud == "azure":
        return ("tok=$(curl -fsS -H Metadata:true 'http://169.254.169.254/metadata/identity/oauth2/token?"
                "api-version=2018-02-01&resource=https%3A%2F%2Fvault.azure.net' | python3 -c "
                "'import json,sys; print(json.load(sys.stdin)[\"access_token\"])') && "
                f"curl -fsS -H \"Authorization: Bearer $tok\" "
                f"'https://{ref.scope}.vault.azure.net/secrets/{ref.name}?api-version=7.4' | python3 -c "
                "'import json,sys; print(json.load(sys.stdin)[\"value\"])'")
    raise ValueError(f"no secret store for cloud {ref.cloud!r}")


def fetch_secrets_script(ref: SecretRef, keys: tuple[str, ...], files: dict[str, str] | None = None) -> str:
    """``/opt/hetinfra/fetch-secrets.sh``: the store's document -> ``secrets.env`` (``keys``) and
    ``files`` (key -> path, for multi-line values such as TLS), retried for 5 minutes."""
    files = files or {}
    write_files = "".join(
        f"printf '%s' \"$doc\" | python3 -c 'import json,sys; v=json.load(sys.stdin).get(\"{k}\") or \"\"; "
        f"open(\"{p}\",\"w\").write(v)'\n" for k, p in files.items())
    return f"""#!/bin/bash
# Reads the fleet's secrets from the cloud's secret store with this VM's identity ({ref.cloud}: {ref.name}).
set -euo pipefail
umask 077
for i in $(seq 1 30); do
  doc=$({read_secret_json(ref)}) && break
  echo "hetinfra: secret store not readable yet ($i/30)" >&2; sleep 10
done
[ -n "${{doc:-}}" ] || {{ echo "hetinfra: cannot read secret {ref.name}" >&2; exit 1; }}
printf '%s' "$doc" | {_TO_ENV} {' '.join(keys)} > {SECRETS_ENV}.new
mv {SECRETS_ENV}.new {SECRETS_ENV}
{write_files}"""


def _ip_lookup(cloud: str, head_group: str, scope: str) -> str:
    """Shell that prints the private IP of the running VM of ``head_group`` (empty or None: none yet)."""
    g = shlex.quote(head_group)
    if cloud == "aws":
        lookup = (f"aws ec2 describe-instances --region {shlex.quote(scope)} --filters "
                  f"Name=tag:hetinfra-group,Values={g} Name=instance-state-name,Values=running "
                  "--query 'Reservations[].Instances[].PrivateIpAddress' --output text | awk '{print $1}'")
    elif cloud == "gcp":
        lookup = (f"gcloud compute instances list --project={shlex.quote(scope)} "
                  f"--filter=\"name~^{head_group}- AND status=RUNNING\" "
                  "--format='value(networkInterfaces[0].networkIP)' | sed -n 1p")
    elif cloud == "azure":
        lookup = ("meta=$(curl -fsS -H Metadata:true 'http://169.254.169.254/metadata/instance/compute?"
                  "api-version=2021-02-01') && sub=$(printf '%s' \"$meta\" | python3 -c "
                  "'import json,sys; print(json.load(sys.stdin)[\"subscriptionId\"])') && "
                  "rg=$(printf '%s' \"$meta\" | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"resourceGroupName\"])') && "
                  "tok=$(curl -fsS -H Metadata:true 'http://169.254.169.254/metadata/identity/oauth2/token?"
                  "api-version=2018-02-01&resource=https%3A%2F%2Fmanagement.azure.com%2F' | python3 -c "
                  "'import json,sys; print(json.load(sys.stdin)[\"access_token\"])') && "
                  "curl -fsS -H \"Authorization: Bearer $tok\" \"https://management.azure.com/subscriptions/$sub/"
                  f"resourceGroups/$rg/providers/Microsoft.Compute/virtualMachineScaleSets/{head_group}/"
                  "networkInterfaces?api-version=2018-10-01\" | python3 -c 'import json,sys; "
                  "v=json.load(sys.stdin)[\"value\"]; print(v[0][\"properties\"][\"ipConfigurations\"][0]"
                  "[\"properties\"][\"privateIPAddress\"] if v else \"\")'")
    else:
        raise ValueError(f"no VM lookup for cloud {cloud!r}")
    return lookup


def find_head_script(cloud: str, head_group: str, scope: str) -> str:
    """``/opt/hetinfra/find-head.sh``: the private IP of the running VM of ``head_group`` -> HEAD_IP."""
    lookup = _ip_lookup(cloud, head_group, scope)
    return f"""#!/bin/bash
# Finds this replica's pipeline head (group {head_group}) with this VM's identity.
set -uo pipefail
for i in $(seq 1 90); do
  ip=$({lookup})
  if [ -n "$ip" ] && [ "$ip" != "None" ]; then echo "HEAD_IP=$ip" > {HEAD_ENV}; exit 0; fi
  echo "hetinfra: waiting for head {head_group} ($i/90)" >&2; sleep 10
done
echo "hetinfra: no running head in {head_group}" >&2; exit 1
"""


def find_peers_script(cloud: str, groups: list[str], scope: str) -> str:
    """``/opt/hetinfra/find-head.sh`` of a prefill/decode bundle's head (the first prefill node): the
    private IPs of the running VMs of ``groups`` (the replica's other nodes, in rank order) ->
    ``HETINFRA_PEERS`` (hetinfra.compile.bundle_nodes), looked up at every start, so a replaced node
    is found at its new address. Bounded: 15 minutes per group."""
    waits = "\n".join(f"""found=0
for i in $(seq 1 90); do
  ip=$({_ip_lookup(cloud, g, scope)})
  if [ -n "$ip" ] && [ "$ip" != "None" ]; then peers="$peers $ip"; found=1; break; fi
  echo "hetinfra: waiting for the bundle's node {g} ($i/90)" >&2; sleep 10
done
[ "$found" = 1 ] || {{ echo "hetinfra: no running node in {g}" >&2; exit 1; }}""" for g in groups)
    return f"""#!/bin/bash
# Finds the other nodes of this prefill/decode bundle replica ({', '.join(groups)}) with this VM's identity.
set -uo pipefail
peers=""
{waits}
echo "HETINFRA_PEERS=${{peers# }}" > {HEAD_ENV}
"""
