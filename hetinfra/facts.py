"""Facts about the clouds and the engine that the deploy paths need, each in one place with its
reason (in the style of SkyPilot's ``sky/serve/constants.py``). It imports nothing of hetinfra, so
every stage may read it, the spec's defaults included.

Ports, the engine settings the performance model plans with, and one registry per cloud: the gateway
VM type, the health-check prober ranges, the GPU labels the cloud's API takes, and the image families
of the two VM roles (``gpu``, ``gateway``; how they are pinned: hetinfra.compile.images).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# ---- names ----------------------------------------------------------------------------------------
#: a DNS label (RFC 1123): 1-63 lowercase letters, digits and '-', starting and ending with a letter or
#: digit. Service, stack and deployment-unit names become cloud resource names, SkyPilot services
#: and Kubernetes objects, which all take DNS labels
_DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\Z")  # \Z: no trailing newline slips through


def is_dns_label(value: str, *, letter_first: bool = False) -> bool:
    """Whether ``value`` is a DNS label; with ``letter_first`` it must also start with a letter (RFC
    1035), as deployment units and services do: some clouds' resource names (GCE, Azure VM names) must."""
    return bool(_DNS_LABEL.match(value)) and (not letter_first or value[:1].isalpha())


#: the longest API key (a client's HETINFRA_API_KEY entry, the engines' VLLM_API_KEY)
MAX_KEY = 256


def key_problem(key: str) -> str | None:
    """Why ``key`` cannot be an API key sent as ``Authorization: Bearer <key>`` (None when it can);
    never quotes the key. HTTP headers carry bytes servers decode as Latin-1, so a key with 'é' or an
    invisible character pasted with it matches from one client and not another; whitespace or a
    newline does not survive an env file (the VMs' secrets.env dropped a VLLM_API_KEY holding one,
    and vLLM then served without a key); an empty key turns authentication on with no key that passes."""
    if not key:
        return "has an empty key"
    if len(key) > MAX_KEY:
        return f"has a key longer than {MAX_KEY} characters"
    bad = next((ch for ch in key if not (ch.isascii() and ch.isprintable()) or ch.isspace()), None)
    if bad is not None:
        return f"has a key holding {'whitespace' if bad.isspace() else 'the character'} U+{ord(bad):04X}"
    return None


# ---- scale ----------------------------------------------------------------------------------------
#: the most GPUs hetinfra plans (hetinfra.plan.planner refuses demand certain to need more), and so the
#: most replicas, instances or engines one allocation of plan.json may count: each holds at least one
#: GPU (hetinfra.document.base; state.json's live counts and the Kubernetes answers use the same figure)
MAX_GPUS = 1_000_000
#: the most $/h one instance may cost: an offers CSV's price bound (price_feeds.offers.RANGES), and so
#: every price per instance, node or stage plan.json and state.json state (hetinfra.document.base.Price)
MAX_PRICE_USD_PER_HOUR = 100000
#: the most a time read from a file may lie ahead of now (a clock a day fast, a time zone misread): a
#: demand log's rows (hetinfra.replan.log_read.AHEAD_S) and a price's as-of (price_feeds.offers.as_of_problem)
CLOCK_AHEAD_S = 86_400

# ---- the simulator's workload ---------------------------------------------------------------------
#: burst_cv's domain (the spec's planning.verify.burst_cv, ``simulate --burst-cv``, and
#: hetinfra.sim.workload.WorkloadConfig, which every simulation passes): inter-arrival gaps are gamma
#: of shape 1 / cv^2. Below MIN_BURST_CV that shape (10,000 and more) is an even stream in all but name,
#: and by cv 1e-155 it overflows to inf, where random.gammavariate never returns; above MAX_BURST_CV a
#: shape under 0.01 sends nearly every request in one burst
MIN_BURST_CV, MAX_BURST_CV = 0.01, 10.0
#: the least load a simulation replays (verify.load and ``simulate --load`` too): a thousandth of the
#: demand (a load of 1e-310 made every arrival gap infinite, and simulation.json NaN)
MIN_LOAD = 1e-3
#: the most load a simulation replays (verify.load is at most 10): far past any fleet's capacity, and short
#: of the float overflow that 1e308 reached
MAX_LOAD = 1000.0

# ---- ports ----------------------------------------------------------------------------------------
#: vLLM's OpenAI-compatible endpoint on every replica (``deploy.port``): vLLM's own default, so a unit
#: started by hand answers where the plan says
VLLM_PORT = 8000
#: the gateway's port (``deploy.gateway.port``): the usual unprivileged HTTP alternative, distinct from
#: vLLM's so both can run on one host in a test or a small deployment
GATEWAY_PORT = 8080
#: SSH, opened only to ``deploy.ssh_cidrs`` (hetinfra.compile.network.firewall_rules)
SSH_PORT = 22

# ---- Ray (multi-node pipelines; the script: hetinfra.compile.ray) --------------------------------
#: the GCS port of a pipeline's user-space Ray cluster: Ray's default. SkyPilot runs its own Ray on
#: every node at 6380 (GCS), 8266 (dashboard) and 52365 (dashboard agent), so ours keeps Ray's
#: defaults 6379/8265 and moves the dashboard agent to 52366 (SkyPilot's sky_templates/ray/
#: start_cluster makes the same choice). Every deploy path uses these ports, so one script serves all
RAY_PORT = 6379
RAY_DASHBOARD_PORT = 8265
RAY_DASHBOARD_AGENT_PORT = 52366
#: how long the head waits for every node of its replica to join, and a worker for the head to
#: answer, before it gives up: the longer of the two waits the deploy paths had (SkyPilot 600 s, the
#: VMs 900 s). The wait ends as soon as every node is in, so a long bound costs nothing on a healthy
#: start; a short one fails a whole replica (SkyPilot relaunches it, systemd restarts vLLM on the
#: VMs) when one worker boots late: GCE's image may take 10 minutes to load the driver before the
#: engine image is pulled, and the VMs' workers are separate groups that start on their own
RAY_JOIN_TIMEOUT_S = 900
#: seconds between two looks at the cluster while waiting
RAY_POLL_S = 5
#: how long `hetinfra profile OUT --launch` waits for one `sky launch` (provisioning, the image pull,
#: the model's download and the benchmark): an hour holds a 70B's first start on a slow region; past
#: it the whole launch's process group is stopped and the command fails with exit 4 (hetinfra.procs)
SKY_LAUNCH_TIMEOUT_S = 3600
#: installed beside ray[default] on every path that installs Ray for a pipeline (SkyPilot's setup,
#: the Pulumi VMs' virtualenv): the Ray CLI breaks with click 8.3.0/8.3.1 (ray-project/ray#56747)
RAY_CLICK_PIN = "click<8.3.0"

# ---- engine ---------------------------------------------------------------------------------------
#: the weight precisions a model may be served at (spec ``models[].precision``), most accurate first:
#: 16-bit (bf16 where the GPU has it, else fp16), FP8 (online or a pre-quantized checkpoint), and the
#: AWQ/GPTQ checkpoints' int8 and int4 (hetinfra.compile.engine maps each to vLLM's flags)
PRECISIONS = ("bf16", "fp16", "fp8", "int8", "int4")
#: --gpu-memory-utilization the estimator plans with and the artifacts pin (vLLM's own default is
#: 0.9 too; pinned so that a vLLM release changing it cannot invalidate the plan's KV-cache budget)
GPU_MEMORY_UTILIZATION = 0.9
#: --max-num-seqs the estimator and the simulator plan with and the artifacts pin (vLLM's default
#: since V1): the largest batch a replica runs
MAX_NUM_SEQS = 256


# ---- clouds ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CloudFacts:
    """What the deploy paths need to know about one cloud."""

    #: CPU VM type of the gateway (``deploy.gateway.<cloud key>`` default): 2 vCPUs are plenty for a
    #: proxy that streams tokens, and the type is in every region of the cloud
    gateway_vm_type: str
    #: the spec key under ``deploy.gateway`` that overrides it
    gateway_vm_key: str
    #: source ranges of the cloud's own health-check probers (autohealing, load balancers), allowed to
    #: the vLLM port so groups can heal without opening it to the world; empty where the check comes
    #: from inside the network (AWS ELB) or the platform's fixed address (Azure)
    health_check_ranges: tuple[str, ...] = ()
    #: extra prober ranges of external (public) load balancers
    external_lb_check_ranges: tuple[str, ...] = ()
    #: the VM images by role: a lookup of the newest (pinned by hetinfra.compile.images)
    images: dict[str, dict[str, str]] = field(default_factory=dict)
    #: GPU name (the catalog's) -> the accelerator type the cloud's API takes, where it takes one
    gpu_labels: dict[str, str] = field(default_factory=dict)


AWS = CloudFacts(
    gateway_vm_type="c7i.large", gateway_vm_key="aws_instance_type",
    images={"gpu": {"owner": "amazon", "name": "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)*"},
            "gateway": {"owner": "099720109477", "name": "ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-amd64-server-*"}})
GCP = CloudFacts(
    gateway_vm_type="e2-standard-2", gateway_vm_key="gcp_machine_type",
    # Google's probers: autohealing and internal load balancers; and external passthrough load balancers
    health_check_ranges=("35.191.0.0/16", "130.211.0.0/22"),
    external_lb_check_ranges=("209.85.152.0/22", "209.85.204.0/22"),
    images={"gpu": {"project": "deeplearning-platform-release", "family": "common-cu124-ubuntu-2204-py310"},
            "gateway": {"project": "ubuntu-os-cloud", "family": "ubuntu-2204-lts"}},
    gpu_labels={"T4": "nvidia-tesla-t4", "V100": "nvidia-tesla-v100", "P100": "nvidia-tesla-p100",
                "P4": "nvidia-tesla-p4", "L4": "nvidia-l4", "A100": "nvidia-tesla-a100",
                "A100-80GB": "nvidia-a100-80gb", "H100": "nvidia-h100-80gb", "H100-MEGA": "nvidia-h100-mega-80gb",
                "H200": "nvidia-h200-141gb", "B200": "nvidia-b200"})
AZURE = CloudFacts(
    gateway_vm_type="Standard_D2s_v5", gateway_vm_key="azure_vm_size",
    images={"gpu": {"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc", "sku": "2204"},
            "gateway": {"publisher": "Canonical", "offer": "0001-com-ubuntu-server-jammy", "sku": "22_04-lts-gen2"}})

#: cloud -> its facts: the clouds the IaC paths deploy to
CLOUDS: dict[str, CloudFacts] = {"aws": AWS, "gcp": GCP, "azure": AZURE}


def fit_label(name: str, limit: int = 63) -> str:
    """``name`` when it fits ``limit`` characters, else cut and ending in ``-`` and 8 hex digits of
    the SHA-256 of the whole name: the one way a generated resource name (a SkyPilot cluster, a node
    pool) is shortened, so two long names that share their first ``limit`` characters stay distinct."""
    if len(name) <= limit:
        return name
    import hashlib

    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return name[: limit - len(digest) - 1].rstrip("-") + "-" + digest

#: the LoRA ranks vLLM's --max-lora-rank accepts (../shared/notes/pd-lora.md, B: vllm/config/lora.py):
#: the spec's adapter check and the engine flags read this one tuple
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)

#: the most vLLM engines (Allocation.engine_count, over every allocation) a plan may run for the
#: simulator to hold it: each engine's scheduler state is allocated at once (stop 57: services/chat.yaml
#: planned at 20,000 req/s, 4,465 engines, simulated 100,000 requests in 0.9 s and 0.29 GB; at 1,000,000
#: req/s, 241,032 engines, a MemoryError in the compiled core under an 8 GB limit). 50,000 keeps a run
#: near 2 GB (hetinfra.sim.plan_load refuses more; hetinfra.plan.pipeline points there)
MAX_SIMULATED_ENGINES = 50_000
