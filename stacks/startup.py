"""Startup scripts of the VMs that the Pulumi stacks create (plain text; no Pulumi import).

Every VM of a deployment unit runs the same script, parameterised by its rank in the replica:

1. **Driver check.** Wait up to 10 minutes for ``nvidia-smi`` (images that install the driver on
   first boot need that long), then require exactly the planned number of GPUs; anything else
   stops the boot with a message in ``/var/log/hetinfra-startup.log``, never a silent half-server.
2. **Secrets.** ``VLLM_API_KEY`` (and ``HF_TOKEN`` for gated models) come from Pulumi secrets
   and are written to ``/etc/hetinfra/secrets.env`` (mode 600). vLLM reads the key from the
   environment, so it never shows up on a command line.
3. **Serve.** ``/opt/hetinfra/serve.sh`` holds the plan's exact ``vllm serve`` line (the same
   text as the SkyPilot task, from :func:`hetinfra.compile.skypilot.vllm_serve_command`). Rank 0
   of a multi-node pipeline starts a Ray head, waits for every stage's node, then serves; other
   ranks join the head's Ray cluster. A systemd unit runs the script, in the
   ``vllm/vllm-openai`` container (``runtime: container``) or from a virtualenv
   (``runtime: virtualenv``), and restarts it on failure.

Placeholders ``@@HEAD_IP@@``, ``@@VLLM_API_KEY@@`` and ``@@HF_TOKEN@@`` are filled by the stack
program from Pulumi outputs (the head's private IP, the secrets), see :func:`fill`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from hetinfra.compile.skypilot import RAY_PORT, SkyUnit, serve_envs, vllm_serve_command

HEAD_IP = "@@HEAD_IP@@"
API_KEY = "@@VLLM_API_KEY@@"
HF_TOKEN = "@@HF_TOKEN@@"
DRIVER_WAIT_S = 600
RAY_JOIN_TIMEOUT_S = 900
LOG = "/var/log/hetinfra-startup.log"


@dataclass(frozen=True)
class RuntimeConfig:
    """How vLLM runs on the VM."""

    runtime: str = "container"  # container | virtualenv
    vllm_version: str | None = None  # None: latest at boot

    @property
    def image(self) -> str:
        return f"vllm/vllm-openai:{'v' + self.vllm_version if self.vllm_version else 'latest'}"

    @property
    def pip_spec(self) -> str:
        return f"vllm=={self.vllm_version}" if self.vllm_version else "vllm"


def serve_script(unit: SkyUnit) -> str:
    """The per-node serve script: rank 0 serves (after forming Ray for a pipeline), others join."""
    serve = vllm_serve_command(unit)
    if unit.num_nodes == 1:
        return f"#!/bin/bash\nset -euo pipefail\nexec {serve}\n"
    if unit.mixed:
        kinds = "+".join(g for _, g in unit.stages)
        return f"""\
#!/bin/bash
# EXPERIMENTAL mixed pipeline {kinds}: stage r on node rank r, vLLM's mp backend (no Ray), layers
# per stage from VLLM_PP_LAYER_PARTITION; rank 0 serves the API, the others run headless.
set -euo pipefail
NODE_IP=$(hostname -I | awk '{{print $1}}')
HEAD_IP=${{HEAD_IP:-$NODE_IP}}
export VLLM_HOST_IP="$NODE_IP"
if [ "$NODE_RANK" = "0" ]; then
  exec {serve}
else
  exec {serve} --headless
fi
"""
    tries = RAY_JOIN_TIMEOUT_S // 5
    where = "nodes, one stage per node" if unit.num_nodes == unit.pp else f"stages on {unit.num_nodes} nodes"
    count = ("python3 -c 'import ray; ray.init(logging_level=\"ERROR\"); "
             "print(sum(1 for n in ray.nodes() if n[\"Alive\"]))' 2>/dev/null | tail -n1")
    return f"""\
#!/bin/bash
# Pipeline of {unit.pp} {where} (TP={unit.tp} inside a node), over Ray on port {RAY_PORT}.
set -euo pipefail
NODE_IP=$(hostname -I | awk '{{print $1}}')
HEAD_IP=${{HEAD_IP:-$NODE_IP}}
export VLLM_HOST_IP="$NODE_IP" RAY_ADDRESS="$HEAD_IP:{RAY_PORT}"
if [ "$NODE_RANK" = "0" ]; then
  ray start --head --port={RAY_PORT} --node-ip-address="$NODE_IP" --num-gpus={unit.gpus_per_instance} --disable-usage-stats
  n=0
  for i in $(seq 1 {tries}); do
    n=$({count} || echo 0)
    [ "$n" -ge {unit.num_nodes} ] 2>/dev/null && break
    echo "waiting for Ray nodes: $n/{unit.num_nodes}"; sleep 5
  done
  if ! [ "$n" -ge {unit.num_nodes} ] 2>/dev/null; then
    echo "Ray: only $n of {unit.num_nodes} nodes joined within {RAY_JOIN_TIMEOUT_S} s" >&2; exit 1
  fi
  exec {serve}
else
  for i in $(seq 1 {tries}); do
    ray health-check --address="$RAY_ADDRESS" >/dev/null 2>&1 && break
    sleep 5
  done
  exec ray start --address="$RAY_ADDRESS" --node-ip-address="$NODE_IP" --num-gpus={unit.gpus_per_instance} --block
fi
"""


def _env_lines(unit: SkyUnit, rank: int) -> list[str]:
    envs = dict(serve_envs(unit))
    envs["NODE_RANK"] = str(rank)
    if unit.num_nodes > 1 and rank > 0:
        envs["HEAD_IP"] = HEAD_IP  # the head itself uses its own address
    return [f"{k}={v}" for k, v in envs.items()]


def _runner(unit: SkyUnit, rt: RuntimeConfig) -> str:
    if rt.runtime == "container":
        pre = ("command -v docker >/dev/null || fail 'docker not found on this image; use deploy.runtime: virtualenv'\n"
               f"docker pull {rt.image}\n")
        exec_start = (f"/usr/bin/docker run --rm --name vllm --gpus all --network host --ipc host "
                      f"--env-file /etc/hetinfra/env --env-file /etc/hetinfra/secrets.env "
                      f"-v /opt/hetinfra/serve.sh:/serve.sh:ro -v /opt/hetinfra/hf:/root/.cache/huggingface "
                      f"--entrypoint bash {rt.image} /serve.sh")
        extra = "ExecStartPre=-/usr/bin/docker rm -f vllm\n"
    else:
        ray = ' "ray[default]"' if unit.num_nodes > 1 else ""
        pre = ("python3 -m venv /opt/vllm || { apt-get update -y && apt-get install -y python3-venv && python3 -m venv /opt/vllm; }\n"
               f"/opt/vllm/bin/pip install -q {shlex.quote(rt.pip_spec)}{ray}\n")
        exec_start = "/bin/bash /opt/hetinfra/serve.sh"
        extra = ("EnvironmentFile=/etc/hetinfra/env\nEnvironmentFile=/etc/hetinfra/secrets.env\n"
                 "Environment=PATH=/opt/vllm/bin:/usr/local/bin:/usr/bin:/bin\n")
    after = "network-online.target docker.service" if rt.runtime == "container" else "network-online.target"
    unit_file = (f"[Unit]\nDescription=hetinfra vLLM server\nAfter={after}\n\n"
                 f"[Service]\n{extra}ExecStart={exec_start}\nRestart=on-failure\nRestartSec=30\n\n"
                 "[Install]\nWantedBy=multi-user.target\n")
    return pre + f"cat > /etc/systemd/system/hetinfra-vllm.service <<'UNIT'\n{unit_file}UNIT\n"


def startup_script(unit: SkyUnit, *, rank: int, runtime: RuntimeConfig, with_hf_token: bool) -> str:
    """The VM's whole boot script for ``rank`` (0 = the replica's head) of ``unit``."""
    if not 0 <= rank < unit.num_nodes:
        raise ValueError(f"rank {rank} outside the {unit.num_nodes} node(s) of {unit.name}")
    secrets = [f"VLLM_API_KEY={API_KEY}"] + ([f"HF_TOKEN={HF_TOKEN}"] if with_hf_token else [])
    env = "\n".join(_env_lines(unit, rank))
    role = "single node" if unit.num_nodes == 1 else f"pipeline rank {rank} of {unit.num_nodes}"
    itype, gpu = unit.node_instance_type(rank), unit.node_gpu(rank)
    return f"""\
#!/bin/bash
# hetinfra: unit {unit.name} ({unit.service_model}), {itype} {gpu}:{unit.gpus_per_instance}, {role}
set -euo pipefail
exec >>{LOG} 2>&1
fail() {{ echo "hetinfra: $*" >&2; exit 1; }}
for i in $(seq 1 {DRIVER_WAIT_S // 10}); do nvidia-smi >/dev/null 2>&1 && break; sleep 10; done
nvidia-smi >/dev/null 2>&1 || fail "no NVIDIA driver after {DRIVER_WAIT_S} s (nvidia-smi failed); use a GPU image"
gpus=$(nvidia-smi -L | grep -c '^GPU ')
[ "$gpus" -eq {unit.gpus_per_instance} ] || fail "expected {unit.gpus_per_instance} x {gpu}, found $gpus GPU(s)"
install -d -m 700 /etc/hetinfra /opt/hetinfra /opt/hetinfra/hf
umask 077
cat > /etc/hetinfra/secrets.env <<'SECRETS'
{chr(10).join(secrets)}
SECRETS
cat > /etc/hetinfra/env <<'ENV'
{env}
ENV
cat > /opt/hetinfra/serve.sh <<'SERVE'
{serve_script(unit)}SERVE
chmod 700 /opt/hetinfra/serve.sh
{_runner(unit, runtime)}systemctl daemon-reload
systemctl enable --now hetinfra-vllm.service
"""


def fill(script: str, *, head_ip: str | None = None, api_key: str, hf_token: str | None = None) -> str:
    """Replace the placeholders; secrets must be single-line (they go into an env file)."""
    for name, value in (("VLLM_API_KEY", api_key), ("HF_TOKEN", hf_token)):
        if value is not None and ("\n" in value or "\r" in value):
            raise ValueError(f"{name} must be a single line")
    out = script.replace(API_KEY, api_key).replace(HF_TOKEN, hf_token or "")
    if HEAD_IP in out:
        if not head_ip:
            raise ValueError("a pipeline worker's script needs the head's IP")
        out = out.replace(HEAD_IP, head_ip)
    return out
