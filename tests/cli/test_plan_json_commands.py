"""Every command that reads plan.json reads it one way (hetinfra.document.load_plan: the model's
fields and bounds, and the checks across its sections, hetinfra.document.consistency), so a broken
plan.json is refused by each with exit 2 and a message naming the file and the field. Before, `replan`
re-planned from plans `simulate` refused, `apply` deployed nothing and exited 0 for a plan whose routes
named no allocation, and `simulate` crashed on a model with no request classes."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.plan.golden_plans import filled_golden, totals_added_up

REPO = Path(__file__).resolve().parents[2]


def _set(path: str, value):
    """A mutation of plan.json's dict: ``path`` (dotted, with list indexes) set to ``value``."""
    def mutate(doc: dict) -> dict:
        *parents, leaf = [int(p) if p.isdigit() else p for p in path.split(".")]
        node = doc
        for p in parents:
            node = node[p]
        node[leaf] = value
        return doc
    return mutate


def _every_route(unit: str):
    def mutate(doc: dict) -> dict:
        for rows in doc["routing"]["chat-8b"].values():
            for row in rows:
                row["unit"] = unit
        return doc
    return mutate


def _bignum(doc: dict) -> str:
    return json.dumps(doc, indent=1).replace('"count": 2', '"count": 1' + "0" * 5000, 1)


#: case -> (mutation of the chat plan: a new dict, or plan.json's text; what the first error line names)
BROKEN = {
    "classes_empty": (_set("models.0.classes", []), "models[0].classes is empty"),
    "models_empty": (_set("models", []), "models is empty"),
    "count_huge": (_set("allocations.0.count", 10 ** 9), "allocations[0].count is 1000000000"),
    "tp_huge": (_set("allocations.0.tp", 1024), "allocations[0].tp is 1024"),
    "engines_huge": (_set("allocations.0.engines_per_instance", 10 ** 6), "allocations[0].engines_per_instance"),
    "allocations_empty": (_set("allocations", []), "routing.chat-8b."),
    "routing_unit_ghost": (_every_route("ghost"), "routes to unit 'ghost', which is not among allocations"),
    "gpu_unknown": (_set("allocations.0.gpu", "NOPE"), "allocations[0].gpu 'NOPE' is not in hetinfra's GPU catalog"),
    "slo_negative": (_set("models.0.slo.ttft_ms", -1), "models[0].slo.ttft_ms is -1"),
    "slo_percentile": (_set("models.0.slo.percentile", "p200"), "models[0].slo.percentile is 'p200'"),
    "class_tokens_zero": (_set("models.0.classes.0.output_tokens", 0), "models[0].classes[0].output_tokens is 0"),
    "bignum": (_bignum, "an integer of 5,001 digits"),
}


@pytest.fixture
def broken_out(tmp_path):
    """An out dir holding the chat example's plan.json broken by ``case``, and a state.json running it."""
    def make(case: str) -> Path:
        doc = filled_golden("chat")
        doc["inputs"]["spec_path"] = str(REPO / "services" / "chat.yaml")
        allocs = [dict(a, path="pulumi") for a in doc["allocations"]]
        state = {"state_version": 1, "service": doc["service"], "allocations": allocs, "pulumi": {}, "skypilot": {},
                 "endpoints": {a["deployment_unit"]: ["http://127.0.0.1:9/v1"] for a in allocs},
                 "operation": None, "plan_sha256": None}
        broken = BROKEN[case][0](copy.deepcopy(doc))
        out = tmp_path / case
        out.mkdir()
        (out / "plan.json").write_text(broken if isinstance(broken, str) else json.dumps(broken, indent=1))
        (out / "state.json").write_text(json.dumps(state))
        return out
    return make


def _gateway(out: Path) -> tuple[int, str]:
    """The gateway's table loader (what `hetinfra gateway` and each of its reloads run first)."""
    from hetinfra.errors import HetinfraError
    from hetinfra.gateway.table import load_table

    try:
        load_table(out)
    except HetinfraError as exc:
        return exc.exit_code, f"error: {exc}"
    return 0, ""


#: command -> its arguments for an out dir (status and destroy read plan.json beside a state.json)
COMMANDS = {
    "simulate": lambda out: ["simulate", str(out), "--requests", "200", "--out", str(out / "sim")],
    "replan": lambda out: ["replan", str(REPO / "services" / "chat.yaml"), "--state", str(out), "--no-refresh"],
    "apply": lambda out: ["apply", str(out), "--yes", "--target", "pulumi"],
    "status": lambda out: ["status", str(out)],
    "destroy": lambda out: ["destroy", str(out), "--yes"],
    "profile": lambda out: ["profile", str(out), "--launch", "--dry-run"],
    "gateway": None,
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("case", sorted(BROKEN))
def test_every_command_refuses_a_broken_plan_naming_the_field(broken_out, run_cli, monkeypatch, tmp_path, case,
                                                              command):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no pulumi, no sky: nothing past the plan's check may run
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    out = broken_out(case)
    if COMMANDS[command] is None:
        code, err = _gateway(out)
    else:
        code, _, err = run_cli(*COMMANDS[command](out))
    first = err.strip().splitlines()[0] if err.strip() else ""
    assert code == 2, f"{command} exited {code} on {case}: {err[-800:]}"
    assert first.startswith(f"error: {out / 'plan.json'}") and BROKEN[case][1] in first, first
    assert "Traceback" not in err


def test_apply_says_a_plan_with_no_allocations_deploys_nothing(run_cli, monkeypatch, tmp_path):
    """A plan that leaves all demand unmet (planning.allow_unmet) is valid and has no allocations: apply
    says it deploys nothing instead of passing silently for a fleet in place."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    doc = filled_golden("chat")
    classes = doc["routing"]["chat-8b"]
    doc.update(allocations=[], templates=[], routing={"chat-8b": {c: [] for c in classes}},
               unmet_rps={f"chat-8b/{c}": sum(r["rps"] for r in rows) for c, rows in classes.items()})
    out = tmp_path / "out"
    out.mkdir()
    (out / "plan.json").write_text(json.dumps(totals_added_up(doc)))  # $0/h: no unit
    code, stdout, err = run_cli("apply", str(out), "--yes", "--target", "pulumi")
    assert code == 0, err
    assert "Nothing to deploy: the plan has no allocations" in stdout and "unmet" in stdout
    assert not (out / "state.json").exists()
