"""A prefill/decode bundle as the targets deploy it (hetinfra.compile.bundle): its node's engines and hop,
the SkyPilot task (validated with SkyPilot's own library, golden file), the hop's trimmed plan, the
refusal of bundles across nodes, and the node script run by bash on loopback with stand-in engines
and the real hop."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from hetinfra.compile.artifacts import sky_units, write_plan
from hetinfra.compile.bundle import engines, hop_args, node_script
from hetinfra.compile.skypilot import render_task, task_config
from hetinfra.document import Plan
from hetinfra.errors import InvalidInputError
from tests.compile.split_plan import UNIT, free_port_block, split_plan, wait_healthy
from tests.plan.golden_plans import totals_added_up

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden" / "split"


def _unit(shape: str = "2P1D", **kw):
    return replace(sky_units(Plan.parse(split_plan(shape, **kw)))[0])


def test_the_node_runs_every_engine_on_its_own_gpus_and_the_hop_addresses_them():
    u = _unit()
    es = engines(u)
    assert [(e.role, e.gpus) for e in es] == [("prefill", (0, 1)), ("prefill", (2, 3)), ("decode", (4, 5, 6, 7))]
    assert [e.port for e in es] == [u.port + 1, u.port + 2, u.port + 3]  # the hop has the unit's port
    args = hop_args(u)
    endpoints = [args[i + 1] for i, a in enumerate(args) if a == "--endpoint"]
    assert endpoints == [f"{UNIT}/prefill=http://127.0.0.1:{u.port + 1}/v1", f"{UNIT}/prefill=http://127.0.0.1:{u.port + 2}/v1",
                         f"{UNIT}=http://127.0.0.1:{u.port + 3}/v1"]
    assert args[args.index("--port") + 1] == str(u.port)


def test_the_hop_plan_is_the_unit_alone_and_parses():
    plan = split_plan("2P1D")
    hop = Plan.parse(json.loads(_unit().hop_plan))
    assert [a.deployment_unit for a in hop.allocations] == [UNIT]
    assert [m.name for m in hop.models] == ["qwen32"] and len(hop.templates) == 1
    assert all(r.share == 1.0 for rows in hop.routing["qwen32"].values() for r in rows)
    assert _unit().hop_plan == sky_units(Plan.parse(plan))[0].hop_plan  # same plan, same text


def test_the_hop_plan_of_one_of_two_bundle_units_of_a_model_states_its_own_totals():
    """Two bundle units of one model, each serving half of every class: the hop plan of either holds its unit
    alone, so its model's and its plan's $/h are that unit's, not the model's two (with the model's, the hop's
    own gateway refused it: 'models[0].cost_usd_per_hour is ..., where its 1 allocation(s) cost ...')."""
    from hetinfra.compile.bundle import hop_plan

    plan = split_plan("2P1D")
    first = plan["allocations"][0]
    second = dict(first, unit=first["unit"] + "-b", deployment_unit=first["deployment_unit"] + "-b",
                  skypilot_task=f"skypilot/{first['deployment_unit']}-b.yaml",
                  count=first["count"] + 1, instances=(first["count"] + 1) * first["nodes_per_replica"])
    plan["allocations"].append(second)
    for rows in plan["routing"]["qwen32"].values():
        rows[:] = [dict(r, unit=u, share=0.5, rps=r["rps"] / 2) for r in rows for u in (first["unit"], second["unit"])]
    doc = Plan.parse(totals_added_up(plan))
    for a in doc.allocations:
        hop = Plan.parse(json.loads(hop_plan(doc, a)))
        assert [x.unit for x in hop.allocations] == [a.unit]
        assert hop.cost_usd_per_hour == hop.models[0].cost_usd_per_hour == a.cost_usd_per_hour


def test_the_hop_plan_of_a_unit_serving_some_of_its_models_classes_parses(tmp_path, run_cli):
    """benchmarks/specs/pd-lora-edge.yaml: units that serve some of the model's classes (an adapter's class
    goes to the units holding it). A unit's hop plan leaves the classes it does not serve unmet; it kept
    their demand with no route, and the node's own gateway refused it ('routing.big.a~legal: the class has
    1.26 req/s of demand and no route')."""
    from hetinfra.compile.bundle import hop_plan

    spec = Path(__file__).resolve().parents[2] / "benchmarks/specs/pd-lora-edge.yaml"
    code, _out, err = run_cli("plan", str(spec), "--out", str(tmp_path / "out"), "--no-verify", "--no-baselines")
    assert code == 0, err
    plan = Plan.parse(json.loads((tmp_path / "out" / "plan.json").read_text()))
    partial = 0
    for a in plan.allocations:
        hop = Plan.parse(json.loads(hop_plan(plan, a)))
        served = set(hop.routing[a.model])
        partial += bool(hop.unmet_rps)
        assert {k.split("/", 1)[1] for k in hop.unmet_rps} == \
            {c.name for m in plan.models if m.name == a.model for c in m.classes if c.rate_rps} - served
    assert partial, "no unit of pd-lora-edge serves only some classes: pick another spec"


def test_a_bundle_across_nodes_without_rdma_is_refused_with_a_clear_line():
    plan = split_plan()
    a = plan["allocations"][0]
    a["disaggregation"]["roles"][0]["nodes"], a["disaggregation"]["roles"][1]["nodes"] = 1, 1
    a["nodes_per_replica"], a["instances"] = 2, 2 * a["count"]
    a["cost_usd_per_hour"] = round(a["price_per_instance_usd_per_hour"] * a["instances"], 4)
    with pytest.raises(InvalidInputError, match="moves its KV over RDMA .*its link is 'nvlink'"):
        sky_units(Plan.parse(totals_added_up(plan)), include_mixed=True)


def test_one_node_and_across_nodes_scripts_probe_and_wait_with_one_implementation():
    """Both node scripts define their probe with bundle_nodes.ready_function and wait with wait_lines:
    a script that writes its own probe or loop fails here."""
    from hetinfra.compile.bundle_nodes import ready_function, wait_lines

    one = node_script(_unit(), "hetinfra", "/p.json").splitlines()
    assert ready_function("127.0.0.1") in one
    ports = [e.port for e in engines(_unit())]
    loop = one.index(f"for port in {' '.join(map(str, ports))}; do")
    assert one[loop + 1:loop + 4] == [f"  {x}" for x in wait_lines('ready "$port"', "the engine on port $port")] + ["done"]
    across = sky_units(Plan.parse(split_plan("across")), include_mixed=True)[0]
    head = node_script(across, "hetinfra", "/p.json", 0).splitlines()
    assert ready_function() in head and "ready()" not in "\n".join(head)
    for e in engines(across):
        first = head.index(wait_lines(f"ready_at 127.0.0.1 {e.port}", "")[0])
        assert head[first:first + 2] == wait_lines(f"ready_at 127.0.0.1 {e.port}", f"this node's engine 127.0.0.1:{e.port}")


def test_skypilot_validates_the_bundle_task(sky_offline):
    sky, _ = sky_offline
    from sky.serve import serve_utils

    task = sky.Task.from_yaml_str(render_task(_unit("2P1D")))
    serve_utils.validate_service_task(task, pool=False)
    task.validate()  # catalog-backed: p5en.48xlarge with 8 H200 in us-east-1
    assert task.service.readiness_path == "/health"


def test_skypilot_golden(tmp_path):
    got = "\n".join(render_task(_unit()).splitlines()[1:]) + "\n"  # without the version line
    path = GOLDEN / "qwen32-2p1d.yaml"
    if os.environ.get("HETINFRA_UPDATE_GOLDEN") == "1":
        path.write_text(got)
    assert got == path.read_text()


def test_a_split_plan_writes_every_target(tmp_path):
    written = write_plan(tmp_path / "out", Plan.parse(split_plan()))
    assert written["skypilot"] and written["pulumi"]
    text = written["skypilot"][0].read_text()
    assert text.count("--kv-transfer-config") == 2 and "hetinfra-venv/bin/hetinfra gateway" in text


def _stub_vllm(tmp_path: Path, roles: dict[int, str]) -> Path:
    """``vllm serve ... --port P`` starts the stand-in engine of the role planned at P."""
    b = tmp_path / "bin"
    b.mkdir()
    stub = b / "vllm"
    stub.write_text(f"""#!/bin/bash
args=("$@"); for i in "${{!args[@]}}"; do [ "${{args[$i]}}" = --port ] && port=${{args[$((i+1))]}}; done
case "$port" in {' '.join(f'{p}) role={r};;' for p, r in roles.items())} esac
cd {shlex.quote(str(REPO))} && exec {shlex.quote(sys.executable)} -m tests.gateway.pd_standin --role "$role" --name "$role-$port" --key "$VLLM_API_KEY" --port "$port" >/dev/null
""")
    stub.chmod(0o755)
    return b


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not available")
def test_the_node_script_serves_through_its_hop_and_stops_with_an_engine(tmp_path):
    """bash runs the node script as SkyPilot or systemd would: the stand-in engines start, the real
    hop starts once they answer /health, a request takes both steps (the decode engine got the
    prefill's KV parameters), and killing the decode engine ends the node (exit 1), so the
    replica is replaced whole. About 5 s (three processes start and the hop waits for /health): the
    one test that runs the script bash runs on the node."""
    u = replace(_unit("1P1D"), port=free_port_block(3))
    es = engines(u)
    bin_dir = _stub_vllm(tmp_path, {e.port: e.role for e in es})
    (tmp_path / "plan.json").write_text(u.hop_plan)
    script = node_script(u, f"{shlex.quote(sys.executable)} -m hetinfra.cli", str(tmp_path / "plan.json"))
    script = script.replace("sleep 10", "sleep 0.2")
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "VLLM_API_KEY": "k-node",
           "PYTHONPATH": str(REPO), **{k: v for k, v in task_config(u)["envs"].items()}}
    env.pop("HETINFRA_API_KEY", None)
    node = subprocess.Popen(["bash", "-c", script], env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{u.port}"
        wait_healthy(url, 30, node)
        body = {"model": "qwen32", "prompt": "x " * 200, "max_tokens": 8}
        assert httpx.post(url + "/v1/completions", json=body, timeout=10).status_code == 401  # the engines' key
        got = httpx.post(url + "/v1/completions", json=body, headers={"Authorization": "Bearer k-node"}, timeout=10)
        assert got.status_code == 200, got.text
        assert got.json()["prefilled_by"] == f"prefill-{es[0].port}"
        decode = subprocess.run(["pgrep", "-s", str(node.pid), "-f", "--", f"pd_standin.*--port {es[1].port}$"],
                                capture_output=True, text=True).stdout.split()
        assert decode
        for pid in decode:
            os.kill(int(pid), signal.SIGKILL)
        _, err = node.communicate(timeout=20)  # bounded: a child that outlives the node keeps stderr open
        assert node.returncode == 1
        assert "a process of the bundle ended" in err
    finally:
        try:  # the node's whole session, whatever outlived it (its engines, its hop)
            os.killpg(node.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if node.poll() is None:
            node.wait(timeout=5)


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not available")
@pytest.mark.parametrize("runtime", ["container", "virtualenv"])
def test_the_task_scripts_are_valid_bash(runtime, tmp_path):
    cfg = task_config(_unit(runtime=runtime))
    for key in ("setup", "run"):
        (tmp_path / key).write_text(cfg[key])
        out = subprocess.run(["bash", "-n", str(tmp_path / key)], capture_output=True, text=True)
        assert out.returncode == 0, (key, out.stderr)
    assert ("pip install vllm==0.12.0" in cfg["setup"]) == (runtime == "virtualenv")
