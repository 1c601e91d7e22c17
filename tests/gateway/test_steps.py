"""The gateway's request path as steps (hetinfra.gateway.steps): the client key is checked once, by the
protected routes' middleware, and a request goes parse -> classify -> pick -> forward -> relay, each a
small function (in-process: the ASGI app under httpx, no backend needed for the refusals)."""

from __future__ import annotations

import ast
import asyncio
import inspect

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetinfra.gateway import steps
from hetinfra.gateway.server import GatewayConfig, create_app
from tests.gateway.conftest import CLIENT_KEY, MODEL, auth, write_out

PROTECTED = {"/v1/completions", "/v1/chat/completions", "/v1/models", "/admin/weights", "/admin/demand.csv"}


@pytest.fixture
def app(tmp_path):
    return create_app(GatewayConfig(str(write_out(tmp_path / "out")), client_keys={CLIENT_KEY: "tests"},
                                    health_interval_s=3600, reload_interval_s=0))


def call(app, method: str, path: str, **kw) -> httpx.Response:
    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as client:
            return await client.request(method, path, **kw)

    return asyncio.run(go())


def test_every_protected_route_and_only_those_checks_the_key_in_its_middleware(app):
    guarded = {route.path for route in app.routes if "Authenticate" in repr(route.app)}
    assert guarded == PROTECTED
    for path in sorted(PROTECTED):
        method = "POST" if path.startswith("/v1/c") else "GET"
        r = call(app, method, path, json={"model": MODEL, "prompt": "hi"})
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key", path
    assert call(app, "GET", "/v1/completions").status_code == 405  # the route's methods first, as before
    gw = app.state.gateway
    assert gw.metrics.rejected.labels("auth")._value.get() == 2  # the two proxied routes count refusals


def test_the_key_check_is_written_once():
    """No handler checks the key itself: only the middleware calls client_name."""
    import hetinfra.gateway.server as server

    callers = [node for node in ast.walk(ast.parse(inspect.getsource(server)))
               if isinstance(node, ast.Call) and "client_name" in ast.unparse(node.func)]
    assert callers == []


@pytest.mark.parametrize("body, status, reason", [
    (b"{not json", 400, "bad_json"),
    (b"[1]", 400, "bad_json"),
    (b'{"model": "nope", "prompt": "hi"}', 404, "unknown_model"),
    (b'{"model": "' + MODEL.encode() + b'", "prompt": "hi", "max_tokens": -1}', 400, "bad_request"),
])
def test_a_refusing_step_answers_and_is_counted_under_its_reason(app, body, status, reason):
    r = call(app, "POST", "/v1/completions", content=body, headers={**auth(), "content-type": "application/json"})
    assert r.status_code == status
    assert app.state.gateway.metrics.rejected.labels(reason)._value.get() == 1


def test_each_step_is_a_small_function():
    for name in ("parse", "classify", "pick", "forward", "attempt", "relay"):
        lines = inspect.getsource(getattr(steps, name)).count("\n")
        assert lines <= 50, f"{name}: {lines} lines"


#: any JSON value: what a client may send as ``stream``
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False, allow_infinity=False)
                           | st.sampled_from(["false", "0", "true", "no", ""]),
                           lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
                           max_leaves=4)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=JSON_VALUES, chat=st.booleans())
def test_property_stream_is_true_false_or_absent(app, value, chat):
    """``stream`` is read as vLLM reads a boolean only where it is one: any other value (``"false"``, ``0``, a list)
    is a 400 naming it, counted as a bad request. Read by its truth, ``"stream": "false"`` was a stream to the
    gateway and not to vLLM: its JSON answer went through the stream relay, counted as 0 output tokens."""
    from hetinfra.gateway.classify import RequestError, stream_flag

    body = {"model": MODEL, "stream": value, "max_tokens": 5,
            **({"messages": [{"role": "user", "content": "hi"}]} if chat else {"prompt": "hi"})}
    if value is None or isinstance(value, bool):
        assert stream_flag(body) is bool(value)
        return
    with pytest.raises(RequestError, match="'stream' must be true or false"):
        stream_flag(body)
    before = app.state.gateway.metrics.rejected.labels("bad_request")._value.get()
    r = call(app, "POST", "/v1/chat/completions" if chat else "/v1/completions", json=body, headers=auth())
    assert r.status_code == 400 and r.json()["error"]["param"] == "stream"
    assert app.state.gateway.metrics.rejected.labels("bad_request")._value.get() == before + 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(["n", "best_of"]), value=JSON_VALUES | st.integers(-3, 64), chat=st.booleans())
def test_property_a_request_asks_for_one_sequence(app, key, value, chat):
    """``n`` and ``best_of`` are absent, null or 1: any other value is a 400 naming the field. ``"n": 8`` made vLLM
    decode 8 sequences for a request the gateway counted and logged as one, so a re-plan from the demand log sized
    the fleet for an eighth of that decode work."""
    from hetinfra.gateway.classify import RequestError, one_sequence

    body = {"model": MODEL, key: value, "max_tokens": 5,
            **({"messages": [{"role": "user", "content": "hi"}]} if chat else {"prompt": "hi"})}
    if value is None or (not isinstance(value, bool) and isinstance(value, (int, float)) and value == 1):
        one_sequence(body)  # 1.0 is 1, as vLLM reads it
        return
    with pytest.raises(RequestError, match=rf"'{key}' must be 1"):
        one_sequence(body)
    r = call(app, "POST", "/v1/chat/completions" if chat else "/v1/completions", json=body, headers=auth())
    assert r.status_code == 400 and r.json()["error"]["param"] == key


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prompt=st.one_of(st.text(max_size=8), st.lists(st.integers(0, 50_000), max_size=6),
                        st.lists(st.text(max_size=8) | st.lists(st.integers(0, 50_000), min_size=1, max_size=4),
                                 max_size=5)))
def test_property_a_completions_request_carries_one_prompt(app, prompt):
    """/v1/completions' ``prompt`` is one text or one list of token ids, or a batch of one: a batch of several
    prompts is a 400 naming ``prompt``. 8 prompts in one request came back as 8 choices, which the gateway
    had routed, counted and logged as one request (as ``"n": 8`` did)."""
    from hetinfra.gateway.classify import RequestError, one_sequence

    body = {"model": MODEL, "prompt": prompt, "max_tokens": 5}
    batch = isinstance(prompt, list) and len(prompt) > 1 and not all(isinstance(x, int) for x in prompt)
    if not batch:
        one_sequence(body)
        return
    with pytest.raises(RequestError, match="'prompt' must be one prompt"):
        one_sequence(body)
    r = call(app, "POST", "/v1/completions", json=body, headers=auth())
    assert r.status_code == 400 and r.json()["error"]["param"] == "prompt"
