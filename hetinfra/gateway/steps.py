"""The gateway's path for one request, as steps: authenticate (route middleware, once for every
protected route) -> parse -> classify -> pick -> forward (with retries) -> relay.

Each step is a small function of the gateway (``gw``: hetinfra.gateway.server.Gateway, its config,
metrics, session and accounting) and a :class:`Call`, the request as the steps fill it in; a step
that must answer the client before routing raises :class:`Refused` with the answer and the reason it
is counted under (``hetinfra_gateway_rejected``). A new step (an adapter lookup, a prefill hop before
the decode one: hetinfra.gateway.prefill) is one more function in ``Gateway.proxy``'s sequence.

Forwarding: a connect error, a timeout or a 5xx *before the first byte reaches the client* ejects
the backend (connect errors) and retries on another one, at most ``retries`` times; after the first
byte the relay owns the stream, and a stream that breaks ends with an SSE ``error`` event.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from hetinfra.csvtext import whole_number
from hetinfra.errors import InvalidInputError
from hetinfra.fileio import parse_json
from hetinfra.gateway.balancer import Backend
from hetinfra.gateway.classify import MAX_OUTPUT_TOKENS, RequestError, one_sequence, output_budget, stream_flag
from hetinfra.gateway.origins import ORIGIN_HEADER, request_origin
from hetinfra.gateway.prefill import prefill_hop

__all__ = ["Authenticate", "Call", "Refused", "classify", "client_name", "error", "forward", "parse", "pick",
           "relay", "token_count"]

log = logging.getLogger("hetinfra.gateway")

HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
              "transfer-encoding", "upgrade", "content-length", "content-encoding", "host", "authorization",
              "server", "date"}


def error(status: int, message: str, type_: str, param: str | None = None, code: str | None = None) -> JSONResponse:
    """An OpenAI-style error body."""
    return JSONResponse({"error": {"message": message, "type": type_, "param": param, "code": code or status}},
                        status_code=status)


class Refused(Exception):
    """A step's answer to the client before any backend is tried; ``reason`` labels the count."""

    def __init__(self, reason: str, response: Response):
        super().__init__(reason)
        self.reason = reason
        self.response = response


@dataclass
class Call:
    """One proxied request as the steps fill it in."""

    path: str  # the backend path: /v1/completions or /v1/chat/completions
    kind: str  # "completion" | "chat": how the prompt's tokens are counted
    t0: float = field(default_factory=time.perf_counter)
    raw: bytes = b""  # the body, forwarded as it came
    body: dict = field(default_factory=dict)
    model: str = ""
    routes: Any = None  # the model's routes from the origin (gateway.table.ModelRoutes)
    n_in: int = 0  # prompt tokens
    budget: int = 0  # max_tokens, or the model's default
    cls: Any = None  # the request class (None: no planned class)
    cname: str = "-"
    table: Any = None  # the routing table and balancer the call goes by (one for the whole request,
    balancer: Any = None  # whatever reloads meanwhile)
    prefilled: dict = field(default_factory=dict)  # unit -> the decode body after its prefill hop (gateway.prefill)

    @property
    def stream(self) -> bool:
        return self.body.get("stream") is True  # classify refused any other value (classify.stream_flag)


# ---- authenticate ----------------------------------------------------------------------------------------

def client_name(keys: dict[str, str], headers) -> str | None:
    """The client's name, or None when the key is missing or wrong ("" when auth is off)."""
    if not keys:
        return ""
    auth = headers.get("authorization", "")
    token = auth[7:].strip() if auth[:7].lower() == "bearer " else headers.get("x-api-key", "")
    for key, name in keys.items():
        if token and hmac.compare_digest(token.encode(), key.encode()):
            return name
    return None


class Authenticate:
    """Route middleware: the client key check of every protected route, in one place. A request
    without a valid key is answered 401 (``message``; counted as rejected ``auth`` when ``counted``)
    before its handler runs; a valid one carries its client's name in ``request.state.client``."""

    def __init__(self, app, gateway, message: str = "invalid or missing API key", counted: bool = False):
        self.app = app
        self.gateway = gateway
        self.message = message
        self.counted = counted

    async def __call__(self, scope, receive, send) -> None:
        request = Request(scope)
        name = client_name(self.gateway.config.client_keys, request.headers)
        if name is None:
            if self.counted:
                self.gateway.metrics.rejected.labels("auth").inc()
            await error(401, self.message, "authentication_error", code="invalid_api_key")(scope, receive, send)
            return
        scope.setdefault("state", {})["client"] = name
        await self.app(scope, receive, send)


# ---- parse -----------------------------------------------------------------------------------------------

async def read_body(request: Request, limit: int) -> bytes | None:
    """The body, or None when it is over ``limit`` bytes (checked on Content-Length and while reading)."""
    length = whole_number(request.headers.get("content-length", ""))
    if length is not None and length > limit:
        return None
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


async def parse(gw, request: Request, call: Call) -> None:
    """The body (at most ``max_body_bytes``), a JSON object, from a known origin, naming a served model."""
    limit = gw.config.max_body_bytes
    try:
        raw = await read_body(request, limit)
    except ClientDisconnect:
        raise Refused("disconnect", Response(status_code=499)) from None
    if raw is None:
        raise Refused("too_large", error(413, f"request body over {limit} bytes", "invalid_request_error",
                                         code="request_too_large"))
    try:
        body = json_of(raw, "request body")
    except InvalidInputError as exc:  # not JSON, not UTF-8, or nested past fileio.MAX_JSON_DEPTH
        raise Refused("bad_json", error(400, exc.message, "invalid_request_error", code="invalid_json")) from None
    if not isinstance(body, dict):
        raise Refused("bad_json", error(400, "request body must be a JSON object", "invalid_request_error",
                                        code="invalid_json"))
    call.raw, call.body = raw, body
    call.table, call.balancer = gw.table, gw.balancer
    origin = request_origin(request.headers, gw.config.region, call.table.declared)  # gateway.origins: pooled if undeclared
    if origin is None:
        raise Refused("bad_origin", error(400, f"header {ORIGIN_HEADER} must be a region name",
                                          "invalid_request_error", code="invalid_origin"))
    name = body.get("model")
    routes = call.table.routes_for(name, origin) if isinstance(name, str) else None
    if routes is None:
        known = ", ".join(sorted(call.table.models))
        raise Refused("unknown_model", error(404, f"model {name!r} is not served here; known: {known}",
                                             "invalid_request_error", "model", "model_not_found"))
    call.model, call.routes = name, routes


# ---- classify and pick -----------------------------------------------------------------------------------

def classify(gw, call: Call) -> None:
    """Prompt tokens and output budget -> the request class (clipped to the largest when over all)."""
    try:
        call.n_in = gw.counter.prompt_tokens(call.model, call.kind, call.body)
        call.budget = output_budget(call.body, call.routes.default_max_tokens)
        stream_flag(call.body)
        one_sequence(call.body)
    except RequestError as exc:
        raise Refused("bad_request", error(400, str(exc), "invalid_request_error", exc.param)) from None
    call.cls, clipped = call.routes.classify(call.n_in, call.budget)
    call.cname = call.cls.name if call.cls is not None else "-"
    if clipped:
        gw.metrics.clipped.labels(call.model).inc()


def pick(call: Call, tried: set[Backend]) -> Backend | None:
    """A backend for the call's class not tried yet: weights among units, least outstanding among
    replicas (gateway.balancer), from the balancer the call started with."""
    return call.balancer.pick(call.routes, call.cls, tried)


# ---- forward (with retries) and relay --------------------------------------------------------------------

async def forward(gw, call: Call, request_id: str | None) -> Response:
    """The first answer of a backend that does not fail before its first byte, trying at most
    ``retries`` others; else 502 (failed), 503 (no backend) or 504 (timed out)."""
    headers = {"content-type": "application/json", **gw.backend_headers()}
    if request_id is not None:
        headers["x-request-id"] = request_id
    tried: set[Backend] = set()
    last_error = "no healthy backend for this model"
    for _ in range(gw.config.retries + 1):
        b = pick(call, tried)
        if b is None:
            break
        tried.add(b)
        # a prefill/decode bundle: its prefill engine first, then this decode engine (gateway.prefill)
        raw = await prefill_hop(gw, call, b.unit, headers) if gw.prefill else call.raw
        answer = await attempt(gw, call, b, headers, raw)
        if isinstance(answer, Response):
            return answer
        last_error = answer
    status = 504 if "timed out" in last_error else 502 if tried else 503
    gw.account(call, "-", status, None, None)
    return error(status, f"{last_error} (tried {len(tried)} backend(s))", "upstream_error", code="backend_unavailable")


async def attempt(gw, call: Call, b: Backend, headers: dict[str, str], raw: bytes | None = None) -> Response | str:
    """One backend's answer, or why to try another (a 5xx, a connect error: ejected, a timeout, a
    broken connection). A stream is handed to :func:`relay` once its first byte has come. ``raw``:
    the body to send (default the call's)."""
    m = gw.metrics
    b.outstanding += 1
    resp, handed_over = None, False
    try:
        resp = await gw.session.post(b.url + call.path, data=call.raw if raw is None else raw, headers=headers)
        if resp.status >= 500:
            m.retries.labels(b.unit, "5xx").inc()
            return f"backend answered {resp.status}"
        if not call.stream or resp.status != 200:
            content = await resp.read()
            t_first = time.perf_counter()
            gw.account(call, b.unit, resp.status, usage(content) if resp.status == 200 else None, t_first)
            return Response(content, status_code=resp.status, headers=client_headers(resp))
        first = await resp.content.readany()
        t_first = time.perf_counter()
        handed_over = True
        return StreamingResponse(relay(gw, call, b, resp, first, t_first), status_code=resp.status,
                                 headers=client_headers(resp))
    except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
        b.eject()
        m.up.labels(b.unit, b.url).set(0)
        log.warning("backend %s (%s) ejected: %s", b.url, b.unit, exc)
        m.retries.labels(b.unit, "connect").inc()
        return f"cannot connect to a backend ({type(exc).__name__})"
    except (aiohttp.ServerTimeoutError, asyncio.TimeoutError) as exc:
        m.retries.labels(b.unit, "timeout").inc()
        return f"backend timed out ({type(exc).__name__})"
    except (aiohttp.ClientError, OSError) as exc:  # disconnected, bad HTTP, payload or socket errors
        m.retries.labels(b.unit, "protocol").inc()
        return f"backend connection failed ({type(exc).__name__})"
    finally:
        if not handed_over:
            b.outstanding -= 1
            if resp is not None:
                resp.release()


async def relay(gw, call: Call, b: Backend, resp: aiohttp.ClientResponse, first: bytes, t_first: float):
    """The backend's stream to the client, as it comes; a stream cut short (no [DONE], or a broken
    connection) ends with an SSE error event and is accounted as a 502."""
    events, found_usage, status = 0, None, resp.status
    tail = b""  # the stream's last bytes: did it end with [DONE]?
    try:
        chunk = first
        while chunk:
            events += chunk.count(b"data:") - chunk.count(b"[DONE]")
            if b'"usage"' in chunk:
                found_usage = stream_usage(chunk) or found_usage
            tail = (tail + chunk)[-64:]
            yield chunk
            chunk = await resp.content.readany()
        if "event-stream" in resp.headers.get("content-type", "") and b"[DONE]" not in tail:
            status = 502  # the backend closed cleanly but cut the stream short
            yield stream_error(gw, b, "the backend ended the stream without [DONE]")
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
        status = 502
        yield stream_error(gw, b, f"the backend connection broke mid-stream ({type(exc).__name__})")
    finally:
        b.outstanding -= 1
        resp.release()
        gw.account(call, b.unit, status, found_usage if found_usage is not None else events, t_first)


def stream_error(gw, b: Backend, why: str) -> bytes:
    """The SSE error event that ends a stream the backend cut short, so a client never waits for a
    [DONE] that will not come nor takes a partial answer for a whole one."""
    gw.metrics.stream_errors.labels(b.unit).inc()
    log.warning("stream from %s (%s): %s", b.url, b.unit, why)
    err = {"error": {"message": f"{why}; the response is incomplete", "type": "upstream_error", "code": 502}}
    return f"event: error\ndata: {json.dumps(err)}\n\n".encode()


def client_headers(resp: aiohttp.ClientResponse) -> dict[str, str]:
    return {k: v for k, v in resp.headers.items() if k.lower() not in HOP_BY_HOP}


def token_count(value: object) -> int | None:
    """A backend's usage count as a whole number 0..MAX_OUTPUT_TOKENS, or None for anything else (a
    string, a float, a negative, 1e300, a bool): a backend's odd answer never breaks the response."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if value != value or not 0 <= value <= MAX_OUTPUT_TOKENS or value != int(value):
        return None
    return int(value)


def _usage_of(doc: object) -> int | None:
    found = doc.get("usage") if isinstance(doc, dict) else None
    return token_count(found.get("completion_tokens")) if isinstance(found, dict) else None


def json_of(raw: bytes, where: str, *, allow_nan: bool = False):
    """The JSON value of ``raw`` through fileio's one bounded reader (nested at most MAX_JSON_DEPTH
    levels, so a body of 100,000 '[' is an InvalidInputError, not a RecursionError and a 500)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{where} is not UTF-8 text (byte {exc.start})") from None
    return parse_json(text, where, allow_nan=allow_nan)


def usage(content: bytes) -> int | None:
    """The completion tokens a whole JSON answer reports (None: none, or not JSON we read)."""
    try:
        return _usage_of(json_of(content, "backend answer", allow_nan=True))
    except InvalidInputError:
        return None


def stream_usage(chunk: bytes) -> int | None:
    """The completion tokens a stream's usage event in ``chunk`` reports."""
    for line in chunk.split(b"\n"):
        if line.startswith(b"data:") and b'"usage"' in line:
            try:
                found = _usage_of(json_of(line[5:], "backend event", allow_nan=True))
            except InvalidInputError:
                continue
            if found is not None:
                return found
    return None
