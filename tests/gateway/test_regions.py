"""Two regional gateways on loopback (issue 25), in-process: each serves its region's row of a plan
with an EU origin kept in Europe (residency: continent) and a US origin without residency; a front
door's x-hetinfra-origin header picks the row; failover never takes EU requests out of Europe; the
demand log records the origin. Backends are loopback HTTP servers that name their unit."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import json
import socket
import threading

import httpx
import pytest

from hetinfra.gateway.server import GatewayConfig, create_app
from hetinfra.price_feeds.network import continent_of
from tests.conftest import QuietHandler, loopback_server
from tests.plan.test_origins import EU, US, atlantic

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def unit_backend(unit: str):
    class Handler(QuietHandler):
        def do_GET(self):
            self._answer({"ok": True})

        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self._answer({"id": "x", "object": "text_completion", "backend": unit,
                          "choices": [{"index": 0, "text": "t", "finish_reason": "length"}],
                          "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

        def _answer(self, doc: dict):
            raw = json.dumps(doc).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return Handler


@contextlib.contextmanager
def gateway(out, endpoints: dict[str, list[str]], region: str, demand_log=None):
    """The real gateway app under uvicorn in a thread, on a socket bound before it starts (no wait:
    connections queue in the backlog until it accepts)."""
    import uvicorn

    # IPPROTO_TCP named: asyncio turns Nagle's algorithm off only on a socket whose proto says TCP (the
    # accepted ones copy it), and with it on every answer after a connection's first waited for the
    # client's delayed ACK (~40 ms a request; uvicorn's own bind, under `hetinfra gateway`, names it)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    app = create_app(GatewayConfig(str(out), endpoints=endpoints, region=region, health_interval_s=3600,
                                   reload_interval_s=0, demand_log=str(demand_log) if demand_log else None))
    # loop="asyncio": "auto" would install uvloop's policy for the whole process (Pulumi's mocks, later, need asyncio's)
    policy = asyncio.get_event_loop_policy()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", loop="asyncio"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
        asyncio.set_event_loop_policy(policy)


def ask(url: str, n: int, origin: str | None = None) -> list[tuple[int, str | None]]:
    headers = {"x-hetinfra-origin": origin} if origin else {}
    out = []
    with httpx.Client(timeout=10) as client:
        for _ in range(n):
            r = client.post(url + "/v1/completions", json={"model": "chat", "prompt": "hello", "max_tokens": 16},
                            headers=headers)
            out.append((r.status_code, r.json().get("backend") if r.status_code == 200 else None))
    return out


@pytest.fixture(scope="module")
def regional(tmp_path_factory):
    """A residency plan (EU origin kept in Europe) and one loopback backend per unit."""
    import yaml
    from click.testing import CliRunner

    from hetinfra.cli import cli

    tmp = tmp_path_factory.mktemp("regions")
    (tmp / "service.yaml").write_text(yaml.safe_dump(atlantic(eu_residency="continent")))
    res = CliRunner().invoke(cli, ["plan", str(tmp / "service.yaml"), "--no-verify", "--out", str(tmp / "out")])
    assert res.exit_code == 0, res.output
    plan = json.loads((tmp / "out" / "plan.json").read_text())
    region_of = {a["deployment_unit"]: a["region"] for a in plan["allocations"]}
    assert {continent_of(r) for r in region_of.values()} == {"Europe", "North America"}
    with contextlib.ExitStack() as stack:
        urls = {u: stack.enter_context(loopback_server(unit_backend(u)))[1] + "/v1" for u in region_of}
        yield tmp / "out", plan, region_of, urls, stack


def test_each_gateway_serves_its_regions_row_and_the_header_picks_another(regional, tmp_path):
    out, plan, region_of, urls, _ = regional
    endpoints = {u: [url] for u, url in urls.items()}
    with gateway(out, endpoints, EU, tmp_path / "eu.csv") as eu_gw, gateway(out, endpoints, US, tmp_path / "us.csv") as us_gw:
        local_eu = ask(eu_gw, 12)
        eu_via_us = ask(us_gw, 12, origin=EU)
        local_us = ask(us_gw, 12)
    assert all(s == 200 for s, _ in local_eu + eu_via_us + local_us)
    assert {continent_of(region_of[b]) for _, b in local_eu + eu_via_us} == {"Europe"}
    us_row = {e["deployment_unit"] for e in plan["routing_by_origin"]["chat"][US]["chat"]}
    assert {b for _, b in local_us} <= us_row
    # the demand log records each request's origin: the header's, else the gateway's region
    logged = {}
    for name in ("eu.csv", "us.csv"):
        with open(tmp_path / name) as f:
            logged[name] = sorted(r["region"] for r in csv.DictReader(f))
    assert logged == {"eu.csv": [EU] * 12, "us.csv": [EU] * 12 + [US] * 12}


def test_failover_stays_inside_the_residency_area(regional, closed_port):
    out, plan, region_of, urls, _ = regional
    # Europe's units point at a closed port: EU requests may not fail over to the US
    closed = f"http://127.0.0.1:{closed_port}/v1"
    endpoints = {u: [closed if continent_of(region_of[u]) == "Europe" else url] for u, url in urls.items()}
    with gateway(out, endpoints, US) as us_gw:
        eu = ask(us_gw, 6, origin=EU)
        us = ask(us_gw, 6)
    assert all(s >= 500 and b is None for s, b in eu)
    assert all(s == 200 and continent_of(region_of[b]) == "North America" for s, b in us)


def test_a_malformed_origin_header_is_refused(regional):
    out, _, _, urls, _ = regional
    with gateway(out, {u: [url] for u, url in urls.items()}, US) as gw:
        r = httpx.post(gw + "/v1/completions", json={"model": "chat", "prompt": "x"},
                       headers={"x-hetinfra-origin": "eu west 1; drop"})
    assert r.status_code == 400 and "x-hetinfra-origin" in r.json()["error"]["message"]


@pytest.mark.parametrize("region", [US.upper(), "mars-1", "us-east-1 ", "eu"])
def test_gateway_region_must_be_one_the_plan_declares_exit_2(regional, region):
    from click.testing import CliRunner

    from hetinfra.cli import cli

    out, plan, region_of, _, _ = regional
    res = CliRunner().invoke(cli, ["gateway", str(out), "--region", region, "--port", "1"])
    assert res.exit_code == 2, res.output
    assert f"--region '{region}' is not a region {out / 'plan.json'} declares" in res.output
    declared = sorted(set(region_of.values()) | {o for per in plan["origins"].values() for o in per})
    assert ", ".join(declared) in res.output
    if region == US.upper():
        assert f"region names are lowercase: did you mean '{US}'?" in res.output


def test_an_undeclared_origin_header_is_pooled_as_the_gateways_region_and_logged_other(regional, tmp_path):
    """Property over header spellings: a declared origin in any case is that origin; any other region
    name is routed as the gateway's region and logged as 'other'; replan pools 'other' without failing."""
    out, plan, region_of, urls, _ = regional
    endpoints = {u: [url] for u, url in urls.items()}
    us_row = {e["deployment_unit"] for e in plan["routing_by_origin"]["chat"][US]["chat"]}
    with gateway(out, endpoints, US, tmp_path / "us.csv") as us_gw:
        pooled = ask(us_gw, 6, origin="mars-1") + ask(us_gw, 3, origin="ap-south-1")
        cased = ask(us_gw, 4, origin=EU.upper())
    assert all(s == 200 for s, _ in pooled + cased)
    assert {b for _, b in pooled} <= us_row  # routed as the gateway's own region
    assert {continent_of(region_of[b]) for _, b in cased} == {"Europe"}
    with open(tmp_path / "us.csv") as f:
        logged = sorted(r["region"] for r in csv.DictReader(f))
    assert logged == sorted([EU] * 4 + ["other"] * 9)
