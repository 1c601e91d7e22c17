"""Pairs of files and outside answers (issue 36): a router/weights.json or state.json mutated beside
a valid two-model plan.json, and any Kubernetes API answer. Whatever arrives, the loader either
refuses it with a clear error (InvalidInputError / ProviderError) or yields a table that sends each
model only to its own units and counts in bounds; never a traceback of another type."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from hetinfra.compile.router import router_weights
from hetinfra.deploy.kube_answers import MAX_REPLICAS, PodList, Workload, parse_answer, parse_body
from hetinfra.document import Plan
from hetinfra.errors import InvalidInputError, ProviderError
from hetinfra.gateway.table import load_table
from tests.document.test_crosscheck import _state, two_model_plan
from tests.fuzz.conftest import budget
from tests.fuzz.test_fuzz_spec import JUNK, leaf_paths, mutate

PLAN = two_model_plan()
SERVES = {a["deployment_unit"]: a["model"] for a in PLAN["allocations"]}
WEIGHTS = router_weights(Plan.parse(PLAN))
STATE = _state(PLAN)
#: values that are valid on their own but wrong together: another model's unit, another service
PAIRED = st.sampled_from(sorted(SERVES) + [a["unit"] for a in PLAN["allocations"]] + ["chat-8b", "code-3b",
                                                                                     "other-svc", "kubernetes"])


@st.composite
def mutated(draw, doc):
    for _ in range(draw(st.integers(1, 2))):
        path = draw(st.sampled_from(leaf_paths(doc)))
        doc = mutate(doc, path, draw(st.one_of(JUNK, PAIRED)))
    if draw(st.booleans()):  # a key renamed: a weight moved to another unit
        paths = [p for p in leaf_paths(doc) if isinstance(p[-1], str) and p[-1] in SERVES]
        if paths:
            p = draw(st.sampled_from(paths))
            parent = doc
            for k in p[:-1]:
                parent = parent[k]
            parent[draw(st.sampled_from(sorted(SERVES)))] = parent.pop(p[-1])
    return doc


@budget(60)
@given(which=st.sampled_from(["weights", "state"]), data=st.data())
def test_a_mutated_weights_or_state_beside_a_plan_is_refused_or_consistent(tmp_path_factory, which, data):
    from tests.gateway.conftest import write_out

    out = write_out(tmp_path_factory.mktemp("pair") / "out", PLAN)
    doc = data.draw(mutated(WEIGHTS if which == "weights" else STATE))
    target = out / "router" / "weights.json" if which == "weights" else out / "state.json"
    target.write_text(json.dumps(doc))
    try:
        table = load_table(out)
    except InvalidInputError as exc:
        assert str(target) in exc.message or "plan.json" in exc.message, exc.message
        return
    for model, routes in table.models.items():
        for c in routes.classes:
            assert all(SERVES.get(u, model) == model for u, _ in c.weights), (model, c)


ANSWER = st.recursive(st.one_of(JUNK, st.sampled_from(["Pending", "Running", "True", "False", "Unschedulable",
                                                       "PodScheduled", "Ready", "2026-12-05T07:00:00Z"])),
                      lambda kids: st.one_of(st.lists(kids, max_size=3),
                                             st.dictionaries(st.sampled_from(
                                                 ["status", "items", "readyReplicas", "phase", "conditions", "type",
                                                  "reason", "lastTransitionTime", "x"]), kids, max_size=4)),
                      max_leaves=20)


@budget(200)
@given(doc=ANSWER, nest=st.integers(0, 100))
def test_any_kubernetes_answer_is_typed_or_a_provider_error(doc, nest):
    try:
        text = "[" * nest + json.dumps(doc) + "]" * nest
    except ValueError:
        return
    for model in (Workload, PodList):
        try:
            parsed = parse_answer(model, parse_body(text, "cluster c: GET /x"), "cluster c: GET /x")
        except ProviderError as exc:
            assert exc.exit_code == 4 and exc.message.startswith(("cluster c: GET /x", "malformed answer"))
            continue
        if isinstance(parsed, Workload):
            assert 0 <= parsed.ready <= MAX_REPLICAS
        else:
            assert all(p.unschedulable_since() is None or p.unschedulable_since() == p.unschedulable_since()
                       for p in parsed.items)
