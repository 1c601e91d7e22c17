"""Replan applies a change of the LoRA adapters a unit holds on its own (issue 38): same units, same
counts, another ``allocations[].adapters.held`` is a change (hetinfra.replan.diff.held_changes) whose
one stage re-applies the unit, so its engines restart with the new ``--lora-modules``."""

from __future__ import annotations

import json

import yaml

from tests.replan.conftest import toy_spec
from tests.replan.test_adapters_replan import ADAPTERS
from tests.replan.test_replan import _deploy


def _held(out, where: str = "state.json") -> dict[str, str]:
    doc = json.loads((out / where).read_text())
    return {h["name"]: h["source"] for a in doc["allocations"] for h in (a.get("adapters") or {}).get("held", [])}


def test_a_new_adapter_version_alone_is_applied_to_the_running_unit(fake_pulumi, fake_cloud, cloud_env, service,
                                                                    run_cli, tmp_path, healthy_server, monkeypatch):
    _, offers = service
    spec = toy_spec(tmp_path, adapters=ADAPTERS)
    out = tmp_path / "out"
    day1 = offers("day1", 1.00, 1.20)
    running = _deploy(run_cli, spec, day1, out)
    assert _held(out)["a2"] == "org/a2"
    doc = yaml.safe_load(spec.read_text())
    doc["adapters"][2]["source"] = "org/a2-v2"  # a retrained adapter: same name, new weights
    spec.write_text(yaml.safe_dump(doc))

    code, stdout, err = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(day1), "--json",
                                "--max-changes", "4")
    assert code == 10, stdout + err  # proposed, not "nothing differs"
    report = json.loads(stdout)
    assert report["this_run"] == ["stage update: no replica changes"]  # (--max-changes: not a no-op break)
    decision = report["decision"]
    assert decision["instances_added"] == decision["instances_removed"] == 0
    assert [c["unit"] for c in decision["adapters_changed"] if c["changed"] == ["a2"]]
    assert "adapters ~a2" in (out / "replan.log").read_text()  # (the solve may move others too: holds are free)

    monkeypatch.setenv("FAKE_PULUMI_ENDPOINT", healthy_server[0])
    ups_before = sum(1 for c in fake_pulumi() if "up" in c["argv"][:2])
    code, stdout, err = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(day1), "--apply")
    assert code == 11, stdout + err
    assert sum(1 for c in fake_pulumi() if "up" in c["argv"][:2]) - ups_before == 1
    journal = json.loads((out / "replan.json").read_text())
    assert [(s["name"], s["status"]) for s in journal["stages"]] == [("update", "done")]
    assert _held(out)["a2"] == "org/a2-v2"  # the state runs the new list
    assert {a["instance_type"]: a["count"] for a in json.loads((out / "state.json").read_text())["allocations"]} \
        == running
    code, stdout, _ = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(day1))
    assert code == 0 and "nothing differs" in stdout
