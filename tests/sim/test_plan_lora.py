"""A plan's LoRA units in the plan simulator (issue 38 point 2): verification runs them on sim.lora (requests
carrying their adapter, the slots' memory out of the KV cache, every batch with adapters m times slower),
so a unit with adapters is at least the slowdown slower than the same unit simulated as a base engine (a planted fault: the
adapters section dropped, as if the hook were gone)."""

from __future__ import annotations

import json

import pytest
import yaml

from hetinfra.sim.plan_sim import simulate_plan
from hetinfra.sim.workload import WorkloadConfig
from hetinfra.spec.load import load_spec
from tests.plan.test_adapter_plan import SPEC


@pytest.fixture(scope="module")
def planned(shared_plan):
    out = shared_plan(yaml.safe_load(SPEC), "--no-verify", "--no-baselines")  # tests/plan/test_adapter_plan.py's
    return json.loads((out / "plan.json").read_text()), out.parent / "service.yaml"


def tpot_p50(plan: dict, spec_path) -> dict[str, float]:
    spec, _, _ = load_spec(spec_path)
    out = simulate_plan(plan, spec, spec_path, WorkloadConfig(requests=1500))
    return {u["unit"]: u["tpot_ms"]["p50"] for u in out["units"] if u["count"]}


def test_lora_units_run_slower_than_their_base_engine(planned):
    """At the same routed traffic every step is m times slower, and batches grow with it: at least m."""
    plan, spec_path = planned
    lora = tpot_p50(plan, spec_path)
    base = tpot_p50(dict(plan, allocations=[{k: v for k, v in a.items() if k != "adapters"}
                                            for a in plan["allocations"]]), spec_path)
    for a in plan["allocations"]:
        if a.get("adapters") and a["unit"] in lora:
            ratio = lora[a["unit"]] / base[a["unit"]]
            assert ratio > 0.95 * a["adapters"]["slowdown"], (a["unit"], ratio)
