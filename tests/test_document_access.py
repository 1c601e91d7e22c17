"""plan.json and state.json are read through their models (hetinfra.document), not by string key.

What the check flags, precisely: in a module of the installed package (the folders pyproject maps
into ``hetinfra``) other than the document's own modules and the writers (:data:`OWNERS`), every

- subscript read ``x["key"]`` (a load: writes such as ``doc["key"] = ...`` are the writers' business), and
- call ``x.get("key", ...)``

whose constant string key is a **document key**: a field name of the Plan or State model tree that
no ServiceSpec model uses and that is not a common word other JSON formats use as well
(:data:`COMMON`). ``x`` can be anything: a dict read from plan.json, state.json or one of their
sections looks like any other dict to the AST.

Two exact, commented allow-lists keep it to documents: :data:`NOT_DOCUMENTS` names the (module, receiver)
pairs that hold another format's dict (an offers CSV row, the template cache's file), and :data:`WRITERS`
the (module, function) pairs that write a plan.json copy from the dict they are given.

Readers that still index the plan's dict are counted in :data:`REMAINING` (module -> reads today); a
module may only go down. A new module that reads a document key, or a module that reads more than its
count, fails; a test plants such a read to show it.
"""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from tests.test_imports import REPO, modules, package_roots, parsed, tree_copy  # noqa: F401 (tree_copy: a fixture)

#: the document's own modules and the modules that write plan.json / state.json (origins_json: the
#: origins and routing_by_origin sections, from the allocations plan_json is assembling)
OWNERS = {"hetinfra.document", "hetinfra.plan.plan_json", "hetinfra.plan.purchase", "hetinfra.plan.failover",
          "hetinfra.plan.verify", "hetinfra.deploy.state", "hetinfra.plan.origins_json", "hetinfra.plan.fidelity",
          # verification's modules (issue 33: verify.py's rounds, judges, ceilings and confirmation, split out)
          # work on simulation views, the plan.json-shaped dicts the simulator and the trim take
          "hetinfra.plan.rounds", "hetinfra.plan.replicated", "hetinfra.plan.kv_pressure", "hetinfra.plan.ceiling",
          "hetinfra.plan.confirm", "hetinfra.plan.verdicts", "hetinfra.plan.cliff", "hetinfra.plan.lumpy",
          "hetinfra.plan.verdict_keys", "hetinfra.plan.factors",
          # and the padding after the last veto, which writes fidelity.confirmation.padded's records, the padding
          # of a vetoed plan (its vetoes' and padded records), and the off-peak fleets of a demand profile,
          # simulation views of the plan with other counts
          "hetinfra.plan.pad", "hetinfra.plan.alternative", "hetinfra.plan.levels",
          # a profile period's fleet: the same views with that period's counts and demand (simulate --period
          # and verification's off-peak fleets share it; it reads the Plan model for the counts)
          "hetinfra.sim.period"}
#: document keys that are also everyday words in other JSON hetinfra handles (Pulumi, SkyPilot, the
#: simulator's reports, HTTP bodies, the solver's statistics): not flagged, or every unrelated dict would
#: be. Only document keys no spec model uses (spec keys are never flagged anyway)
COMMON = {"id", "status", "count", "error", "rows", "bound", "gap", "met", "nodes", "tp", "pp", "reason", "running",
          "started", "stopped", "steps", "outputs", "endpoint", "dir", "hits", "misses", "from", "engine",
          "method", "variables", "constraints", "iterations", "as_of", "sha256", "service", "unit", "template",
          "instances", "instance_type", "variant", "sources", "purchase", "rps", "derate", "levels", "served", "live",
          "images", "pulumi", "skypilot", "warnings", "placement", "stages", "slug", "allocation",
          "multipliers", "max_model_len", "cost_usd_per_hour", "experimental", "resumed", "updated_at", "started_at",
          "finished_at", "safety_stop", "blocks", "by_model", "by_region", "spec_path", "endpoints", "objects",
          # a judgement over replications (hetinfra.sim.replications.judge) writes these in simulate's report
          # and verification copies them into fidelity
          "replications", "seeds", "decision", "stable", "estimate", "ratio_bound",
          # fidelity's typed keys (issue 34) that other reports use as well: the simulator's judgement ratio,
          # a profile row's statistic, pending's removed units
          "ratio", "statistic", "removed"}
#: module -> document-key reads it still makes (to migrate to the models; may only go down)
REMAINING: dict[str, int] = {
    # the simulation view's dict (plan_json.simulation_view), cut into one model's part before it is
    # validated and keyed per model (validating a 32-model fleet's view for every subset of models was a
    # tenth of its judging: issue 33's speed); to migrate: cut the validated SimPlan instead
    "hetinfra.plan.parts": 8,
}
#: module -> string-key reads of any plan.json / state.json field name it makes, the spec's shared keys and
#: COMMON's everyday words included (wide_reads; an upper bound: another format's dict that shares a word
#: counts too). Issue 34 counted 322 on main, 304 after its deploy/compile/gateway part; main 9f2efa0 read
#: 407 (the table had not followed issue 33's fidelity readers: 8 modules over). Typing fidelity's keys
#: (rounds, load, seed, requests, trim, ...) made them field names, so the same code counts 449 with
#: them; 431 after the plan stage builds the Plan (the summary reads the typed fidelity); 423 on main a57321e,
#: 397 once the replan journal, state.json's writer and apply's preview are typed (issue 34's deploy part),
#: 384 once the deploy stage's reads of other formats (a gateway's, SkyServe's, Azure's, Pulumi's answers)
#: are named in NOT_DOCUMENTS; 383 with the Kubernetes connection taking its context.
#: A module may only go down, and one that reaches 0 leaves the table
WIDE_REMAINING: dict[str, int] = {
    # issue 33's modules (sim.check, sim.stability, sim.plan_sim, replan.safe, plan.trim) read simulation.json
    # dicts, whose keys share the plan's names; sim.replications' judgement reads the typed records
    # (document.simulation.SimRun) and plan.summary the typed fidelity (58 + 39 reads fewer)
    "hetinfra.cli.feeds": 7,
    "hetinfra.cli.plan": 4,
    "hetinfra.cli.simulate": 4,  # stop 41: +1, simulate --check on too few requests (the simulation's dict)
    "hetinfra.compile.artifacts": 2,
    "hetinfra.compile.images": 3,
    "hetinfra.compile.kubernetes.gateway": 5,
    "hetinfra.compile.kubernetes.nodes": 3,
    "hetinfra.compile.kubernetes.render": 12,
    "hetinfra.compile.kubernetes.scaling": 2,
    "hetinfra.compile.pulumi_project": 2,
    "hetinfra.compile.router": 5,
    "hetinfra.deploy.drift": 11,  # its record's readers moved to deploy.live_read (5 reads); 7 fewer since
    "hetinfra.deploy.live_read": 5,
    "hetinfra.deploy.pulumi_driver": 2,
    "hetinfra.perf.harness": 1,
    "hetinfra.perf.profiles": 8,
    "hetinfra.perf.published": 7,  # its vendored kernel table's rows (perf/data/aic_steps.json), no plan document
    "hetinfra.plan.blocks": 3,
    "hetinfra.plan.parts": 27,  # see REMAINING
    "hetinfra.plan.pending": 7,
    "hetinfra.plan.running": 2,  # the running-state readers, moved out of plan.planner
    "hetinfra.plan.trim": 5,
    "hetinfra.price_feeds.caps": 4,
    "hetinfra.price_feeds.cloud_quotas": 3,
    "hetinfra.price_feeds.cloud_skus": 2,
    "hetinfra.price_feeds.committed": 5,
    "hetinfra.price_feeds.load": 1,
    "hetinfra.price_feeds.network": 3,
    "hetinfra.price_feeds.store": 5,
    "hetinfra.sim.check": 21,  # stop 41: +8, too_few_lines reads simulation.json's models (slo, count, met); -2 since
    "hetinfra.sim.minimal": 15,
    "hetinfra.sim.plan_sim": 26,  # stop 42: -1, a unit's objective is read where its entry is made now (sim.unit_entry)
    "hetinfra.sim.report": 55,
    "hetinfra.sim.stability": 2,
    "hetinfra.sim.stats": 5,
    "hetinfra.sim.unit_entry": 1,  # stop 42: moved from sim.plan_sim (a unit's latency["objective"])
    "hetinfra.solver.decompose": 3,
    "hetinfra.solver.periods": 1,
    "hetinfra.stacks.aws": 1,
    "hetinfra.stacks.azure": 2,
    "hetinfra.stacks.common": 2,
    "hetinfra.stacks.fleet": 4,
    "hetinfra.stacks.gateway": 6,
    "hetinfra.stacks.gcp": 1,
    "hetinfra.stacks.kubernetes": 13,
    "hetinfra.stacks.policies": 1,
}


def _model_names(model: type[BaseModel], seen: set) -> set[str]:
    out: set[str] = set()
    if model in seen:
        return out
    seen.add(model)
    for name, f in model.model_fields.items():
        out.add(f.alias or name)
        todo = [f.annotation]
        while todo:
            t = todo.pop()
            if isinstance(t, type) and issubclass(t, BaseModel):
                out |= _model_names(t, seen)
            else:
                todo.extend(typing.get_args(t))
    return out


def document_keys() -> set[str]:
    from hetinfra.document import Plan
    from hetinfra.document.state import State
    from hetinfra.spec.models import ServiceSpec

    spec = _model_names(ServiceSpec, set())
    return (_model_names(Plan, set()) | _model_names(State, set())) - spec - COMMON


def _owned(module: str) -> bool:
    return any(module == o or module.startswith(o + ".") for o in OWNERS)


#: (module, receiver) -> why its reads are not of plan.json / state.json: dicts of other formats whose
#: keys share a name with a document field. Only that receiver, written exactly so, in that module.
NOT_DOCUMENTS = {
    ("hetinfra.replan.log_read", "col"): "a demand-log CSV's header: column name (model, region, ...) -> index",
    ("hetinfra.replan.log_read", "columns"): "a demand-log CSV's cells by column name (model, region, ...)",
    ("hetinfra.price_feeds.offers", "row"): "a row of an offers CSV (csv.DictReader): price_per_hour, gpu_memory_gb "
                                            "are its columns",
    ("hetinfra.price_feeds.offers", "RANGES"): "the offers CSV's column -> allowed range table",
    ("hetinfra.price_feeds.validate", "row"): "a row of an offers CSV being validated (same columns)",
    ("hetinfra.sim.report", "unit"): "a simulation.json units[] entry (hetinfra.sim.unit_entry): its engines are "
                                     "the engines simulated, not a bundle role's",
    ("hetinfra.plan.template_cache", "doc"): "the template cache's own JSON file (CACHE_FORMAT), not a plan",
    ("hetinfra.gateway.steps", "body"): "a client's OpenAI request body (its model, stream, max_tokens)",
    ("hetinfra.deploy.destroy", "doc"): "the gateway's GET /admin/weights answer (live weights per model), which "
                                        "status shows",
    ("hetinfra.deploy.groups", "view.get('vmHealth') or {}"): "an Azure VMSS instance view's health record (ARM API)",
    ("hetinfra.deploy.health", "r"): "a `sky serve status` record (SkyServe's service name)",
    ("hetinfra.deploy.health", "x"): "a `sky serve status` replica record (SkyServe's replica status)",
    ("hetinfra.deploy.images", "outputs"): "a Pulumi stack's outputs (the images it used)",
    ("hetinfra.deploy.images", "info"): "a Pulumi stack output's image record (id, latest)",
    ("hetinfra.deploy.images", "v"): "an ARM API image version record",
    ("hetinfra.deploy.preview", "doc"): "`pulumi preview --json`'s document (its steps)",
    ("hetinfra.gateway.table", "weights"): "router/weights.json, compile's routing weights (not plan.json)",
    ("hetinfra.plan.origins", "x['availability']"): "an InfeasibleError's relax detail (an availability cap)",
}
#: (module, function) -> why it may index a document's dict: functions that write a plan.json from the
#: dict they are given (a copy with other allocations). They keep the dict because the model's dump
#: orders keys as the model does, not as plan.json is written, and the copy must stay byte-identical.
WRITERS = {
    ("hetinfra.compile.pulumi_project", "cloud_plan"): "each cloud project's plan.json: the plan restricted to "
                                                       "that cloud's allocations",
    ("hetinfra.replan.safe", "stage_plan"): "replan's stage plan.json: the new plan with the stage's counts",
    ("hetinfra.sim.minimal", "without_one_replica"): "the trim's copy of a plan.json with one replica fewer",
    ("hetinfra.sim.minimal", "without_allocation"): "the trim's copy of a plan.json without one allocation",
}


def _key_of(node: ast.AST) -> tuple[str | None, ast.AST | None]:
    """(constant key, receiver) of a subscript read or ``.get`` call; (None, None) otherwise."""
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Constant):
        return node.slice.value, node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
            and node.args and isinstance(node.args[0], ast.Constant):
        return node.args[0].value, node.func.value
    return None, None


def _reads(module: str, tree: ast.AST, keys: set[str]) -> list[str]:
    """``line: key`` of the flagged reads under ``tree``, the WRITERS' function bodies left out."""
    out = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (module, node.name) in WRITERS:
            continue
        key, receiver = _key_of(node)
        if isinstance(key, str) and key in keys and (module, ast.unparse(receiver)) not in NOT_DOCUMENTS:
            out.append(f"{node.lineno}: {key}")
        out += _reads(module, node, keys)
    return out


def key_reads(repo: Path, keys: set[str]) -> dict[str, list[str]]:
    """module -> ``line: key`` of every flagged read (see the module docstring)."""
    out: dict[str, list[str]] = {}
    for name, path in modules(repo).items():
        if _owned(name):
            continue
        if found := _module_reads(name, parsed(path), frozenset(keys)):
            out[name] = found
    return out


#: (module, id of its parsed tree, keys) -> its reads: the planted-fault tests walk copies of the tree
#: in which all files but one are the same text, so the same cached tree (tests/test_imports.parsed); a
#: changed file parses to a new tree and is walked again
_READS: dict[tuple[str, int, frozenset], tuple[ast.AST, list[str]]] = {}


def _module_reads(name: str, tree: ast.AST, keys: frozenset) -> list[str]:
    if (name, id(tree), keys) not in _READS:  # the tree is held with its reads: its id is never reused
        _READS[name, id(tree), keys] = tree, _reads(name, tree, keys)
    return list(_READS[name, id(tree), keys][1])


def all_document_keys() -> set[str]:
    """Every field name of the Plan and State model trees: the keys the spec shares and the everyday
    words (COMMON) included."""
    from hetinfra.document import Plan
    from hetinfra.document.state import State

    return _model_names(Plan, set()) | _model_names(State, set())


def wide_reads(repo: Path) -> dict[str, list[str]]:
    """module -> every string-key read of a plan.json or state.json field name, shared keys and common
    words included (a dict of another format that shares a word is counted too: the count is an upper
    bound, recorded in WIDE_REMAINING so that it can only go down)."""
    return key_reads(repo, all_document_keys())


def problems(repo: Path) -> list[str]:
    found = key_reads(repo, document_keys())
    return [f"{m} reads plan.json/state.json by key {len(reads)} time(s) (allowed {REMAINING.get(m, 0)}): "
            f"{', '.join(reads[:6])}; read the model (hetinfra.document) instead"
            for m, reads in sorted(found.items()) if len(reads) > REMAINING.get(m, 0)]


def test_no_module_reads_the_documents_by_key_beyond_its_count():
    assert problems(REPO) == []


def test_wide_reads_only_go_down():
    """Every string-key read of a document field name, shared keys included, per module, against
    WIDE_REMAINING: a module that reads more, or a new module that reads any, fails (one that reads
    fewer passes; lower its entry to keep the gain)."""
    found = {module: len(reads) for module, reads in wide_reads(REPO).items()}
    more = {module: (count, WIDE_REMAINING.get(module, 0)) for module, count in found.items()
            if count > WIDE_REMAINING.get(module, 0)}
    assert not more, f"more string-key reads of plan.json/state.json fields than recorded (now, allowed): {more}"


def test_a_planted_shared_key_read_is_counted(tree_copy):
    """A read of a key the spec shares (``name``) or of an everyday word (``count``) is not flagged by
    the narrow check but is counted by the wide one."""
    target = tree_copy / "hetinfra" / "gateway" / "balancer.py"
    before = len(wide_reads(tree_copy).get("hetinfra.gateway.balancer", []))
    target.write_text(target.read_text() + "\n\ndef _planted(alloc):\n    return alloc['name'], alloc.get('count')\n")
    assert len(wide_reads(tree_copy)["hetinfra.gateway.balancer"]) == before + 2
    assert not any(p.startswith("hetinfra.gateway.balancer") for p in problems(tree_copy))


def test_the_flagged_keys_are_the_documents_own():
    keys = document_keys()
    assert {"deployment_unit", "skypilot_task", "nodes_per_replica", "plan_version", "state_version"} <= keys
    assert not keys & {"name", "port", "count", "status"}  # spec keys and everyday words are not flagged
    # the plan's own words that no other format's reader uses are flagged
    assert {"feasible", "terms", "periods", "utilization", "chosen", "best", "level"} <= keys


def test_common_words_are_document_keys_the_spec_does_not_use():
    from hetinfra.document import Plan
    from hetinfra.document.state import State
    from hetinfra.spec.models import ServiceSpec

    spec = _model_names(ServiceSpec, set())
    documents = _model_names(Plan, set()) | _model_names(State, set())
    assert COMMON <= documents - spec, sorted(COMMON - (documents - spec))


def test_a_planted_key_read_fails(tree_copy):
    target = tree_copy / "hetinfra" / "gateway" / "balancer.py"
    target.write_text(target.read_text() + "\n\ndef _planted(plan):\n"
                      "    return [a['deployment_unit'] for a in plan.get('allocations', [])]\n")
    found = problems(tree_copy)
    assert any(p.startswith("hetinfra.gateway.balancer reads plan.json/state.json by key") and "deployment_unit" in p
               for p in found), found
    # the document's own modules may
    # the allow-lists are exact: another receiver in the same module, or a writer's name in another module, is flagged
    feed = tree_copy / "price_feeds" / "offers.py"
    feed.write_text(feed.read_text() + "\n\ndef cloud_plan(plan):\n    return plan['deployment_unit']\n")
    assert any(p.startswith("hetinfra.price_feeds.offers reads") for p in problems(tree_copy))
    own = tree_copy / "hetinfra" / "document" / "plan.py"
    own.write_text(own.read_text() + "\n\ndef _planted(plan):\n    return plan['deployment_unit']\n")
    assert not any(p.startswith("hetinfra.document") for p in problems(tree_copy))


def test_no_signature_takes_plan_or_dict():
    """Readers take the typed Plan; a dict is parsed once where it comes in (load_plan, Plan.parse),
    so no function is annotated ``Plan | dict`` (issue 34; the count was 6, now 0: keep it there)."""
    from tools.seam_counts import plan_or_dict_signatures

    found = {name: items for name, path in modules(REPO).items() if (items := plan_or_dict_signatures(parsed(path)))}
    assert found == {}, f"functions that take Plan | dict (parse at the boundary and take the Plan): {found}"


def test_a_planted_plan_or_dict_signature_is_found():
    from tools.seam_counts import plan_or_dict_signatures

    planted = ast.parse('def a(plan: Plan | dict) -> int: ...\ndef b(x) -> "dict | Plan": ...\n'
                        'def c(plan: Plan, raw: dict) -> None: ...\n')
    assert plan_or_dict_signatures(planted) == ["1: a", "2: b"]
