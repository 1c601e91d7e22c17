"""`hetinfra apply` of a plan whose bundle spans nodes of two instance types (heterogeneous P/D): the
SkyPilot path refuses it with exit 2 naming the unit and the paths that run it; `--target all`
deploys it with the Pulumi stacks (the recording stand-in for the CLI), and state.json and status
count its replica as one unit of one prefill and one decode node."""

from __future__ import annotations

import json

from hetinfra.compile.artifacts import write_plan
from hetinfra.document import Plan
from tests.compile.split_plan import UNIT, split_plan


def test_apply_refuses_skypilot_and_deploys_with_pulumi(fake_pulumi, cloud_env, run_cli, tmp_path):
    out = tmp_path / "out"
    write_plan(out, Plan.parse(split_plan("hetero")))
    code, stdout, stderr = run_cli("apply", str(out), "--target", "skypilot", "--yes")
    assert code == 2 and f"{UNIT} is a prefill/decode bundle across 2 nodes" in stderr + stdout
    assert "--target pulumi" in stderr + stdout and not (out / "state.json").exists()
    code, stdout, stderr = run_cli("apply", str(out), "--yes")
    assert code == 0, stderr + stdout
    assert "p4de.24xlarge (A100-80GB)" in stdout and "p5en.48xlarge (H200)" in stdout  # a row per role's type
    state = json.loads((out / "state.json").read_text())
    assert [(a["deployment_unit"], a["path"]) for a in state["allocations"]] == [(UNIT, "pulumi")]
    assert set(state["pulumi"]) == {"aws"}
    code, text, stderr = run_cli("status", str(out))
    assert code == 0, stderr + text
    assert " 12 x p5en.48xlarge (H200) +  12 x p4de.24xlarge (A100-80GB)" in text, text  # each role's instances
    code, text, stderr = run_cli("status", str(out), "--json")
    live = json.loads(text)["live"]["units"][UNIT]
    assert live["live"] == 12 and live["roles"]["decode"]["instance_type"] == "p4de.24xlarge"
    assert live["roles"]["decode"]["nodes_live"] == 12 and live["roles"]["prefill"]["nodes_live"] == 12
