"""The real gateway in front of real stand-in backends, all on 127.0.0.1 (bounded loops, processes
killed by the fixtures)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections import Counter, deque

import httpx
import pytest

from hetinfra.replan.demand_log import read_demand_log
from tests.gateway.conftest import (BACKEND_KEY, CLASSES, CLIENT_KEY, CLIENT_TLS, MODEL, UNITS, auth, make_plan,
                                    max_tokens_for, prompt_for, write_out)


async def fire(url: str, jobs: list[dict], *, concurrency: int = 24, path: str = "/v1/completions",
               headers: dict | None = None, during=None, deadline_s: float = 60.0) -> list[tuple[int, dict]]:
    """POST every job (bounded count, bounded time); ``during(i)`` runs after the i-th answer."""
    results: list = [None] * len(jobs)
    queue = deque(enumerate(jobs))  # in order: answer i was sent after answers < i - concurrency
    stop = time.monotonic() + deadline_s
    done = 0

    async def worker():
        nonlocal done  # one client (one connection) per worker: httpcore scans its whole pool per request
        async with httpx.AsyncClient(base_url=url, timeout=10.0, trust_env=False, verify=CLIENT_TLS) as client:
            while queue and time.monotonic() < stop:
                i, job = queue.popleft()
                r = await client.post(path, json=job, headers=headers or auth())
                results[i] = (r.status_code, r.json())
                done += 1
                if during is not None:
                    await during(done)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    assert all(r is not None for r in results), "the request loop ran out of time"
    return results


ROUTED = 800  # requests in the routing-share test (200 a class)


def jobs_for(n: int) -> tuple[list[dict], list[str]]:
    names = list(CLASSES)
    classes = [names[k % len(names)] for k in range(n)]
    return [{"model": MODEL, "prompt": prompt_for(c), "max_tokens": max_tokens_for(c)} for c in classes], classes


def flushed_log(path, rows: int, timeout_s: float = 30.0):
    """``path`` once the gateway has flushed ``rows`` rows (whole lines) to it: it flushes every second."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if text.endswith("\n") and text.count("\n") > rows:  # the header and the rows
            return path
        time.sleep(0.05)
    raise AssertionError(f"{path}: {rows} rows not flushed within {timeout_s} s")


def unit_of(backend: str) -> str:
    return backend.rstrip("ab")  # u3a, u3b are the two replicas of u3


@pytest.fixture(scope="module")
def fleet(module_procs, tmp_path_factory):
    """Four backends (u3 has two replicas) and a gateway over them, shared by the module's tests."""
    out = write_out(tmp_path_factory.mktemp("out"))
    urls = {n: module_procs.backend(n)[1] for n in ("u1", "u2", "u3a", "u3b")}
    eps = [f"{UNITS[unit_of(n)]}={u}" for n, u in urls.items()]
    _, gw = module_procs.gateway(out, eps, "--max-body-kb", "64")
    return {"out": out, "gw": gw, "urls": urls}


def test_routing_shares_match_the_plan_per_class(fleet):
    # smooth weighted round-robin has no randomness: 200 requests a class hold each share to a request
    # or two (under 1%), well inside the 3% asserted, while a wrong weight (>= 0.05 off) still fails (fire's deadline bounds the run, not a timing assert)
    jobs, classes = jobs_for(ROUTED)
    results = asyncio.run(fire(fleet["gw"], jobs, concurrency=32))
    assert all(code == 200 for code, _ in results)
    seen: dict[str, Counter] = {c: Counter() for c in CLASSES}
    for cls, (_, body) in zip(classes, results):
        seen[cls][unit_of(body["backend"])] += 1
    for cls, (_, _, weights) in CLASSES.items():
        n = sum(seen[cls].values())
        for u in set(weights) | set(seen[cls]):
            assert abs(seen[cls][u] / n - weights.get(u, 0.0)) <= 0.03, (cls, u, seen[cls], weights)
    # u3's two replicas share its requests (least outstanding, rotating among ties)
    per_backend = Counter(body["backend"] for _, body in results)
    assert min(per_backend["u3a"], per_backend["u3b"]) > 0.3 * (per_backend["u3a"] + per_backend["u3b"])
    # metrics count the same requests by class
    text = httpx.get(fleet["gw"] + "/metrics").text
    total = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                if line.startswith("hetinfra_gateway_requests_total{") and 'status="200"' in line)
    assert total >= ROUTED
    assert 'hetinfra_gateway_weight{cls="in<=250,out<=100",model="chat-8b",unit="%s"} 0.5' % UNITS["u1"] in text
    # ... and the demand log is readable by replan, with the routing key as output_tokens
    log = read_demand_log(flushed_log(fleet["out"] / "gateway" / "demand.csv", ROUTED))
    assert len(log.timestamps) >= ROUTED and set(log.models.tolist()) == {MODEL}
    assert set(log.output_tokens.tolist()) == {50, 700}
    assert "xxxx" not in (fleet["out"] / "gateway" / "demand.csv").read_text()  # no request contents


def test_bad_requests_get_json_errors_and_the_backend_key_never_leaks(fleet):
    gw = fleet["gw"]
    ok = {"model": MODEL, "prompt": "hi", "max_tokens": 5}
    cases = [
        (dict(json=ok, headers=auth("wrong")), 401),
        (dict(json=ok, headers={}), 401),
        (dict(content=b"{not json", headers={**auth(), "content-type": "application/json"}), 400),
        (dict(json=[1, 2], headers=auth()), 400),
        (dict(json={**ok, "model": "nope"}, headers=auth()), 404),
        (dict(json={**ok, "max_tokens": -1}, headers=auth()), 400),
        (dict(json={**ok, "prompt": "x" * 70_000}, headers=auth()), 413),
    ]
    with httpx.Client(base_url=gw, timeout=10, trust_env=False) as c:
        for kwargs, status in cases:
            r = c.post("/v1/completions", **kwargs)
            assert r.status_code == status, (kwargs.get("json", kwargs.get("content")), r.text)
            assert set(r.json()["error"]) >= {"message", "type", "code"}
        r = c.post("/v1/chat/completions", json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]},
                   headers=auth())
        assert r.status_code == 200  # the gateway sent the backend key (stand-ins answer 401 without it)
        assert BACKEND_KEY not in r.text and BACKEND_KEY not in str(r.headers)
        models = c.get("/v1/models", headers=auth()).json()
        assert [m["id"] for m in models["data"]] == [MODEL]
        assert c.get("/v1/models").status_code == 401
        assert c.get("/health").json()["units"][UNITS["u3"]]["replicas"] == 2
        csv = c.get("/admin/demand.csv", headers=auth()).text
        assert csv.startswith("timestamp,model,input_tokens,output_tokens,region")


def test_a_slow_client_does_not_block_others(fleet):
    async def run():
        async with httpx.AsyncClient(base_url=fleet["gw"], timeout=10, trust_env=False) as slow_c:
            body = {"model": MODEL, "prompt": prompt_for("in<=2000,out<=1000"), "max_tokens": 700, "stream": True}
            async with slow_c.stream("POST", "/v1/completions", json=body, headers=auth()) as slow:
                it = slow.aiter_raw()
                await it.__anext__()  # one chunk, then stop reading while others run
                jobs, _ = jobs_for(200)
                results = await fire(fleet["gw"], jobs, concurrency=16)
                async for _ in it:  # drain
                    pass
        return results

    # all answered while the slow stream stays open and unread (a blocked gateway would run into fire's
    # deadline instead: no timing assert, which a loaded machine could break)
    results = asyncio.run(run())
    assert all(code == 200 for code, _ in results)


def test_streams_relay_tokens_and_count_them(fleet):
    body = {"model": MODEL, "prompt": "hello", "max_tokens": 4, "stream": True}
    with httpx.stream("POST", fleet["gw"] + "/v1/completions", json=body, headers=auth(), timeout=10) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = [line for line in r.iter_lines() if line.startswith("data:")]
    assert events[-1] == "data: [DONE]" and len(events) == 5


def test_killed_backend_is_ejected_retried_and_streams_to_it_end_with_an_error(procs, tmp_path, fleet):
    out = write_out(tmp_path)
    p1, u1 = procs.backend("u1", tokens=200, delay_ms=10)  # slow streams, to be killed mid-stream
    u2, u3 = fleet["urls"]["u2"], fleet["urls"]["u3a"]  # plain stand-ins: the module's
    _, gw = procs.gateway(out, [f"{UNITS['u1']}={u1}", f"{UNITS['u2']}={u2}",
                                f"{make_plan()['allocations'][2]['unit']}={u3}"])  # a plan `unit` name works too

    async def run():
        async with httpx.AsyncClient(base_url=gw, timeout=15, trust_env=False) as c:
            # class in<=2000,out<=100 goes 25% to u1: open streams until two land on u1
            streams, on_u1 = [], []
            for _ in range(12):
                body = {"model": MODEL, "prompt": prompt_for("in<=2000,out<=100"), "max_tokens": 90, "stream": True}
                s = await c.send(c.build_request("POST", "/v1/completions", json=body, headers=auth()), stream=True)
                it = s.aiter_lines()
                first = await it.__anext__()
                (on_u1 if '"u1"' in first else streams).append((s, it))
                if len(on_u1) >= 2:
                    break
            assert on_u1, "no stream landed on u1"
            p1.send_signal(signal.SIGKILL)
            p1.wait(5)
            broken = []
            for s, it in on_u1:
                text = "".join([line + "\n" async for line in it])
                broken.append(text)
                await s.aclose()
            for s, _ in streams:
                await s.aclose()
            jobs, _ = jobs_for(200)  # 50 of class in<=2000,out<=100, a quarter of which u1 would get
            results = await fire(gw, jobs, concurrency=16)
            return broken, results

    broken, results = asyncio.run(run())
    for text in broken:
        assert "event: error" in text and "mid-stream" in text and "[DONE]" not in text
    assert all(code == 200 for code, _ in results), Counter(code for code, _ in results)
    assert not any(body["backend"] == "u1" for _, body in results)
    health = httpx.get(gw + "/health").json()
    assert health["units"][UNITS["u1"]]["healthy"] == 0
    metrics = httpx.get(gw + "/metrics").text
    assert f'hetinfra_gateway_stream_errors_total{{unit="{UNITS["u1"]}"}} {float(len(broken))}' in metrics


def test_5xx_before_the_first_byte_is_retried_elsewhere(procs, tmp_path, fleet):
    out = write_out(tmp_path)
    _, u1 = procs.backend("u1", mode="500")
    u2, u3 = fleet["urls"]["u2"], fleet["urls"]["u3a"]  # plain stand-ins: the module's
    _, gw = procs.gateway(out, [f"{UNITS['u1']}={u1}", f"{UNITS['u2']}={u2}", f"{UNITS['u3']}={u3}"])
    jobs, _ = jobs_for(200)
    results = asyncio.run(fire(gw, jobs, concurrency=8))
    assert all(code == 200 for code, _ in results)
    assert "u1" not in {body["backend"] for _, body in results}
    assert 'hetinfra_gateway_retries_total{reason="5xx"' in httpx.get(gw + "/metrics").text


def test_reload_during_load_drops_nothing_and_applies_the_new_weights(procs, tmp_path, fleet):
    out = write_out(tmp_path)
    u1, u2, u3 = (fleet["urls"][n] for n in ("u1", "u2", "u3a"))  # plain stand-ins: the module's
    gp, gw = procs.gateway(out, [f"{UNITS['u1']}={u1}", f"{UNITS['u2']}={u2}", f"{UNITS['u3']}={u3}"],
                           "--reload-interval-s", "0")  # SIGHUP only
    weights_path = out / "router" / "weights.json"

    async def during(i):
        if i == 150:  # everything of class in<=250,out<=100 now goes to u2
            w = json.loads(weights_path.read_text())
            w["models"][MODEL]["classes"]["in<=250,out<=100"]["weights"] = {UNITS["u2"]: 1.0}
            weights_path.write_text(json.dumps(w))
            gp.send_signal(signal.SIGHUP)

    jobs = [{"model": MODEL, "prompt": "hi", "max_tokens": 10}] * 600
    results = asyncio.run(fire(gw, jobs, concurrency=16, during=during))
    assert all(code == 200 for code, _ in results)
    # the last 300 were sent over 100 answers after the reload (16 at a time: those in flight may be
    # routed by the old weights); under the old weights half of them would go to u1
    after = [body["backend"] for _, body in results[-300:]]
    assert set(after) == {"u2"}
    assert 'hetinfra_gateway_reloads_total{result="ok"} 1.0' in httpx.get(gw + "/metrics").text


def test_no_client_key_means_open_with_a_warning(procs, tmp_path, fleet):
    out = write_out(tmp_path)
    p, gw = procs.gateway(out, [f"{UNITS['u3']}={fleet['urls']['u3a']}"], "--no-demand-log", client_key=None)
    r = httpx.post(gw + "/v1/completions", json={"model": MODEL, "prompt": "hi", "max_tokens": 3}, timeout=10)
    assert r.status_code == 200 and r.json()["backend"] == "u3a"  # the units without endpoints are skipped
    p.send_signal(signal.SIGTERM)
    assert p.wait(10) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal after a clean shutdown
    assert "HETINFRA_API_KEY is not set" in procs.stderr_of(p)
    assert not (out / "gateway").exists()
