"""Golden plan.json of every example in services/: what `hetinfra plan services/<name>.yaml` writes,
with the keys that depend on the run or on where the checkout lives blanked.

Regenerate (after a change that is meant to change plans, e.g. verification's costs), from the
repository root::

    .venv/bin/python -m tests.plan.golden_plans

and review the diff of tests/plan/golden/ like any other change to the plans.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden"
EXAMPLES = sorted(p.stem for p in (REPO / "services").glob("*.yaml"))
#: keys that depend on where the spec file lives (service_id hashes its absolute path), not on the input
LOCATION_KEYS = ("service_id", "inputs.spec_path")
BLANK = "<blanked>"


def blank(doc: dict) -> dict:
    """``doc`` with plan_json.RUN_DEPENDENT_KEYS and LOCATION_KEYS replaced by a marker (a key that
    is absent stays absent)."""
    from hetinfra.plan.plan_json import RUN_DEPENDENT_KEYS

    out = json.loads(json.dumps(doc))
    for dotted in RUN_DEPENDENT_KEYS + LOCATION_KEYS:
        *parents, leaf = dotted.split(".")
        node = out
        for p in parents:
            node = node.get(p) if isinstance(node, dict) else None
        if isinstance(node, dict) and leaf in node:
            node[leaf] = BLANK
    return out


def filled_golden(name: str) -> dict:
    """The golden plan of ``name`` with its blanked values filled in with valid ones (a plan.json to
    read, without planning)."""
    doc = json.loads((GOLDEN / f"{name}.json").read_text())
    doc["service_id"] = f"{doc['service']}-0123456789"
    doc["inputs"].update(spec_path=f"services/{name}.yaml", template_cache=None)
    doc["solver"].update(build_s=0.1, solve_s=0.2)
    return doc


def plan_example(name: str) -> str:
    """plan.json's text (as `plan --out` writes it) of services/<name>.yaml, planned in-process with the
    default settings (verified, with baselines)."""
    from click.testing import CliRunner

    from hetinfra.cli import cli

    res = CliRunner().invoke(cli, ["plan", str(REPO / "services" / f"{name}.yaml"), "--json"])
    if res.exit_code != 0:
        raise RuntimeError(f"plan {name} exited {res.exit_code}: {res.output[-2000:]}")
    return res.stdout


def golden_text(doc: dict) -> str:
    return json.dumps(blank(doc), indent=2) + "\n"


def main(argv: list[str]) -> int:
    """Write tests/plan/golden/<name>.json for the named examples (default: all), or, with
    ``--from DIR``, from DIR/<name>.json files another checkout wrote (`hetinfra plan ... --json`)."""
    src = Path(argv[argv.index("--from") + 1]) if "--from" in argv else None
    names = [a for a in argv if a in EXAMPLES] or EXAMPLES
    GOLDEN.mkdir(exist_ok=True)
    for name in names:
        text = (src / f"{name}.json").read_text() if src else plan_example(name)
        (GOLDEN / f"{name}.json").write_text(golden_text(json.loads(text)))
        print(f"wrote {GOLDEN / name}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def golden_allocation(name: str = "chat", **overrides) -> dict:
    """A valid allocation (hetinfra.document.Allocation) of the golden plan of ``name`` with
    ``overrides``: a test's made-up unit that the models accept. A new ``deployment_unit`` gets its
    SkyPilot task path unless ``skypilot_task`` is given; ``instances`` follows ``count``."""
    doc = dict(filled_golden(name)["allocations"][0], **overrides)
    if "deployment_unit" in overrides and "skypilot_task" not in overrides and doc["skypilot_task"]:
        doc["skypilot_task"] = f"skypilot/{doc['deployment_unit']}.yaml"
    if "instances" not in overrides:
        doc["instances"] = doc["count"] * doc["nodes_per_replica"]
    if "cost_usd_per_hour" not in overrides:  # its figures add up, as every plan's (hetinfra.document.consistency)
        from hetinfra.document.consistency import unit_cost

        doc["cost_usd_per_hour"] = round(unit_cost(doc["price_per_instance_usd_per_hour"], doc["instances"],
                                                   doc["nodes_per_replica"], doc.get("counts_by_period")), 4)
    return doc


def totals_added_up(doc: dict) -> dict:
    """``doc`` (a plan.json) with each allocation's ``cost_usd_per_hour`` its price x instances (a test that
    changed a count changed its cost), and each model's and the plan's the sum of its allocations', as
    every plan must state them (hetinfra.document.consistency.figure_problems)."""
    from hetinfra.document.consistency import unit_cost

    allocations = [dict(a, cost_usd_per_hour=round(unit_cost(
        float(a["price_per_instance_usd_per_hour"]), int(a["instances"]), int(a.get("nodes_per_replica") or 1),
        a.get("counts_by_period")), 4)) for a in doc["allocations"]]
    cost = lambda allocs: round(sum(float(a["cost_usd_per_hour"]) for a in allocs), 4)  # noqa: E731
    return dict(doc, allocations=allocations, cost_usd_per_hour=cost(allocations),
                models=[dict(m, cost_usd_per_hour=cost([a for a in allocations if a["model"] == m["name"]]))
                        for m in doc["models"]])


def golden_plan_with(allocations: list[dict], name: str = "chat", **overrides) -> dict:
    """The golden plan of ``name`` (filled) with these ``allocations`` and ``overrides``, its routes
    sent to them (:func:`routed_to_allocations`); the allocations' ``path`` (state.json's) is left out."""
    allocs = [{k: v for k, v in a.items() if k != "path"} for a in allocations]
    return routed_to_allocations(dict(filled_golden(name), allocations=allocs, **overrides))


def routed_to_allocations(doc: dict) -> dict:
    """``doc`` (a test's made-up plan.json) with ``routing`` and ``routing_by_origin`` naming only units
    it allocates, as every plan must (hetinfra.document.Plan checks it): routes to other units are
    dropped, and a class left with none goes to its model's allocations whose engines take it in equal
    shares, or, when the model has none, is listed in ``unmet_rps`` (a class routed nowhere is one the plan leaves unmet)."""
    out = dict(doc)

    sizes = {(m["name"], c["name"]): c["input_tokens"] + c["output_tokens"] for m in doc["models"] for c in m["classes"]}
    lengths = {m["name"]: m["max_model_len"] for m in doc["models"]}

    def rows_for(model: str, rows: list[dict], origin: bool, cls: str = "") -> list[dict]:
        have = {a["unit"] for a in doc["allocations"]}
        kept = [e for e in rows if e["unit"] in have]
        # the model's units whose engines take the class (hetinfra.document.engines)
        mine = [a for a in doc["allocations"] if a["model"] == model
                and (a.get("max_model_len") or lengths.get(model, 0)) >= sizes.get((model, cls.split("~")[0]), 0)]
        if kept or not mine:
            return kept
        rps = sum(float(e["rps"]) for e in rows)
        extra = lambda a: {"deployment_unit": a["deployment_unit"], "region": a["region"], "network_ms": 0.0}  # noqa: E731
        return [{"unit": a["unit"], **(extra(a) if origin else {}), "share": round(1 / len(mine), 6),
                 "rps": round(rps / len(mine), 6)} for a in mine]

    # a class with demand that the made-up routing leaves out is routed like one whose units are gone
    # (every class with demand is routed or unmet: hetinfra.document.consistency)
    routing = {m["name"]: {c["name"]: doc["routing"].get(m["name"], {}).get(c["name"]) or
                           [{"unit": "", "share": 1.0, "rps": c["rate_rps"]}]
                           for c in m["classes"] if c.get("rate_rps")} for m in doc["models"] if m.get("rate_rps")}
    routing = {m: {**doc["routing"].get(m, {}), **per} for m, per in routing.items()}
    routing.update({m: per for m, per in doc["routing"].items() if m not in routing})
    out["routing"] = {m: {c: rows_for(m, rows, False, c) for c, rows in per.items()} for m, per in routing.items()}
    unmet = {f"{m}/{c}": round(sum(float(e["rps"]) for e in routing[m][c]), 6)
             for m, per in out["routing"].items() for c, rows in per.items() if not rows}
    out["unmet_rps"] = {**unmet, **doc.get("unmet_rps", {})}
    if doc.get("routing_by_origin"):
        out["routing_by_origin"] = {m: {o: {c: rows_for(m, rows, True, c) for c, rows in classes.items()}
                                        for o, classes in per.items()} for m, per in doc["routing_by_origin"].items()}
    return totals_added_up(out)
