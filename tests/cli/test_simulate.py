"""`hetinfra simulate`: --check's exit code both ways, --replications' bounds, hostile inputs."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from hetinfra.sim.check import OBJECTIVES_MISSED


@pytest.fixture(scope="module")
def chat_plan(example_plans):
    return example_plans["chat"][0]


def test_check_passes_a_met_plan_with_replications(chat_plan, tmp_path, run_cli):
    code, out, err = run_cli("simulate", str(chat_plan), "--check", "--replications", "3", "--requests", "1500",
                             "--out", str(tmp_path))
    assert code == 0, err
    assert "chat-8b: p99 TTFT" in out and "(95% bound" in out and "- met (3 replications)" in out
    doc = json.loads((tmp_path / "simulation.json").read_text())
    assert doc["seeds"] == [0, 1, 2] and doc["met"] and doc["models"][0]["decision"] == "met"
    assert doc["models"][0]["bound"]["tpot_ms"] >= doc["models"][0]["estimate"]["tpot_ms"]


def test_check_fails_a_missed_plan_with_its_own_code(chat_plan, tmp_path, run_cli):
    # three times the planned demand: the queue grows, the unit is unstable and the model misses
    code, out, err = run_cli("simulate", str(chat_plan), "--check", "--load", "3", "--requests", "3000",
                             "--out", str(tmp_path), "--json")
    assert code == OBJECTIVES_MISSED == 12, err
    doc = json.loads(out)  # --json still prints the whole document
    assert not doc["met"] and not doc["units"][0]["stability"]["stable"]
    code, _, _ = run_cli("simulate", str(chat_plan), "--load", "3", "--requests", "3000", "--out", str(tmp_path))
    assert code == 0  # without --check a miss is a result, not a failure
    code, _, err = run_cli("simulate", str(chat_plan), "--check", "--load", "3", "--requests", "3000",
                           "--replications", "2", "--out", str(tmp_path))
    assert code == 12 and "objective is missed" in err


@pytest.mark.parametrize("value, says", [("1e12", "2,000,000"), ("2000001", "2,000,000"), ("2.5", "whole number"),
                                         ("0", "outside"), ("many", "not a number")])
def test_a_request_count_past_the_memory_bound_is_exit_2(chat_plan, tmp_path, run_cli, value, says):
    code, _, err = run_cli("simulate", str(chat_plan), "--requests", value, "--out", str(tmp_path))
    assert code == 2 and says in err and "Traceback" not in err


def test_an_out_folder_that_cannot_be_written_is_exit_2(chat_plan, tmp_path, run_cli, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, _, err = run_cli("simulate", str(chat_plan), "--requests", "1000", "--out", str(blocker / "sub"))
    assert code == 2 and "cannot write the simulation" in err and "Traceback" not in err
    import hetinfra.sim.report as report

    def read_only(files, **_):
        raise PermissionError(errno.EACCES, "Permission denied", str(next(iter(files))))

    monkeypatch.setattr(report, "atomic_write_texts", read_only)  # a read-only folder (root ignores chmod)
    code, _, err = run_cli("simulate", str(chat_plan), "--requests", "1000", "--out", str(tmp_path / "ro"))
    assert code == 2 and "Permission denied" in err and "--out" in err
    assert not (tmp_path / "ro" / "simulation.json").exists()


def test_without_requests_the_run_is_as_long_as_the_longest_class_needs(chat_plan, tmp_path, run_cli):
    from hetinfra.sim.plan_sim import load_plan, simulate_plan_file
    from hetinfra.sim.replications import requests_for
    from hetinfra.sim.workload import WorkloadConfig

    code, out, err = run_cli("simulate", str(chat_plan), "--load", "1.2", "--out", str(tmp_path), "--json")
    assert code == 0, err
    first = simulate_plan_file(chat_plan, config=WorkloadConfig(requests=20000, load=1.2))
    need = requests_for(load_plan(chat_plan)[0], first)
    assert need > 20000  # chat-8b's 1000-token class at ~70 ms a token: 20 passes need a longer run
    assert json.loads(out)["requests"] == need



def _edited_plan(example_plans, name: str, tmp_path, edit) -> tuple[str, str]:
    """(plan.json path, spec path) of example ``name``'s plan copied into ``tmp_path`` after ``edit(doc)``."""
    out, doc, _text, spec = example_plans[name]
    doc = json.loads(json.dumps(doc))
    edit(doc)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    return str(path), str(spec)


def _stage_gpu(doc: dict, gpu: str) -> None:
    a = next(a for a in doc["allocations"] if a.get("stages"))
    a["stages"][1]["gpu"], a["custom_gpu"] = gpu, True  # the mark is the unit's GPU's, never a stage's


@pytest.mark.parametrize("name, edit, where", [
    ("chat", lambda d: d["allocations"][0].update(gpu="L40X"), "allocations[0].gpu 'L40X'"),
    ("mixed-pipeline", lambda d: _stage_gpu(d, "A10X"), "].stages[1].gpu 'A10X'")])
def test_a_gpu_outside_the_catalog_not_marked_custom_is_exit_2(example_plans, tmp_path, run_cli, name, edit, where):
    # a misspelt catalog GPU was simulated as a custom GPU on default facts, without a word
    path, spec = _edited_plan(example_plans, name, tmp_path, edit)
    code, out, err = run_cli("simulate", path, "--spec", spec, "--requests", "500", "--out", str(tmp_path))
    assert code == 2 and "Traceback" not in err, err
    assert f"{path}: allocations[" in err and f"{where} is not in hetinfra's GPU catalog, and the plan does not " \
           "mark it custom_gpu" in err and "`hetinfra prices` lists them" in err, err
    assert len(err.strip().splitlines()) <= 2 and not (tmp_path / "simulation.json").exists()


def test_a_gpu_the_plan_marks_custom_simulates_and_unmarked_is_exit_2(example_plans, tmp_path, run_cli):
    from hetinfra.errors import InvalidInputError
    from hetinfra.sim.plan_sim import simulate_plan
    from hetinfra.sim.workload import WorkloadConfig
    from hetinfra.spec.load import load_spec

    _, doc, _, spec = example_plans["custom-gpu/service"]
    assert [a.get("custom_gpu") for a in doc["allocations"]] == [True] * len(doc["allocations"])  # the planner's mark
    path, spec = _edited_plan(example_plans, "custom-gpu/service", tmp_path, lambda d: None)
    code, out, err = run_cli("simulate", path, "--spec", spec, "--requests", "200", "--out", str(tmp_path))
    assert code == 0, err
    path, spec = _edited_plan(example_plans, "custom-gpu/service", tmp_path,
                              lambda d: [a.pop("custom_gpu") for a in d["allocations"]])
    code, out, err = run_cli("simulate", path, "--spec", spec, "--requests", "200", "--out", str(tmp_path / "b"))
    assert code == 2 and "allocations[0].gpu 'T1' is not in hetinfra's GPU catalog" in err, err
    # the simulator itself, called with a plan's dict: the engine reads a custom GPU only where marked
    with pytest.raises(InvalidInputError, match=r"plan unit .*: gpu 'T1' is not in hetinfra's GPU catalog"):
        simulate_plan(json.loads(Path(path).read_text()), load_spec(Path(spec))[0], Path(spec), WorkloadConfig(requests=100))


def test_a_link_planted_in_the_plan_folder_is_replaced_never_written_through(chat_plan, tmp_path, run_cli):
    """`simulate OUT` writes into OUT (--out's default): a symbolic link planted there as simulation.json (a
    plan folder from a cloned repository) is replaced by the simulation, and the file it named is left as it
    was; writing through it let a bare `simulate OUT` overwrite any file the user can write (review of
    hostile inputs, round eight)."""
    import shutil

    out = shutil.copytree(chat_plan, tmp_path / "out")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (out / "simulation.json").symlink_to(victim)
    code, _, err = run_cli("simulate", str(out), "--requests", "1500", "--replications", "1")
    assert code == 0, err
    assert victim.read_text() == "keep me\n"
    assert not (out / "simulation.json").is_symlink() and '"models"' in (out / "simulation.json").read_text()
