"""Before and after, round fourteen (docs/trust.md): what main added last (`plan --verify-baselines`, plan.json's
`fidelity.trim.last_pass[]` and `baselines[].verified/.met` read back, the spec's percentile and attainment
objectives with classes). Run as tools/hostile_before_after.py runs its inputs (its BEFORE_BIN / AFTER_BIN
installs, its run() and $HOSTILE_DIR), each case in its own folder, one `hetinfra` process each:

    BEFORE_BIN=/work/main/.venv/bin/hetinfra .venv/bin/python tools/hostile_before_after_fourteen.py  # ~1 min

A table of the outcomes is printed and saved as $HOSTILE_DIR/table.json ($HOSTILE_ONLY=TEXT: only the cases
whose name holds TEXT).
"""
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_before_after import first_error, run, run_table  # noqa: E402
from hostile_before_after_twelve import CHAT, PLAN, _folder  # noqa: E402

SLO = "slo: {ttft_ms: 2000, tpot_ms: 120}"
SIZES = CHAT.read_text()[CHAT.read_text().index("      sizes:"):CHAT.read_text().index("infrastructure:")]


def _spec(d, edits):
    """chat.yaml with each (old, new) of ``edits`` replaced, as d/s.yaml."""
    text = CHAT.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    (d / "s.yaml").write_text(text)


def _classes(*rows):
    return "      sizes:\n        classes: [" + ", ".join(rows) + "]\n"


def spec_case(who, name, edits, args, key):
    """`plan s.yaml ARGS` of chat.yaml with ``edits``; handled: exit 2 naming ``key`` at its line."""
    d = _folder(who, name)
    _spec(d, edits)
    rc, out, err = run(who, ["plan", "s.yaml", *args], d, timeout=300)
    if rc == 0:
        said = [ln.strip(" │") for ln in out.splitlines()
                if "own verification" in ln or ("undecided" in ln and not ln.startswith("│"))]
        return rc, "exit 0" + (": " + said[0][:100] if said else ""), False
    return rc, first_error(err), rc == 2 and key in err and "s.yaml:" in err


def unsimulated_case(who, name):
    """`plan --verify-baselines` of chat at 3,000 req/s on L40S and L4, whose L4 plan (1,631 instances) is too
    large to simulate; handled: the L4 row not called missed, and says it was not verified."""
    d = _folder(who, name)
    _spec(d, [("rate_rps: 12", "rate_rps: 3000"),
              ("gpus: [L4, A10G, A10, L40S, A100, A100-80GB, H100]", "gpus: [L40S, L4]"),
              ("  headroom: 0.1", "  headroom: 0.1\n  verify: {requests: 2000}")])
    rc, out, err = run(who, ["plan", "s.yaml", "--verify-baselines", "--out", "O"], d, timeout=300)
    if rc:
        return rc, first_error(err), False
    row = next((ln.strip(" │") for ln in out.splitlines() if ln.startswith("│ L4 ")), "no L4 row")
    doc = json.loads((d / "O" / "plan.json").read_text())
    l4 = next(b for b in doc["baselines"] if b["gpu"] == "L4")
    text = " ".join(row.split()) + f"; plan.json met: {l4.get('met')}"
    return rc, text[:110], "missed" not in row and "not verified" in row and l4.get("met") is None


def plan_json_case(who, name, edit):
    """`simulate O` of chat's plan with plan.json edited by ``edit``; handled: exit 2 naming the file."""
    d = _folder(who, name)
    rc, _, err = run(who, ["plan", str(CHAT), *PLAN, "--out", "O"], d, timeout=120)
    path = d / "O" / "plan.json"
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    rc, out, err = run(who, ["simulate", "O", "--requests", "200"], d, timeout=120)
    return rc, first_error(err) if rc else "exit 0", rc == 2 and "plan.json" in err and "Traceback" not in err


def _last_pass(field, value):
    def edit(doc):
        doc["fidelity"] = doc.get("fidelity") or {}
        doc["fidelity"]["trim"] = {"removed": [], "checked_removals": 1, "put_back": [], "last_pass": [
            {"unit": doc["allocations"][0]["unit"], "whole": False, "refused_by": "ceiling", "unit_over": "u",
             "ratio": 1.2, "basis": "roofline", field: value}]}
    return edit


def _baseline(**row):
    def edit(doc):
        doc["baselines"] = [{"gpu": "L4", "feasible": True, "cost_usd_per_hour": 1.0, "instances": 1,
                             "allocation": [], "savings_usd_per_hour": 0.0, "savings_pct": 0.0, **row}]
    return edit


def main():
    off = ("  headroom: 0.1", "  headroom: 0.1\n  verify: {enabled: false}")
    one = _classes("{name: a, input_tokens: 500, output_tokens: 200, share: 1.0}")
    cases = [("plan --verify-baselines, the spec's planning.verify.enabled false",
              lambda w: spec_case(w, "vb-off", [off], ["--verify-baselines"], "planning.verify.enabled")),
             ("plan --strict-verify --no-baselines, the spec's planning.verify.enabled false",
              lambda w: spec_case(w, "sv-off", [off], ["--strict-verify", "--no-baselines"],
                                  "planning.verify.enabled")),
             ("plan --verify-baselines, a GPU type's plan too large to simulate (chat at 3,000 req/s, L4)",
              lambda w: unsimulated_case(w, "vb-large")),
             ("spec slo.attainment: 1.0, one class",
              lambda w: spec_case(w, "att-1", [(SIZES, one), (SLO, SLO[:-1] + ", attainment: 1.0}")],
                                  ["--no-baselines"], "attainment")),
             ("spec slo.attainment: 1 beside percentile: p99",
              lambda w: spec_case(w, "att-1p", [(SLO, SLO[:-1] + ", percentile: p99, attainment: 1}")],
                                  ["--no-baselines"], "attainment")),
             ("spec slo: a class of share 0 beside p50",
              lambda w: spec_case(w, "share-0", [(SIZES, _classes(
                  "{name: a, input_tokens: 500, output_tokens: 200, share: 1.0}",
                  "{name: b, input_tokens: 500, output_tokens: 200, share: 0}")),
                  (SLO, SLO[:-1] + ", percentile: p50}")], ["--no-baselines"], "share")),
             ("spec: 3,000 classes under attainment 0.95",
              lambda w: spec_case(w, "many", [(SIZES, _classes(*(
                  f"{{name: c{i}, input_tokens: {100 + i}, output_tokens: 100, share: 1}}" for i in range(3000)))),
                  (SLO, SLO[:-1] + ", attainment: 0.95}")], ["--no-baselines"], "classes"))]
    cases += [("plan.json fidelity.trim.last_pass[0].ratio NaN (simulate)",
               lambda w: plan_json_case(w, "lp-nan", _last_pass("ratio", float("nan")))),
              ("plan.json fidelity.trim.last_pass[0].whole \"no\" (simulate)",
               lambda w: plan_json_case(w, "lp-str", _last_pass("whole", "no"))),
              ("plan.json fidelity.trim.last_pass[0].refused_by 7 (simulate)",
               lambda w: plan_json_case(w, "lp-int", _last_pass("refused_by", 7))),
              ("plan.json baselines[0].verified \"yes\" (simulate)",
               lambda w: plan_json_case(w, "bl-yes", _baseline(verified="yes", met=True))),
              ("plan.json baselines[0].met 1 (simulate)",
               lambda w: plan_json_case(w, "bl-one", _baseline(verified=True, met=1)))]
    only = os.environ.get("HOSTILE_ONLY")  # a part of a case's name: run those cases alone
    run_table("round fourteen", [c for c in cases if not only or only in c[0]])


if __name__ == "__main__":
    main()
