"""Startup scripts of the VMs that the Pulumi stacks create (plain text; no Pulumi import).

Every VM of a deployment unit runs the same script, parameterised by its rank in the replica:

1. **Driver check.** Wait up to 10 minutes for ``nvidia-smi`` (images that install the driver on
   first boot need that long), then require exactly the planned number of GPUs; anything else
   stops the boot with a message in ``/var/log/hetinfra-startup.log``, never a silent half-server.
2. **Secrets.** ``VLLM_API_KEY`` (and ``HF_TOKEN`` for gated models) are read from the cloud's
   secret store with the VM's identity by ``/opt/hetinfra/fetch-secrets.sh`` (see
   :mod:`hetinfra.stacks.boot`) into ``/etc/hetinfra/secrets.env`` (mode 600) before every start
   of vLLM; the boot script itself holds no secret. vLLM reads the key from the environment, so
   it never shows up on a command line.
3. **Serve.** ``/opt/hetinfra/serve.sh`` holds the plan's exact ``vllm serve`` line (the same
   text as the SkyPilot task, from :func:`hetinfra.compile.engine.vllm_serve_command`). Rank 0
   of a multi-node pipeline starts a Ray head, waits for every stage's node, then serves; other
   ranks join the head's Ray cluster (the SkyPilot task's script: :mod:`hetinfra.compile.ray`). A systemd unit runs the script, in the
   ``vllm/vllm-openai`` container (``runtime: container``) or from a virtualenv
   (``runtime: virtualenv``), and restarts it on failure.

Pipeline workers find their head's private IP at every start (``/opt/hetinfra/find-head.sh``,
with the VM's identity) rather than from the boot data, so a replaced head is found again.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from hetinfra.compile.bundle import hop_install, node_script
from hetinfra.compile.ray import RayNode, ray_pipeline_script
from hetinfra.compile.engine import serve_envs, vllm_image, vllm_pip_spec, vllm_serve_command
from hetinfra.compile.unit import DeployedUnit
from hetinfra.facts import RAY_CLICK_PIN
from hetinfra.stacks.boot import HEAD_ENV, SECRETS_ENV

DRIVER_WAIT_S = 600
#: a prefill/decode bundle's hop (hetinfra.compile.bundle): hetinfra's virtualenv and the hop's plan, at
#: one path on the VM and in the vLLM container (bind-mounted), so the hop runs beside the engines
HOP_DIR = "/opt/hetinfra/hop"
LOG = "/var/log/hetinfra-startup.log"
#: where a pipeline VM finds its address, its head's (HEAD_IP from find-head.sh; unset on the head) and its rank
VM_NODE = RayNode(node_ip="$(hostname -I | awk '{print $1}')", head_ip="${HEAD_IP:-$NODE_IP}", rank="$NODE_RANK")


@dataclass(frozen=True)
class BootConfig:
    """The cloud's boot-time lookups: ``fetch_secrets`` (the fetch-secrets.sh text) and, for a
    pipeline worker, ``find_head`` (the find-head.sh text)."""

    fetch_secrets: str
    find_head: str | None = None


@dataclass(frozen=True)
class RuntimeConfig:
    """How vLLM runs on the VM."""

    runtime: str = "container"  # container | virtualenv
    vllm_version: str | None = None  # None: latest at boot

    @property
    def image(self) -> str:  # the same engine as the SkyPilot tasks
        return vllm_image(self.vllm_version)

    @property
    def pip_spec(self) -> str:
        return vllm_pip_spec(self.vllm_version)


def serve_script(unit: DeployedUnit, rank: int = 0) -> str:
    """The per-node serve script: rank 0 serves (after forming Ray for a pipeline), others join; a
    bundle's node runs its engines (and on its head the hop: hetinfra.compile.bundle)."""
    serve = vllm_serve_command(unit)
    if unit.bundle:  # the engines and the hop; hetinfra installed at the first start (python3 of the runtime)
        install = f"[ -x {HOP_DIR}/venv/bin/hetinfra ] || {{ {hop_install(HOP_DIR + '/venv')}; }}\n" if rank == 0 else ""
        return (f"#!/bin/bash\n{install}"
                + node_script(unit, f"{HOP_DIR}/venv/bin/hetinfra", f"{HOP_DIR}/plan.json", rank))
    if unit.num_nodes == 1:
        return f"#!/bin/bash\nset -euo pipefail\nexec {serve}\n"
    if unit.mixed:
        kinds = "+".join(g for _, g in unit.stages)
        return f"""\
#!/bin/bash
# EXPERIMENTAL mixed pipeline {kinds}: stage r on node rank r, vLLM's mp backend (no Ray), layers
# per stage from VLLM_PP_LAYER_PARTITION; rank 0 serves the API, the others run headless.
set -euo pipefail
NODE_IP={VM_NODE.node_ip}
HEAD_IP={VM_NODE.head_ip}
export VLLM_HOST_IP="$NODE_IP"
if [ "{VM_NODE.rank}" = "0" ]; then
  exec {serve}
else
  exec {serve} --headless
fi
"""
    return "#!/bin/bash\n" + ray_pipeline_script(unit, VM_NODE, f"exec {serve}\n")


def _env_lines(unit: DeployedUnit, rank: int) -> list[str]:
    envs = dict(serve_envs(unit))
    envs["NODE_RANK"] = str(rank)
    if unit.bundle:
        envs["HETINFRA_PACKAGE"] = unit.hetinfra_package
    return [f"{k}={v}" for k, v in envs.items()]


#: what a container needs to reach the node's RDMA devices (EFA, InfiniBand, RoCE): SkyPilot's EFA
#: docker options (sky/clouds/aws.py, after ofiwg/libfabric#6437: unlimited locked memory)
RDMA_DOCKER_OPTIONS = "--device=/dev/infiniband --cap-add=IPC_LOCK --ulimit memlock=-1:-1 "


def _runner(unit: DeployedUnit, rt: RuntimeConfig, worker: bool = False) -> str:
    pre_start = "ExecStartPre=/opt/hetinfra/fetch-secrets.sh\n" + ("ExecStartPre=/opt/hetinfra/find-head.sh\n"
                                                                   if worker else "")
    head_env = f"--env-file {HEAD_ENV} " if worker else ""
    if rt.runtime == "container":
        pre = ("command -v docker >/dev/null || fail 'docker not found on this image; use deploy.runtime: virtualenv'\n"
               f"docker pull {rt.image}\n")
        exec_start = (f"/usr/bin/docker run --rm --name vllm --gpus all --network host --ipc host "
                      f"--env-file /etc/hetinfra/env --env-file {SECRETS_ENV} {head_env}"
                      f"-v /opt/hetinfra/serve.sh:/serve.sh:ro -v /opt/hetinfra/hf:/root/.cache/huggingface "
                      + (f"-v {HOP_DIR}:{HOP_DIR} " if unit.bundle else "")
                      + (RDMA_DOCKER_OPTIONS if unit.role_nodes else "") +
                      f"--entrypoint bash {rt.image} /serve.sh")
        extra = pre_start + "ExecStartPre=-/usr/bin/docker rm -f vllm\n"
    else:
        ray = f' "ray[default]" "{RAY_CLICK_PIN}"' if unit.num_nodes > 1 and not unit.bundle else ""  # as SkyPilot's
        pre = ("python3 -m venv /opt/vllm || { apt-get update -y && apt-get install -y python3-venv && python3 -m venv /opt/vllm; }\n"
               f"/opt/vllm/bin/pip install -q {shlex.quote(rt.pip_spec)}{ray}\n")
        exec_start = "/bin/bash /opt/hetinfra/serve.sh"
        extra = (pre_start + f"EnvironmentFile=/etc/hetinfra/env\nEnvironmentFile=-{SECRETS_ENV}\n"
                 + (f"EnvironmentFile=-{HEAD_ENV}\n" if worker else "") +
                 "Environment=PATH=/opt/vllm/bin:/usr/local/bin:/usr/bin:/bin\n")
    after = "network-online.target docker.service" if rt.runtime == "container" else "network-online.target"
    unit_file = (f"[Unit]\nDescription=hetinfra vLLM server\nAfter={after}\n\n"
                 f"[Service]\n{extra}ExecStart={exec_start}\nRestart=on-failure\nRestartSec=30\n\n"
                 "[Install]\nWantedBy=multi-user.target\n")
    return pre + f"cat > /etc/systemd/system/hetinfra-vllm.service <<'UNIT'\n{unit_file}UNIT\n"


def startup_script(unit: DeployedUnit, *, rank: int, runtime: RuntimeConfig, boot: BootConfig) -> str:
    """The VM's whole boot script for ``rank`` (0 = the replica's head) of ``unit``; it holds no secret."""
    if not 0 <= rank < unit.num_nodes:
        raise ValueError(f"rank {rank} outside the {unit.num_nodes} node(s) of {unit.name}")
    # a pipeline's workers look their head up; a bundle across nodes: its head looks the others up
    worker = unit.num_nodes > 1 and (rank == 0 if unit.bundle else rank > 0)
    if worker and not boot.find_head:
        raise ValueError(f"rank {rank} of {unit.name} needs a head lookup")
    env = "\n".join(_env_lines(unit, rank))
    if unit.bundle:
        role = "prefill/decode bundle" + (f", {unit.node_role(rank)[0]} node {rank} of {unit.num_nodes}"
                                          if unit.role_nodes else "")
    else:
        role = "single node" if unit.num_nodes == 1 else f"pipeline rank {rank} of {unit.num_nodes}"
    itype, gpu, gpus = unit.node_instance_type(rank), unit.node_gpu(rank), unit.node_gpus(rank)
    find_head = f"cat > /opt/hetinfra/find-head.sh <<'FINDHEAD'\n{boot.find_head}FINDHEAD\n" if worker else ""
    # a bundle: the hop's plan (hetinfra.compile.bundle.hop_plan), beside its virtualenv, on the hop's node
    hop = "" if not unit.bundle or rank else (f"install -d -m 700 {HOP_DIR}\ncat > {HOP_DIR}/plan.json <<'HOPPLAN'\n{unit.hop_plan}\nHOPPLAN\n")
    return f"""\
#!/bin/bash
# hetinfra: unit {unit.name} ({unit.service_model}), {itype} {gpu}:{gpus}, {role}
set -euo pipefail
exec >>{LOG} 2>&1
fail() {{ echo "hetinfra: $*" >&2; exit 1; }}
for i in $(seq 1 {DRIVER_WAIT_S // 10}); do nvidia-smi >/dev/null 2>&1 && break; sleep 10; done
nvidia-smi >/dev/null 2>&1 || fail "no NVIDIA driver after {DRIVER_WAIT_S} s (nvidia-smi failed); use a GPU image"
gpus=$(nvidia-smi -L | grep -c '^GPU ')
[ "$gpus" -eq {gpus} ] || fail "expected {gpus} x {gpu}, found $gpus GPU(s)"
install -d -m 700 /etc/hetinfra /opt/hetinfra /opt/hetinfra/hf
umask 077
cat > /opt/hetinfra/fetch-secrets.sh <<'FETCH'
{boot.fetch_secrets}FETCH
{find_head}{hop}chmod 700 /opt/hetinfra/*.sh
cat > /etc/hetinfra/env <<'ENV'
{env}
ENV
cat > /opt/hetinfra/serve.sh <<'SERVE'
{serve_script(unit, rank)}SERVE
chmod 700 /opt/hetinfra/serve.sh
{_runner(unit, runtime, worker)}systemctl daemon-reload
systemctl enable --now hetinfra-vllm.service
"""
