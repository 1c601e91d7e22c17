"""An origin's flow to a prefill/decode bundle is rated at what the round trip leaves of the model's
TTFT (hetinfra.plan.origins._Rates.ratio) the way the bundle's own rate is: prefill, queue, transfer
and the first decode step (templates_pd.bundle_ttft_ratio). It used to be rated as a colocated engine
of the decode role's TP: silently wrong for a bundle in one node, and for a bundle across nodes an
InvalidInputError ('pp=1 stages cannot be spread evenly over 2 node(s)', exit 2) for any spec with
demand.origins and planning.disaggregation: auto on RDMA types."""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml

from hetinfra.plan.origins import _Rates
from hetinfra.plan.planner import prepare
from hetinfra.plan.templates import tp_options
from hetinfra.plan.templates_pd import bundle_kind, bundle_templates, bundle_ttft_ratio

HETERO = "benchmarks/specs/llama70-hetero-pd.yaml"


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    spec = yaml.safe_load(open(HETERO))
    spec["models"][0]["demand"]["origins"] = {"us-east-1": 0.7, "us-west-2": 0.3}
    spec["infrastructure"]["regions"] = ["us-east-1", "us-west-2"]
    path = tmp_path_factory.mktemp("o") / "hetero-origins.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return prepare(path, template_cache=False)


def test_a_bundle_at_a_shorter_ttft_is_rated_as_the_bundle_built_for_that_ttft(staged):
    """Property over every bundle kind on offer (one node, across nodes, heterogeneous) and round
    trips from 0 to past the TTFT: ratio x the template's rate is the rate of the same bundle built
    for a model whose TTFT is that much shorter (where it is built, not dropped as dominated; 0 past
    the TTFT), and the ratio never grows as the round trip does."""
    pm = staged.inputs.models[0]
    mine = {u.template.id: u.template for u in staged.units if u.template.bundle is not None}
    kinds = {bundle_kind(t) for t in mine.values()}
    assert kinds == {"one node", "across nodes", "heterogeneous"}
    cls, before = pm.classes[0], {}
    for rtt in (0.0, 40.0, 120.0, 260.0, 600.0):
        short = replace(pm, ctx=replace(pm.ctx, ttft_ms=pm.ctx.ttft_ms - rtt))
        rebuilt = {t.id: t for t in bundle_templates(staged.inputs, short, tp_options)} if rtt < pm.ctx.ttft_ms else {}
        assert rtt >= pm.ctx.ttft_ms or {bundle_kind(t) for t in rebuilt.values() if t.id in mine} == kinds
        for tid, t in sorted(mine.items()):
            got = bundle_ttft_ratio(pm, t, cls, pm.ctx.ttft_ms - rtt, {}) * t.rates[cls.name]
            if tid in rebuilt or rtt >= pm.ctx.ttft_ms:  # else dropped as dominated at that TTFT
                want = rebuilt[tid].rates.get(cls.name, 0.0) if tid in rebuilt else 0.0
                assert got == pytest.approx(want, rel=1e-9, abs=1e-12), (tid, rtt)
            assert got <= before.get(tid, got), (tid, rtt)
            before[tid] = got


def test_origins_rate_a_bundle_across_nodes_as_a_bundle(staged):
    rates = _Rates(staged.inputs)
    pm = staged.inputs.models[0]
    across = next(u.template for u in staged.units if u.template.bundle is not None and u.template.nodes > 1)
    got = rates.ratio(across, pm.classes[0], 60.0)  # raised InvalidInputError before
    assert got == bundle_ttft_ratio(pm, across, pm.classes[0], pm.ctx.ttft_ms - 60.0, {})
    assert 0.0 < got < 1.0
