"""Tests of the SkyPilot compiler (hetinfra.compile.skypilot).

Pure tests (no SkyPilot needed): names, unit validation, exact vLLM command lines, secrets,
golden files, import hygiene, and the run scripts executed by bash against stub `ray`/`vllm`.

SkyPilot tests (skipped when `sky` is not importable): every rendered YAML is loaded with
SkyPilot 0.14.1's own parser and service validator; the instance types are checked against the
catalog, and SkyPilot's optimizer prices each unit on the shared catalog extract, offline
(a socket guard fails the test on any network connection attempt).

Regenerate golden files with HETINFRA_UPDATE_GOLDEN=1.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from hetinfra.compile.engine import SECRET_NAMES, serve_envs, vllm_serve_command
from hetinfra.compile.skypilot import render_all, render_task, task_config, write_all
from hetinfra.compile.unit import DeployedUnit
from hetinfra.plan.naming import unit_name
from hetinfra.facts import RAY_JOIN_TIMEOUT_S, RAY_POLL_S

REPO = Path(__file__).resolve().parents[2]
GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
SHARED_CATALOG = REPO.parent / "shared" / "data" / "skypilot-catalog" / "v8"


# --------------------------------------------------------------------------------------------
# Sample units (the instance types, regions and prices exist in ../shared/data/skypilot-catalog)
# --------------------------------------------------------------------------------------------

def _unit(model, source, cloud, region, itype, gpu, gpus, tp, pp, eng, replicas, spot, prec, mml,
          **kw) -> DeployedUnit:
    return DeployedUnit(
        name=unit_name(model, cloud, region, itype, spot=spot),
        service_model=model, source=source, cloud=cloud, region=region, instance_type=itype,
        gpu=gpu, gpus_per_instance=gpus, tp=tp, pp=pp, engines_per_instance=eng,
        replicas=replicas, spot=spot, precision=prec, max_model_len=mml, **kw)


ENGINE = dict(runtime="container", vllm_version="0.12.0")  # what plans pass (deploy.runtime, deploy.vllm_version)
VENV = dict(runtime="virtualenv", vllm_version="0.12.0")

# L4_AWS fails over to gcp/us-east4 (cheaper in SkyPilot's catalog: `ordered` must still try the
# planned offer first) and then aws/us-west-2.
L4_AWS = _unit("chat-7b", "meta-llama/Llama-2-7b-chat-hf", "aws", "us-east-1", "g6.xlarge",
               "L4", 1, 1, 1, 1, 3, False, "bf16", 4096, disk_size=130, **ENGINE,
               alternates=(("gcp", "us-east4", "g2-standard-4", 0.7045), ("aws", "us-west-2", "g6.xlarge", 0.8048)))
A10G_DP4 = _unit("chat-7b", "meta-llama/Llama-2-7b-chat-hf", "aws", "us-east-1", "g5.12xlarge",
                 "A10G", 4, 1, 1, 4, 2, False, "fp16", 4096, **VENV)
H100_GCP_SPOT = _unit("llama-70b", "meta-llama/Llama-3.1-70B-Instruct", "gcp", "us-central1",
                      "a3-highgpu-8g", "H100", 8, 8, 1, 1, 2, True, "bf16", 16384, ondemand_fallback=True,
                      disk_size=240, **ENGINE, alternates=(("gcp", "us-west1", "a3-highgpu-8g", 25.55326),))
A100_AZ_PP2 = _unit("llama-70b", "meta-llama/Llama-3.1-70B-Instruct", "azure", "westus3",
                    "Standard_NC96ads_A100_v4", "A100-80GB", 4, 4, 2, 1, 1, False, "fp8", 8192,
                    layer_partition=(38, 42), **VENV,
                    alternates=(("azure", "eastus", "Standard_NC96ads_A100_v4", 14.692),))
L4_GCP_AUTOSCALE = _unit("chat-7b", "TheBloke/Llama-2-7B-Chat-AWQ", "gcp", "us-east4",
                         "g2-standard-4", "L4", 1, 1, 1, 1, 2, False, "int4", 4096,
                         target_qps_per_replica=1.5, **ENGINE)

# TP2 x PP2 inside one 4 x L40S node (vLLM's mp backend, no Ray): a 70B fp8 model whose TP4 layout
# is slower (issue 17; tests/plan/test_layouts.py)
L40S_AWS_TP2PP2 = _unit("code-70b", "meta-llama/Llama-3.1-70B-Instruct", "aws", "us-east-1", "g6e.12xlarge",
                        "L40S", 4, 2, 2, 1, 2, False, "fp8", 8192, layer_partition=(40, 40), nodes=1,
                        disk_size=250, **ENGINE)

ALL_UNITS = [L4_AWS, A10G_DP4, H100_GCP_SPOT, A100_AZ_PP2, L4_GCP_AUTOSCALE, L40S_AWS_TP2PP2]
UNIT_IDS = ["l4-aws", "a10g-dp4", "h100-gcp-spot", "a100-azure-pp2", "l4-gcp-autoscale", "l40s-aws-tp2pp2"]

# Expected hourly price of one replica (all nodes), read by hand from the shared catalog rows:
#   aws g6.xlarge us-east-1 Price 0.8048; aws g5.12xlarge us-east-1 Price 5.672;
#   gcp a3-highgpu-8g us-central1 SpotPrice 2.75246 + H100x8 SpotPrice 22.8008;
#   azure Standard_NC96ads_A100_v4 westus3 Price 14.692 x 2 nodes;
#   gcp g2-standard-4 us-east4 Price 0.14631 + L4x1 Price 0.55821.
EXPECTED_COST_PER_HOUR = {
    "l4-aws": 0.8048,
    "a10g-dp4": 5.672,
    "h100-gcp-spot": 2.75246 + 22.8008,
    "a100-azure-pp2": 2 * 14.692,
    "l4-gcp-autoscale": 0.14631 + 0.55821,
    "l40s-aws-tp2pp2": 10.49264,  # aws g6e.12xlarge us-east-1 Price, ONE node
}


# --------------------------------------------------------------------------------------------
# Names and unit validation
# --------------------------------------------------------------------------------------------

def test_unit_name_examples():
    assert unit_name("chat-7b", "aws", "us-east-1", "g6.xlarge") == "chat-7b-aws-us-east-1-g6-xlarge"
    assert unit_name("Chat_7B", "AWS", "us-east-1", "g6.xlarge", spot=True) == \
        "chat-7b-aws-us-east-1-g6-xlarge-spot"
    assert unit_name("llama-70b", "azure", "westus3", "Standard_NC96ads_A100_v4") == \
        "llama-70b-azure-westus3-standard-nc96ads-a100-v4"
    assert unit_name("7b", "gcp", "us-east4", "g2-standard-4", suffix="t3") == \
        "u-7b-gcp-us-east4-g2-standard-4-t3"


def test_unit_name_long_is_cut_deterministically_and_stays_distinct():
    a = unit_name("meta-llama-3.1-405b-instruct-fp8-long-name", "azure", "southcentralus",
                  "Standard_ND96isr_H100_v5", spot=True)
    b = unit_name("meta-llama-3.1-405b-instruct-fp8-long-name", "azure", "southcentralus",
                  "Standard_ND96isr_H200_v5", spot=True)
    assert len(a) <= 63 and len(b) <= 63
    assert a != b
    assert a == unit_name("meta-llama-3.1-405b-instruct-fp8-long-name", "azure", "southcentralus",
                          "Standard_ND96isr_H100_v5", spot=True)
    for n in (a, b):
        assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", n), n
        assert re.search(r"-[0-9a-f]{8}$", n), n


@pytest.mark.parametrize("changes, message", [
    (dict(name="Bad_Name"), "name must be"),
    (dict(cloud="oci"), "cloud must be one of"),
    (dict(engines_per_instance=2), "must equal gpus_per_instance"),
    (dict(tp=0), "tp must be a positive integer"),
    (dict(replicas=0), "replicas must be a positive integer"),
    (dict(precision="fp4"), "precision must be one of"),
    (dict(gpu="T4"), "no BF16 support"),
    (dict(layer_partition=(16, 16)), "layer_partition must hold pp (1)"),
    (dict(target_qps_per_replica=0.0), "target_qps_per_replica must be a positive number"),
    (dict(target_qps_per_replica=float("nan")), "target_qps_per_replica must be a positive number"),
    (dict(source="my model"), "source must be a non-empty string"),
    (dict(port=70000), "port must be at most 65535"),
])
def test_unit_validation_rejects(changes, message):
    fields = {f: getattr(L4_AWS, f) for f in L4_AWS.__dataclass_fields__}
    fields.update(changes)
    with pytest.raises(ValueError, match=re.escape(message)):
        DeployedUnit(**fields)


def test_pipeline_unit_validation():
    base = {f: getattr(A100_AZ_PP2, f) for f in A100_AZ_PP2.__dataclass_fields__}
    with pytest.raises(ValueError, match="tp \\(2\\) x pp \\(2\\) must equal nodes \\(2\\) x gpus_per_instance \\(4\\)"):
        DeployedUnit(**{**base, "tp": 2})
    # TP x PP across nodes: 2 stages per node of TP2 on two 4-GPU nodes
    assert DeployedUnit(**{**base, "tp": 2, "pp": 4, "layer_partition": (20, 20, 20, 20)}).num_nodes == 2
    # inside one node: tp x pp x engines = the node's GPUs
    one = {f: getattr(L40S_AWS_TP2PP2, f) for f in L40S_AWS_TP2PP2.__dataclass_fields__}
    with pytest.raises(ValueError, match="tp \\(2\\) x pp \\(2\\) x engines_per_instance \\(2\\) must equal"):
        DeployedUnit(**{**one, "engines_per_instance": 2})
    assert DeployedUnit(**{**one, "gpus_per_instance": 8, "instance_type": "g6e.48xlarge",
                      "engines_per_instance": 2}).num_nodes == 1
    assert DeployedUnit(**{**base, "nodes": None}).num_nodes == 2  # default: one node per stage
    with pytest.raises(ValueError, match="engines_per_instance must be 1"):
        DeployedUnit(**{**base, "engines_per_instance": 2})
    with pytest.raises(ValueError, match="layer_partition must hold pp \\(2\\)"):
        DeployedUnit(**{**base, "layer_partition": (20, 20, 40)})
    # lists are accepted and stored as tuples (the dataclass stays hashable)
    u = DeployedUnit(**{**base, "layer_partition": [40, 40]})
    assert u.layer_partition == (40, 40) and hash(u)


# --------------------------------------------------------------------------------------------
# vLLM command lines (exact)
# --------------------------------------------------------------------------------------------

EXPECTED_SERVE = {
    "l4-aws": 'vllm serve "$MODEL_ID" --served-model-name chat-7b --tensor-parallel-size 1 '
              '--max-model-len 4096 ' '--gpu-memory-utilization 0.9 --max-num-seqs 256 --max-num-batched-tokens 2048 '
              '--dtype bfloat16 --host 0.0.0.0 --port 8000',
    "a10g-dp4": 'vllm serve "$MODEL_ID" --served-model-name chat-7b --tensor-parallel-size 1 '
                '--data-parallel-size 4 --max-model-len 4096 ' '--gpu-memory-utilization 0.9 --max-num-seqs 256 --max-num-batched-tokens 2048 '
                '--dtype float16 --host 0.0.0.0 --port 8000',
    "h100-gcp-spot": 'vllm serve "$MODEL_ID" --served-model-name llama-70b '
                     '--tensor-parallel-size 8 --max-model-len 16384 ' '--gpu-memory-utilization 0.9 --max-num-seqs 256 --max-num-batched-tokens 8192 '
                     '--dtype bfloat16 --host 0.0.0.0 --port 8000',
    "a100-azure-pp2": 'vllm serve "$MODEL_ID" --served-model-name llama-70b '
                      '--tensor-parallel-size 4 --pipeline-parallel-size 2 '
                      '--distributed-executor-backend ray --max-model-len 8192 ' '--gpu-memory-utilization 0.9 --max-num-seqs 256 --max-num-batched-tokens 2048 '
                      '--quantization fp8 --host 0.0.0.0 --port 8000',
    "l4-gcp-autoscale": 'vllm serve "$MODEL_ID" --served-model-name chat-7b '
                        '--tensor-parallel-size 1 --max-model-len 4096 ' '--gpu-memory-utilization 0.9 --max-num-seqs 256 --max-num-batched-tokens 2048 '
                        '--host 0.0.0.0 --port 8000',
    "l40s-aws-tp2pp2": 'vllm serve "$MODEL_ID" --served-model-name code-70b --tensor-parallel-size 2 '
                       '--pipeline-parallel-size 2 --distributed-executor-backend mp --max-model-len 8192 '
                       '--gpu-memory-utilization 0.9 --max-num-seqs 256 --max-num-batched-tokens 2048 '
                       '--quantization fp8 --host 0.0.0.0 --port 8000',
}


@pytest.mark.parametrize("unit, uid", list(zip(ALL_UNITS, UNIT_IDS)), ids=UNIT_IDS)
def test_vllm_serve_command_exact(unit, uid):
    assert vllm_serve_command(unit) == EXPECTED_SERVE[uid]
    # and the run script of the task contains exactly this line (a pipeline head execs it)
    assert any(line.strip().removeprefix("exec ") == EXPECTED_SERVE[uid] for line in task_config(unit)["run"].splitlines())


def test_vllm_serve_command_model_arg_and_port():
    u = DeployedUnit(**{**{f: getattr(L4_AWS, f) for f in L4_AWS.__dataclass_fields__}, "port": 9000})
    cmd = vllm_serve_command(u, model_arg="meta-llama/Llama-2-7b-chat-hf")
    assert cmd.startswith("vllm serve meta-llama/Llama-2-7b-chat-hf --served-model-name chat-7b ")
    assert cmd.endswith("--port 9000")
    assert task_config(u)["resources"]["ports"] == 9000


def test_precision_notes_and_prequantized_fp8():
    # int4 / int8: dtype auto, no --quantization, a note that an AWQ/GPTQ checkpoint is expected
    text = render_task(L4_GCP_AUTOSCALE)
    assert "--dtype" not in text and "--quantization" not in text
    assert "pre-quantized checkpoint (AWQ/GPTQ) is expected" in text
    # fp8 of a 16-bit checkpoint: online quantization flag
    assert "--quantization fp8" in vllm_serve_command(A100_AZ_PP2)
    # fp8 checkpoint (its own quantization_config): no conflicting --quantization flag
    fields = {f: getattr(A100_AZ_PP2, f) for f in A100_AZ_PP2.__dataclass_fields__}
    fp8_ckpt = DeployedUnit(**{**fields, "source": "RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8"})
    assert "--quantization" not in vllm_serve_command(fp8_ckpt)
    assert "pre-quantized to FP8" in render_task(fp8_ckpt)


# --------------------------------------------------------------------------------------------
# Rendered YAML (pure)
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("unit", ALL_UNITS, ids=UNIT_IDS)
def test_render_structure(unit):
    text = render_task(unit)
    assert text.startswith("# Generated by hetinfra ")
    assert text.splitlines()[0].endswith("; do not edit.")
    cfg = yaml.safe_load(text)
    assert cfg == task_config(unit)
    assert list(cfg)[:2] == ["name", "resources"]
    assert cfg["name"] == unit.name
    common = {"accelerators": {unit.gpu: unit.gpus_per_instance}, "use_spot": unit.spot, "ports": 8000}
    if unit.disk_size:
        common["disk_size"] = unit.disk_size
    if unit.runtime == "container":
        common["image_id"] = "docker:vllm/vllm-openai:v0.12.0"
    if unit.alternates:  # the planned offer first, then the alternates as given
        assert cfg["resources"] == {**common, "ordered": [
            {"infra": f"{unit.cloud}/{unit.region}", "instance_type": unit.instance_type}] + [
            {"infra": f"{a.cloud}/{a.region}", "instance_type": a.instance_type} for a in unit.alternates]}
    else:
        assert cfg["resources"] == {"infra": f"{unit.cloud}/{unit.region}", **common,
                                    "instance_type": unit.instance_type}
    assert cfg.get("num_nodes") == (unit.num_nodes if unit.num_nodes > 1 else None)
    assert cfg["envs"]["MODEL_ID"] == unit.source
    assert cfg["secrets"] == {"HF_TOKEN": None, "VLLM_API_KEY": None}
    if unit.runtime == "virtualenv":
        assert cfg["setup"].splitlines()[0] == "pip install vllm==0.12.0"
    else:  # the image brings vLLM: nothing to install on a single node
        assert "vllm" not in cfg.get("setup", "")
    svc = cfg["service"]
    assert svc["readiness_probe"]["path"] == "/health"
    assert svc["readiness_probe"]["initial_delay_seconds"] >= 1200
    fallback = {"dynamic_ondemand_fallback": True} if unit.ondemand_fallback else {}
    if unit.target_qps_per_replica is None and not unit.ondemand_fallback:
        assert svc["replicas"] == unit.replicas and "replica_policy" not in svc
    elif unit.target_qps_per_replica is None:
        assert "replicas" not in svc and svc["replica_policy"] == {"min_replicas": unit.replicas, **fallback}
    else:
        assert "replicas" not in svc
        assert svc["replica_policy"] == {"min_replicas": unit.replicas,
                                         "max_replicas": 2 * unit.replicas,
                                         "target_qps_per_replica": unit.target_qps_per_replica, **fallback}


def test_setup_pins_the_engine():
    """virtualenv: pip pins deploy.vllm_version; container: the image's vLLM, only Ray's dashboard extras for a
    pipeline, pinned to the Ray the engine came with; an unpinned unit (no version) installs plain `vllm`."""
    assert task_config(A10G_DP4)["setup"] == "pip install vllm==0.12.0\n"
    pp = task_config(A100_AZ_PP2)["setup"].splitlines()
    assert pp[0] == "pip install vllm==0.12.0"
    assert pp[-1] == "pip install \"ray[default]==$(python3 -c 'import ray; print(ray.__version__)')\" \"click<8.3.0\""
    in_image = task_config(dataclasses.replace(A100_AZ_PP2, **ENGINE))
    assert in_image["setup"].splitlines()[-1] == pp[-1] and "pip install vllm" not in in_image["setup"]
    assert in_image["resources"]["image_id"] == "docker:vllm/vllm-openai:v0.12.0"
    assert task_config(dataclasses.replace(A10G_DP4, vllm_version=None))["setup"] == "pip install vllm\n"
    assert "setup" not in task_config(L4_AWS)
    header = render_task(L4_AWS)
    assert "#   engine: image vllm/vllm-openai:v0.12.0; boot disk 130 GB\n" in header
    assert "#     gcp/us-east4 g2-standard-4 $0.7045/h\n#     aws/us-west-2 g6.xlarge $0.8048/h\n" in header
    assert "SkyPilot opens port 8000 and SSH to 0.0.0.0/0" in header

def test_layer_partition_env():
    assert serve_envs(A100_AZ_PP2) == {"MODEL_ID": "meta-llama/Llama-3.1-70B-Instruct",
                                       "VLLM_PP_LAYER_PARTITION": "38,42"}
    assert "VLLM_PP_LAYER_PARTITION: 38,42" in render_task(A100_AZ_PP2)
    assert "VLLM_PP_LAYER_PARTITION" not in render_task(L4_AWS)


def test_autoscale_max_replicas_at_least_one_more():
    fields = {f: getattr(L4_GCP_AUTOSCALE, f) for f in L4_GCP_AUTOSCALE.__dataclass_fields__}
    u = DeployedUnit(**{**fields, "replicas": 1})
    pol = task_config(u)["service"]["replica_policy"]
    assert (pol["min_replicas"], pol["max_replicas"]) == (1, 2)


def test_no_secret_value_in_yaml(monkeypatch):
    sentinels = {"HF_TOKEN": "hf_SENTINELtoken123", "VLLM_API_KEY": "sk-SENTINEL-key-456"}
    for k, v in sentinels.items():
        monkeypatch.setenv(k, v)
    for unit in ALL_UNITS:
        text = render_task(unit)
        for v in sentinels.values():
            assert v not in text
        assert "SENTINEL" not in text
        cfg = yaml.safe_load(text)
        assert set(SECRET_NAMES) == {"HF_TOKEN", "VLLM_API_KEY"}
        assert cfg["secrets"] == {k: None for k in SECRET_NAMES}
        assert not set(SECRET_NAMES) & set(cfg["envs"])
        # the key reaches vLLM through its environment only, never on the command line
        assert "--api-key" not in cfg["run"]


def test_render_all_and_write_all(tmp_path):
    files = render_all(ALL_UNITS)
    assert list(files) == [f"{u.name}.yaml" for u in ALL_UNITS]
    assert files["chat-7b-aws-us-east-1-g6-xlarge.yaml"] == render_task(L4_AWS)
    assert "llama-70b-gcp-us-central1-a3-highgpu-8g-spot.yaml" in files
    with pytest.raises(ValueError, match="duplicate"):
        render_all([L4_AWS, L4_AWS])
    write_all(ALL_UNITS, tmp_path / "skypilot")
    assert sorted(p.name for p in (tmp_path / "skypilot").iterdir()) == sorted(files)
    assert (tmp_path / "skypilot" / f"{A100_AZ_PP2.name}.yaml").read_text() == render_task(A100_AZ_PP2)


def test_render_is_deterministic():
    assert render_all(ALL_UNITS) == render_all(list(ALL_UNITS))
    assert render_task(L4_AWS) == render_task(DeployedUnit(**{f: getattr(L4_AWS, f)
                                                         for f in L4_AWS.__dataclass_fields__}))


# --------------------------------------------------------------------------------------------
# Golden files
# --------------------------------------------------------------------------------------------

GOLDEN = {
    "single-node-l4-aws.yaml": L4_AWS,
    "multi-node-pp2-azure.yaml": A100_AZ_PP2,
    "autoscale-l4-gcp-int4.yaml": L4_GCP_AUTOSCALE,
    "single-node-tp2-pp2-l40s-aws.yaml": L40S_AWS_TP2PP2,
    "spot-fallback-h100-gcp.yaml": H100_GCP_SPOT,
}


def _normalize_version(text: str) -> str:
    return re.sub(r"^# Generated by hetinfra \S+;", "# Generated by hetinfra <version>;", text)


@pytest.mark.parametrize("fname", sorted(GOLDEN))
def test_golden(fname):
    got = _normalize_version(render_task(GOLDEN[fname]))
    path = GOLDEN_DIR / fname
    if os.environ.get("HETINFRA_UPDATE_GOLDEN") == "1":
        GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(got, encoding="utf-8")
    assert path.exists(), f"missing golden file {path}; run with HETINFRA_UPDATE_GOLDEN=1"
    assert got == path.read_text(encoding="utf-8")


# --------------------------------------------------------------------------------------------
# Import hygiene
# --------------------------------------------------------------------------------------------

def test_import_does_not_import_sky():
    code = textwrap.dedent("""
        import sys, json
        import hetinfra.compile.skypilot as m
        m.render_task  # touch
        heavy = sorted(n for n in sys.modules
                       if n.split('.')[0] in ('sky', 'sky_templates', 'pulumi', 'pyomo', 'ray', 'vllm'))
        print(json.dumps(heavy))
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


# --------------------------------------------------------------------------------------------
# Run scripts executed by bash against stub commands
# --------------------------------------------------------------------------------------------

_STUB = """#!/bin/bash
echo "$(basename "$0") $*" >> "$STUB_LOG"
{extra}
"""


def _stub_bin(tmp_path: Path, pipeline_nodes: int) -> Path:
    b = tmp_path / "bin"
    b.mkdir()
    stubs = {
        "vllm": "",
        "ray": "",
        # the node-count probe on the head: report that all nodes have joined
        "python3": f'echo "ray-probe-output"; echo {pipeline_nodes}',
        "pip": "",
    }
    for name, extra in stubs.items():
        p = b / name
        p.write_text(_STUB.format(extra=extra))
        p.chmod(0o755)
    return b


def _run_bash(script: str, env: dict, tmp_path: Path) -> subprocess.CompletedProcess:
    path = tmp_path / "script.sh"
    path.write_text(script)
    return subprocess.run(["bash", str(path)], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not available")
@pytest.mark.parametrize("unit", ALL_UNITS, ids=UNIT_IDS)
def test_scripts_are_valid_bash(unit, tmp_path):
    cfg = task_config(unit)
    for key in ("setup", "run")[0 if "setup" in cfg else 1:]:
        p = tmp_path / f"{key}.sh"
        p.write_text(cfg[key])
        out = subprocess.run(["bash", "-n", str(p)], capture_output=True, text=True)
        assert out.returncode == 0, (key, out.stderr)


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not available")
def test_single_node_run_script_invokes_vllm(tmp_path):
    b = _stub_bin(tmp_path, 1)
    log = tmp_path / "log"
    cfg = task_config(A10G_DP4)
    env = {"PATH": f"{b}{os.pathsep}{os.environ['PATH']}", "STUB_LOG": str(log),
           **cfg["envs"], "VLLM_API_KEY": "k-123", "SKYPILOT_NODE_RANK": "0"}
    out = _run_bash(cfg["run"], env, tmp_path)
    assert out.returncode == 0, out.stderr
    assert log.read_text().splitlines() == [
        "vllm serve meta-llama/Llama-2-7b-chat-hf --served-model-name chat-7b "
        "--tensor-parallel-size 1 --data-parallel-size 4 --max-model-len 4096 --gpu-memory-utilization 0.9 "
        "--max-num-seqs 256 --max-num-batched-tokens 2048 --dtype float16 --host 0.0.0.0 --port 8000"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not available")
@pytest.mark.parametrize("rank", [0, 1])
def test_pipeline_run_script_per_rank(rank, tmp_path):
    b = _stub_bin(tmp_path, A100_AZ_PP2.pp)
    log = tmp_path / "log"
    cfg = task_config(A100_AZ_PP2)
    env = {"PATH": f"{b}{os.pathsep}{os.environ['PATH']}", "STUB_LOG": str(log),
           **cfg["envs"], "VLLM_API_KEY": "k-123",
           "SKYPILOT_NODE_RANK": str(rank), "SKYPILOT_NODE_IPS": "10.0.0.5\n10.0.0.6",
           "SKYPILOT_NUM_NODES": "2"}
    out = _run_bash(cfg["run"], env, tmp_path)
    assert out.returncode == 0, out.stderr
    calls = log.read_text().splitlines()
    agent = "--dashboard-agent-listen-port=52366"
    if rank == 0:
        assert calls[0] == ("ray start --head --port=6379 --dashboard-port=8265 "
                            f"--disable-usage-stats --num-gpus=4 --node-ip-address=10.0.0.5 {agent}")
        assert calls[1].startswith("python3 -c import ray")  # node-count probe
        assert calls[-1] == (
            "vllm serve meta-llama/Llama-3.1-70B-Instruct --served-model-name llama-70b "
            "--tensor-parallel-size 4 --pipeline-parallel-size 2 --distributed-executor-backend ray "
            "--max-model-len 8192 --gpu-memory-utilization 0.9 --max-num-seqs 256 --max-num-batched-tokens 2048 "
            "--quantization fp8 --host 0.0.0.0 --port 8000")
        assert not any(c.startswith("ray start --address") for c in calls)
    else:
        assert calls[0] == "ray health-check --address=10.0.0.5:6379"
        assert calls[-1] == ("ray start --address=10.0.0.5:6379 --disable-usage-stats --num-gpus=4 "
                             f"--node-ip-address=10.0.0.6 {agent} --block")
        assert not any(c.startswith("vllm") for c in calls)


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not available")
def test_pipeline_head_fails_when_nodes_do_not_join(tmp_path):
    b = _stub_bin(tmp_path, 1)  # probe keeps reporting 1 of 2 nodes
    # make the wait loop short: replace the loop's bound and the sleeps in the rendered script
    tries = f"seq 1 {RAY_JOIN_TIMEOUT_S // RAY_POLL_S}"
    script = task_config(A100_AZ_PP2)["run"]
    assert tries in script and f"sleep {RAY_POLL_S}" in script
    script = script.replace(tries, "seq 1 2").replace(f"sleep {RAY_POLL_S}", "true")
    env = {"PATH": f"{b}{os.pathsep}{os.environ['PATH']}", "STUB_LOG": str(tmp_path / "log"),
           "SKYPILOT_NODE_RANK": "0", "SKYPILOT_NODE_IPS": "10.0.0.5\n10.0.0.6",
           "MODEL_ID": "m", "VLLM_API_KEY": "k"}
    out = _run_bash(script, env, tmp_path)
    assert out.returncode == 1
    assert "only 1 of 2 nodes joined" in out.stderr
    assert "vllm" not in (tmp_path / "log").read_text()


# --------------------------------------------------------------------------------------------
# SkyPilot 0.14.1 (offline, in-process)
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("unit", ALL_UNITS, ids=UNIT_IDS)
def test_sky_parses_and_validates(sky_offline, unit):
    sky, _ = sky_offline
    from sky.serve import serve_utils

    task = sky.Task.from_yaml_str(render_task(unit))
    serve_utils.validate_service_task(task, pool=False)
    task.validate()  # catalog-backed: region exists, instance type exists in the cloud

    assert task.name == unit.name
    assert task.num_nodes == unit.num_nodes
    # an `ordered` list (tried in turn) when there are alternates, else the one planned offer
    assert isinstance(task.resources, list) is bool(unit.alternates)
    places = [(str(r.cloud).lower(), r.region, r.zone, r.instance_type) for r in task.resources]
    assert places == [(unit.cloud, unit.region, None, unit.instance_type)] + [
        (a.cloud, a.region, None, a.instance_type) for a in unit.alternates]
    for res in task.resources:  # the same GPUs, purchase option, port, disk and engine everywhere
        assert res.accelerators == {unit.gpu: unit.gpus_per_instance}
        assert res.use_spot is unit.spot
        assert res.ports == ["8000"]
        assert res.disk_size == (unit.disk_size or 256)  # SkyPilot's default when unset
        image = "docker:vllm/vllm-openai:v0.12.0" if unit.runtime == "container" else None
        assert (res.image_id or {}).get(res.region) == image

    assert task.envs["MODEL_ID"] == unit.source
    assert not set(SECRET_NAMES) & set(task.envs)
    assert task.secrets == {}  # nothing inline: references only
    assert sorted(r.name for r in task._managed_secret_refs) == sorted(SECRET_NAMES)
    assert f"--tensor-parallel-size {unit.tp} " in task.run
    assert f"--served-model-name {unit.service_model} " in task.run
    assert f"--max-model-len {unit.max_model_len} " in task.run

    svc = task.service
    assert svc.readiness_path == "/health"
    assert svc.initial_delay_seconds == (1200 if unit.num_nodes == 1 else 1800)
    assert svc.min_replicas == unit.replicas
    assert svc.use_ondemand_fallback is unit.ondemand_fallback
    assert svc.dynamic_ondemand_fallback is (True if unit.ondemand_fallback else None)
    if unit.target_qps_per_replica is None:
        assert svc.max_replicas is None
        assert svc.target_qps_per_replica is None
    else:
        assert svc.max_replicas == 2 * unit.replicas
        assert svc.target_qps_per_replica == unit.target_qps_per_replica


@pytest.mark.parametrize("spot", [False, True], ids=["ondemand", "spot"])
@pytest.mark.parametrize("qps", [None, 2.5], ids=["fixed", "autoscale"])
@pytest.mark.parametrize("unit", ALL_UNITS, ids=UNIT_IDS)
def test_sky_accepts_every_purchase_and_scaling_combination(sky_offline, unit, spot, qps):
    sky, _ = sky_offline
    from sky.serve import serve_utils

    u = dataclasses.replace(unit, spot=spot, target_qps_per_replica=qps, ondemand_fallback=spot,
                            name=unit_name(unit.service_model, unit.cloud, unit.region,
                                           unit.instance_type, spot=spot))
    task = sky.Task.from_yaml_str(render_task(u))
    serve_utils.validate_service_task(task, pool=False)
    task.validate()
    for res in task.resources:
        assert res.use_spot is spot
        assert res.get_cost(3600) > 0  # the catalog prices this purchase option in this region
    assert task.service.use_ondemand_fallback is spot
    assert task.service.min_replicas == u.replicas
    assert task.service.max_replicas == (None if qps is None else 2 * u.replicas)


def test_sky_specifics(sky_offline):
    sky, _ = sky_offline
    pp = sky.Task.from_yaml_str(render_task(A100_AZ_PP2))
    assert pp.envs["VLLM_PP_LAYER_PARTITION"] == "38,42"
    assert "--pipeline-parallel-size 2 --distributed-executor-backend ray" in pp.run
    assert "ray start --head --port=6379" in pp.run
    assert 'ray start --address="$RAY_ADDRESS"' in pp.run and "--block" in pp.run
    dp = sky.Task.from_yaml_str(render_task(A10G_DP4))
    assert "--tensor-parallel-size 1 --data-parallel-size 4 " in dp.run
    assert "VLLM_PP_LAYER_PARTITION" not in dp.envs
    spot = sky.Task.from_yaml_str(render_task(H100_GCP_SPOT))
    assert list(spot.resources)[0].use_spot is True
    assert "--tensor-parallel-size 8 " in spot.run
    auto = sky.Task.from_yaml_str(render_task(L4_GCP_AUTOSCALE))
    assert auto.service.target_qps_per_replica == 1.5
    assert (auto.service.min_replicas, auto.service.max_replicas) == (2, 4)
    one = sky.Task.from_yaml_str(render_task(L40S_AWS_TP2PP2))  # a pipeline inside one node: no Ray
    assert one.num_nodes == 1 and one.envs["VLLM_PP_LAYER_PARTITION"] == "40,40"
    assert "--pipeline-parallel-size 2 --distributed-executor-backend mp" in one.run
    assert "ray" not in one.run.replace("--distributed-executor-backend mp", "") and one.setup is None
    assert one.service.min_replicas == 2


def test_sky_secrets_given_at_launch(sky_offline):
    """`--secret HF_TOKEN=...` at launch fills the null references (same code path as the CLI)."""
    sky, _ = sky_offline
    cfg = yaml.safe_load(render_task(L4_AWS))
    task = sky.Task.from_yaml_config(cfg, secrets_overrides=[("HF_TOKEN", "hf_x"),
                                                             ("VLLM_API_KEY", "k")])
    assert {k: v.get_secret_value() for k, v in task.secrets.items()} == \
        {"HF_TOKEN": "hf_x", "VLLM_API_KEY": "k"}
    assert task._managed_secret_refs == []


def test_sky_rejects_what_the_compiler_avoids(sky_offline):
    """Guards on SkyPilot behaviour the compiler relies on (fails if SkyPilot changes)."""
    sky, _ = sky_offline
    cfg = yaml.safe_load(render_task(L4_AWS))
    # a null env var is rejected (hence secrets go to `secrets:`, not `envs:`)
    bad = {**cfg, "envs": {**cfg["envs"], "HF_TOKEN": None}}
    with pytest.raises(ValueError, match="Environment variable 'HF_TOKEN' is None"):
        sky.Task.from_yaml_config(bad)
    # `replicas` and `replica_policy` together
    bad = {**cfg, "service": {**cfg["service"], "replica_policy": {
        "min_replicas": 1, "max_replicas": 2, "target_qps_per_replica": 1.0}}}
    with pytest.raises(ValueError, match="Cannot specify both `replicas` and `replica_policy`"):
        sky.Task.from_yaml_config(bad)
    # infra together with cloud
    bad = {**cfg, "resources": {**cfg["resources"], "cloud": "aws"}}
    with pytest.raises(ValueError, match="Cannot specify both `infra` and `cloud`"):
        sky.Task.from_yaml_config(bad)


@pytest.mark.parametrize("unit", ALL_UNITS, ids=UNIT_IDS)
def test_sky_catalog_matches_unit(sky_offline, unit):
    """from_yaml accepts an instance type whose GPUs differ from `accelerators`; check the catalog."""
    _sky, _ = sky_offline
    from sky import catalog

    assert catalog.get_accelerators_from_instance_type(unit.instance_type, clouds=unit.cloud) == \
        {unit.gpu: unit.gpus_per_instance}
    regions = {r.name for r in catalog.get_region_zones_for_instance_type(
        unit.instance_type, unit.spot, clouds=unit.cloud)}
    assert unit.region in regions


def test_sky_optimizer_prices_units_as_planned(sky_offline):
    sky, private_home = sky_offline
    if not private_home:
        pytest.skip("sky was imported with another HOME; not touching its state DB")
    from sky import check as sky_check
    from sky import dag as dag_lib
    from sky import global_user_state, optimizer
    from sky.clouds import cloud as cloud_lib

    global_user_state.set_allowed_clouds(sky_check._get_workspace_allowed_clouds("default"),
                                         "default")
    global_user_state.set_enabled_clouds(["AWS", "GCP", "Azure"],
                                         cloud_lib.CloudCapability.COMPUTE, "default")
    for unit, uid in zip(ALL_UNITS, UNIT_IDS):
        task = sky.Task.from_yaml_str(render_task(unit))
        with dag_lib.Dag() as dag:
            dag.add(task)
        optimizer.Optimizer.optimize(dag, quiet=True)
        best = task.best_resources
        assert best.instance_type == unit.instance_type, uid
        assert best.region == unit.region, uid
        assert best.use_spot is unit.spot, uid
        cost = best.get_cost(3600) * task.num_nodes
        assert cost == pytest.approx(EXPECTED_COST_PER_HOUR[uid], rel=1e-6), uid
