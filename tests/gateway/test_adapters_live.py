"""Routing by LoRA adapter on loopback (issue 38 point 4): `hetinfra plan` places three adapters, one
stand-in engine per deployment unit of its plan.json, the real gateway in front. Each adapter's
requests reach only the units plan.json says hold it; with a unit killed, every adapter another unit
holds keeps its service; the demand log records the adapter (the request's model). About 10 s: a
plan, four processes and 240 requests on loopback, the only way to check the real gateway's routing."""

from __future__ import annotations

import asyncio
import json
import signal
import time

import httpx
import pytest
import yaml

from tests.conftest import copied_plan
from tests.gateway.conftest import auth
from tests.gateway.test_gateway_live import fire, flushed_log
from tests.plan.test_adapter_plan import SPEC  # one L40S at most: sql needs a second unit

N = 40  # requests per adapter and round


@pytest.fixture(scope="module")
def fleet(module_procs, tmp_path_factory, shared_plan):
    # the run's one plan of SPEC (tests/plan/test_adapter_plan.py's too), copied: the gateway writes its log in it
    out = copied_plan(shared_plan(yaml.safe_load(SPEC), "--no-verify", "--no-baselines"),
                      tmp_path_factory.mktemp("lora-live") / "out")
    plan = json.loads((out / "plan.json").read_text())
    holders: dict[str, set[str]] = {}
    for a in plan["allocations"]:
        for h in (a.get("adapters") or {}).get("held", []):
            holders.setdefault(h["name"], set()).add(a["deployment_unit"])
    backends = {a["deployment_unit"]: module_procs.backend(a["deployment_unit"]) for a in plan["allocations"]}
    _, gw = module_procs.gateway(out, [f"{u}={url}" for u, (_, url) in backends.items()])
    return {"out": out, "gw": gw, "holders": holders, "backends": backends}


def served_by(gw: str, model: str) -> list[tuple[int, str | None]]:
    jobs = [{"model": model, "prompt": "x" * 400, "max_tokens": 50} for _ in range(N)]
    return [(code, body.get("backend")) for code, body in asyncio.run(fire(gw, jobs, concurrency=4, headers=auth()))]


def ejected(gw: str, unit: str) -> bool:
    """Whether the gateway's health rounds took ``unit`` out of routing (GET /metrics: its up gauge is 0)."""
    text = httpx.get(gw + "/metrics", timeout=5).text
    return any(line.startswith(f'hetinfra_gateway_backend_up{{unit="{unit}",') and line.endswith(" 0.0")
               for line in text.splitlines())


def test_each_adapter_reaches_only_its_holders_and_survives_a_killed_unit(fleet):
    holders, gw = fleet["holders"], fleet["gw"]
    assert set(holders) == {"sql", "law", "med"} and any(len(u) > 1 for u in holders.values())
    for name, units in holders.items():
        got = served_by(gw, name)
        assert all(code == 200 for code, _ in got) and {b for _, b in got} <= units, (name, got)
    # kill a unit holding an adapter that another unit also holds
    victim = next(u for units in holders.values() if len(units) > 1 for u in sorted(units))
    fleet["backends"][victim][0].send_signal(signal.SIGKILL)
    deadline = time.monotonic() + 10  # a few health rounds (0.2 s) eject it: then its up gauge reads 0
    while not ejected(gw, victim):
        assert time.monotonic() < deadline, f"{victim} still admitted 10 s after it was killed"
        time.sleep(0.05)
    for name, units in holders.items():
        left = units - {victim}
        if not left:
            continue  # its only holder is gone: no other unit may serve it
        got = served_by(gw, name)
        assert all(code == 200 for code, _ in got) and {b for _, b in got} <= left, (name, got)


def test_the_demand_log_records_the_adapter(fleet):
    from hetinfra.replan.demand_log import read_demand_log

    log = read_demand_log(flushed_log(fleet["out"] / "gateway" / "demand.csv", N))
    assert {"sql", "law", "med"} <= set(log.models.tolist())
