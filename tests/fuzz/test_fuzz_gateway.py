"""Gateway requests and backend answers, in-process (the real app through httpx's ASGI transport, a
real backend on loopback): odd client fields and odd backend answers (usage counts of any type,
streams cut short, garbage lines) never give a 500; a stream ends with [DONE] or an error event;
the gateway keeps serving good requests; its demand log stays readable by `replan`."""

from __future__ import annotations

import asyncio
import json
import threading

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hetinfra.replan.demand_log import read_demand_log
from tests.conftest import QuietHandler, loopback_server
from tests.fuzz.conftest import budget
from tests.gateway.conftest import MODEL, UNITS, write_out

#: what the backend answers next (set by the test before each request)
ANSWER: dict = {"usage": 5, "stream_cut": False, "status": 200, "garbage": False}
LOCK = threading.Lock()


class Backend(QuietHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):  # noqa: N802 - /health
        self._send(200, b"ok", "text/plain")

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        with LOCK:
            a = dict(ANSWER)
        if not body.get("stream"):
            doc = {"choices": [{"index": 0, "text": "t"}], "usage": {"completion_tokens": a["usage"]}}
            self._send(a["status"], json.dumps(doc).encode(), "application/json")
            return
        events = [b"data: " + json.dumps({"choices": [{"text": "t"}]}).encode() + b"\n\n"] * 2
        if a["garbage"]:
            events.append(b"data: {not json\n\n")
        events.append(b"data: " + json.dumps({"choices": [], "usage": {"completion_tokens": a["usage"]}}).encode()
                      + b"\n\n")
        if not a["stream_cut"]:
            events.append(b"data: [DONE]\n\n")
        self._send(a["status"], b"".join(events), "text/event-stream")

    def _send(self, status: int, data: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    from hetinfra.gateway.server import GatewayConfig, create_app

    out = write_out(tmp_path_factory.mktemp("gwfuzz") / "out")
    with loopback_server(Backend) as (_, base):
        config = GatewayConfig(source=str(out), endpoints={u: [base + "/v1"] for u in UNITS.values()},
                               demand_log=str(out / "gateway" / "demand.csv"), health_interval_s=30,
                               reload_interval_s=0, read_timeout_s=5, connect_timeout_s=2)
        app = create_app(config)
        gw = app.state.gateway
        loop = asyncio.new_event_loop()
        loop.run_until_complete(gw.start())
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw")
        yield loop, client, gw
        loop.run_until_complete(client.aclose())
        loop.run_until_complete(gw.stop())
        loop.close()


def _post(gateway, body) -> httpx.Response:
    loop, client, _ = gateway
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return loop.run_until_complete(client.post("/v1/completions", content=content,
                                               headers={"content-type": "application/json"}))


ODD = st.one_of(st.none(), st.booleans(), st.integers(-(10 ** 30), 10 ** 30), st.floats(allow_nan=False),
                st.text(max_size=8), st.just([1]), st.just({"a": 1}), st.sampled_from([10 ** 30, -1, 0, 1e308]))
USAGE = st.one_of(ODD, st.just(float("1e400")))  # a backend may write 1e400, which json reads as inf


def _good(gateway) -> None:
    r = _post(gateway, {"model": MODEL, "prompt": "hi", "max_tokens": 10})
    assert r.status_code == 200, r.text


@budget(60)
@given(usage=USAGE, cut=st.booleans(), garbage=st.booleans(), stream=st.booleans(),
       max_tokens=st.one_of(st.just(10), ODD), prompt=st.one_of(st.just("hi"), ODD))
def test_odd_clients_and_backends_never_break_the_gateway(gateway, usage, cut, garbage, stream, max_tokens, prompt):
    with LOCK:
        ANSWER.update(usage=usage, stream_cut=cut, garbage=garbage, status=200)
    body = {"model": MODEL, "prompt": prompt, "max_tokens": max_tokens, "stream": stream}
    try:
        payload = json.dumps(body, allow_nan=False).encode()
    except ValueError:
        payload = json.dumps(body).encode()  # NaN/Infinity tokens: the gateway must refuse them cleanly
    r = _post(gateway, payload)
    assert r.status_code != 500 and r.status_code < 600, r.text
    if stream and r.status_code == 200:
        assert r.text.rstrip().endswith("data: [DONE]") or "event: error" in r.text, r.text
    with LOCK:
        ANSWER.update(usage=5, stream_cut=False, garbage=False)
    _good(gateway)


def test_the_demand_log_stays_readable_after_the_fuzz(gateway):
    _, _, gw = gateway
    for max_tokens in (10 ** 30, 10_000_000, 1):
        _post(gateway, {"model": MODEL, "prompt": "x", "max_tokens": max_tokens})
    gw.demand.flush()
    log = read_demand_log(gw.demand.path)  # raises (test fails) on a row replan could not read
    assert (log.output_tokens <= 10_000_000).all()


@budget(30)
@given(depth=st.one_of(st.integers(1, 80), st.sampled_from([65, 1_000, 100_000])),
       where=st.sampled_from(["prompt", "top", "extra"]), opener=st.sampled_from(["[", '{"a":']))
def test_a_deeply_nested_body_is_a_400_naming_the_bound_never_a_500(gateway, depth, where, opener):
    from hetinfra.fileio import MAX_JSON_DEPTH

    closer = "]" if opener == "[" else "}"
    nest = opener * depth + "1" + closer * depth
    head = {"top": "", "prompt": '{"model": "%s", "prompt": ' % MODEL, "extra": '{"model": "%s", "x": ' % MODEL}[where]
    raw = (nest if where == "top" else head + nest + ', "max_tokens": 5}').encode()
    r = _post(gateway, raw)
    assert r.status_code != 500, r.text
    total = depth + (0 if where == "top" else 1)
    if total > MAX_JSON_DEPTH:
        assert r.status_code == 400 and f"nested deeper than {MAX_JSON_DEPTH} levels" in r.text, r.text
    _good(gateway)
