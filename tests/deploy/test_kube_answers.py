"""The Kubernetes API's answers are typed (hetinfra.deploy.kube_answers): whatever a cluster sends,
status reads whole replica counts in bounds or stops with a ProviderError (exit 4) naming the
cluster, the request and the field; the kubeconfig goes through the safe reader (a FIFO is refused,
not a hang); state.json never records a count outside 0..MAX_LIVE_COUNT."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.deploy.apply import apply_plan
from hetinfra.deploy.drift import read_live
from hetinfra.deploy.kube_answers import MAX_REPLICAS, PodList, Workload, parse_answer, parse_body
from hetinfra.deploy.kube_api import read_kubeconfig
from hetinfra.deploy.state import DeployState
from hetinfra.document.state import MAX_LIVE_COUNT, parse_state
from hetinfra.errors import InvalidInputError, ProviderError
from hetinfra.document import Plan  # apply_plan takes the typed plan
from tests.deploy.test_kube import ENV, cluster, deploy_env, planned  # noqa: F401 - fixtures

JUNK = st.one_of(st.none(), st.booleans(), st.integers(min_value=-10**31, max_value=10**31),
                 st.floats(allow_nan=False), st.text(max_size=8), st.lists(st.integers(), max_size=2),
                 st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))


@settings(max_examples=200, deadline=None)
@given(ready=JUNK, phase=JUNK, stamp=JUNK, items=st.one_of(JUNK, st.just([])))
def test_any_answer_is_a_count_in_bounds_or_a_provider_error(ready, phase, stamp, items):
    for model, doc in [(Workload, {"status": {"readyReplicas": ready}}),
                       (PodList, {"items": [{"status": {"phase": phase, "conditions": [
                           {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                            "lastTransitionTime": stamp}]}}]}),
                       (PodList, {"items": items})]:
        try:
            got = parse_answer(model, doc, "cluster c: GET /x")
        except ProviderError as exc:
            assert exc.message.startswith("cluster c: GET /x: malformed answer: ")
            continue
        if isinstance(got, Workload):
            assert isinstance(got.ready, int) and 0 <= got.ready <= MAX_REPLICAS
        else:
            for pod in got.items:
                since = pod.unschedulable_since()
                assert since is None or isinstance(since, float)


@pytest.mark.parametrize("text", ["[" * 100_000, "{\"a\": NaN}", "not json", "{\"status\": "])
def test_a_body_that_is_not_bounded_json_is_a_provider_error(text):
    with pytest.raises(ProviderError) as err:
        parse_body(text, "cluster c: GET /x")
    assert "malformed answer" in err.value.message


@pytest.mark.parametrize("status", [{"readyReplicas": -5}, {"readyReplicas": 10**30}, {"readyReplicas": "3"},
                                    {"readyReplicas": 2.5}, "ready", None])
def test_status_on_a_malformed_workload_exits_4_naming_cluster_and_field(cluster, planned, deploy_env, status):
    out, plan = planned
    (alloc,) = plan["allocations"]
    unit = alloc["deployment_unit"]
    apply_plan(out, Plan.parse(plan), target="kubernetes", yes=True, echo=lambda _l: None, env=ENV)
    cluster.objects[f"/apis/apps/v1/namespaces/llm/deployments/{unit}"]["status"] = status
    if status is None:  # no status yet: 0 ready, not an error
        assert read_live(out, DeployState.load(out))["units"][unit]["live"] == 0
        return
    with pytest.raises(ProviderError) as err:
        read_live(out, DeployState.load(out))
    assert "cluster aws-us-east-1: GET /apis/apps/v1/namespaces/llm/deployments/" in err.value.message
    assert "status" in err.value.message and err.value.exit_code == 4


def test_a_pod_with_a_garbled_transition_time_exits_4(cluster, planned, deploy_env):
    out, plan = planned
    unit = plan["allocations"][0]["deployment_unit"]
    apply_plan(out, Plan.parse(plan), target="kubernetes", yes=True, echo=lambda _l: None, env=ENV)
    cluster.add_pod("llm", f"{unit}-0", {"hetinfra.dev/unit": unit}, phase="Pending", unschedulable_since="yesterday")
    with pytest.raises(ProviderError, match="lastTransitionTime"):
        read_live(out, DeployState.load(out))


def test_a_kubeconfig_fifo_is_refused_not_a_hang(tmp_path):
    fifo = tmp_path / "kubeconfig"
    os.mkfifo(fifo)
    with pytest.raises(InvalidInputError, match="not a regular file"):
        read_kubeconfig(str(fifo))
    (tmp_path / "deep").write_text("a: " + "[" * 5000 + "]" * 5000)
    with pytest.raises(InvalidInputError, match="nested deeper than 64"):
        read_kubeconfig(str(tmp_path / "deep"))


@pytest.mark.parametrize("count", [-5, 10**30, MAX_LIVE_COUNT + 1, True, 1.5])
def test_state_never_holds_a_live_count_out_of_bounds(tmp_path, count):
    live = {"live_replicas": 0, "units": {"u": {"live": count, "desired": 1}}}
    with pytest.raises(ProviderError, match="out of bounds"):
        DeployState.load(tmp_path).record_live(live)
    with pytest.raises(InvalidInputError, match="live.units.u.live"):
        parse_state({"state_version": 1, "live": live}, tmp_path / "state.json")
    ok = {"live_replicas": 3, "units": {"u": {"live": 3, "desired": 3}}}
    DeployState.load(tmp_path).record_live(ok)
    assert parse_state(json.loads(json.dumps({"state_version": 1, "live": ok})), tmp_path / "state.json")
