"""A split plan unit as the simulator runs it (hetinfra.sim.split): its roles' pools at their TPs,
joined by the transfer the plan priced."""

from __future__ import annotations

import numpy as np
import pytest

from hetinfra.catalog.gpus import get_gpu
from hetinfra.catalog.models import get_model
from hetinfra.document.simulation import SimUnit
from hetinfra.perf.calibration import CALIBRATION
from hetinfra.perf.estimator import build_engine
from hetinfra.sim.columns import UnitRequests, simulate_pools
from hetinfra.sim.split import split_pools

QWEN, H200 = get_model("qwen3-32b"), get_gpu("H200")


def _unit(gbytes_s: float, count: int = 2) -> SimUnit:
    return SimUnit.model_validate({
        "unit": "u", "template": "t", "model": "m", "region": "r", "gpu": "H200", "tp": 4, "pp": 1,
        "engines_per_instance": 1, "nodes_per_replica": 1, "count": count,
        "disaggregation": {"xpyd": "2P1D", "link": "nvlink", "link_gbytes_s": gbytes_s, "kv_bytes_per_token": 262144,
                           "roles": [{"role": "prefill", "engines": 2, "tp": 2, "nodes": 0},
                                     {"role": "decode", "engines": 1, "tp": 4, "nodes": 0}],
                           "classes": [{"name": "c", "transfer_ms": 1.0}]}})


def _build(alloc):
    return build_engine(QWEN, H200, alloc.tp, 1, 4000, 500, "fp8", 0.9, 256, None, None, CALIBRATION)


def _ttft(gbytes_s: float) -> float:
    pools, route = split_pools(_unit(gbytes_s), _build)
    reqs = UnitRequests(np.array([0]), np.array([0.0]), np.array([4000]), np.array([50]), np.array([0]))
    simulate_pools(pools, reqs, route)
    return float(reqs.first[0] - reqs.arrival[0])


def test_pools_follow_the_roles():
    pools, route = split_pools(_unit(100.0, count=3), _build)
    assert [len(p) for p in pools] == [6, 3]  # count x each role's engines
    assert pools[0][0].engine.pp == 1 and route.transfer.bytes_per_token == 262144


def test_ttft_carries_the_transfer_at_the_plans_bandwidth():
    fast, slow = _ttft(100.0), _ttft(10.0)
    moved = 4000 * 262144
    # the same request, the same engines: only the transfer changes, by exactly its bytes over the bandwidths
    assert slow - fast == pytest.approx(moved / 10e9 - moved / 100e9, rel=1e-6)
    assert fast > moved / 100e9


def test_a_heterogeneous_bundle_runs_each_pool_on_its_roles_gpu():
    """H100 prefill nodes, H200 decode nodes (issue 37): each pool's step model is its role's GPU's."""
    unit = _unit(100.0)
    d = unit.disaggregation.model_copy(update={"roles": [
        unit.disaggregation.roles[0], unit.disaggregation.roles[1].model_copy(
            update={"instance_type": "p5en.48xlarge", "gpu": "H200", "gpus_per_node": 8})]})
    unit = unit.model_copy(update={"gpu": "H100", "disaggregation": d})
    seen = []
    split_pools(unit, lambda alloc: seen.append((alloc.gpu, alloc.tp)) or _build(alloc))
    assert seen == [("H100", 2), ("H200", 4)]
