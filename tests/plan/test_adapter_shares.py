"""An adapters' shares that sum to 1 up to their rounding leave the base no class of its own
(hetinfra.plan.adapters.SHARE_ROUNDING): its 6e-6 req/s were routed to a base unit with no instance,
and plan.json's routing named a unit not among its allocations (5 Zipf adapters at 6 req/s)."""

from __future__ import annotations

import pytest

from hetinfra.plan.adapters import adapter_demand

SHARES = (0.437956, 0.218978, 0.145985, 0.109489, 0.087591)  # Zipf(1) over 5, six decimals: 0.999999


def test_rounded_shares_leave_the_base_no_demand():
    from types import SimpleNamespace as Ns

    adapters = [Ns(name=f"a{i}", demand=Ns(share=s, rate_rps=None)) for i, s in enumerate(SHARES)]
    demand, _ = adapter_demand("b", {"c": 6.0}, adapters)
    assert ("b", "c") not in demand and sum(demand.values()) == pytest.approx(6.0 * sum(SHARES))
    demand, _ = adapter_demand("b", {"c": 6.0}, adapters[:4])  # a real base share stays
    assert demand[("b", "c")] > 0.5
