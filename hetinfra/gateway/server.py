"""The gateway: an OpenAI-compatible HTTP front (starlette under uvicorn) that routes each request by
its class to the plan's units, over aiohttp's client to the vLLM backends.

Routes: ``POST /v1/completions``, ``POST /v1/chat/completions`` (streaming SSE and not),
``GET /v1/models``, ``GET /health`` (200 while some backend is healthy, else 503), ``GET /metrics``
(Prometheus), ``GET /admin/demand.csv`` (the demand log, with its rotations; client key required).

Per request, the steps of :mod:`hetinfra.gateway.steps`: client key check (route middleware: 401)
-> parse: body read up to ``max_body_bytes`` (413), a JSON object (400), a known origin (400) and
``model`` (404) -> classify: prompt tokens and max_tokens (400) to a class -> pick a backend (weights
among units, least outstanding among replicas) -> forward with the backend key (``VLLM_API_KEY``,
never sent back) -> on a connect error, a timeout or a 5xx *before the first byte reaches the
client*, eject (connect error) and retry on another backend, at most ``retries`` times -> relay. A
stream that breaks after its first byte ends with an SSE ``error`` event and is counted
(``hetinfra_gateway_stream_errors_total``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from hetinfra.errors import InvalidInputError
from hetinfra.facts import GATEWAY_PORT
from hetinfra.gateway.balancer import Backend, Balancer
from hetinfra.gateway.classify import TokenCounter
from hetinfra.gateway.demand import DemandLog, read_all
from hetinfra.gateway.metrics import Metrics
from hetinfra.gateway.origins import current_origin
from hetinfra.gateway.prefill import split_endpoints
from hetinfra.gateway.steps import Authenticate, Call, Refused, classify, error, forward, parse
from hetinfra.gateway.table import RoutingTable, load_table

log = logging.getLogger("hetinfra.gateway")


@dataclass
class GatewayConfig:
    source: str  # PLAN_OR_OUT_DIR
    endpoints: dict[str, list[str]] = field(default_factory=dict)  # --endpoint overrides
    client_keys: dict[str, str] = field(default_factory=dict)  # key -> client name; {} = no client auth
    backend_key: str | None = None  # VLLM_API_KEY
    max_body_bytes: int = 4 << 20
    retries: int = 2
    connect_timeout_s: float = 3.0
    read_timeout_s: float = 600.0  # per read from a backend (first byte included)
    health_interval_s: float = 5.0
    health_timeout_s: float = 2.0
    fall: int = 2  # consecutive failed checks to eject
    rise: int = 2  # consecutive good checks to re-admit
    reload_interval_s: float = 2.0  # poll the sources' mtimes, sizes and inodes; 0 = SIGHUP only
    demand_log: str | None = None
    demand_log_max_bytes: int = 64 << 20
    demand_log_keep: int = 5
    region: str = ""
    tokenizers: dict[str, str] = field(default_factory=dict)
    max_connections: int = 512  # per backend


class Gateway:
    """State shared by the handlers: the routing table, balancer, HTTP client, metrics, demand log."""

    def __init__(self, config: GatewayConfig):
        self.config = config
        self.metrics = Metrics()
        self.counter = TokenCounter(config.tokenizers)
        # a bundle's prefill engines (--endpoint UNIT/prefill=URL) are not routed to: gateway.prefill
        endpoints, self.prefill = split_endpoints(config.endpoints)
        self.table: RoutingTable = load_table(config.source, endpoints, config.region)
        _check_tokenized(config.tokenizers, self.table)
        self.balancer = Balancer(self.table)
        self.demand = DemandLog(config.demand_log, region=config.region, max_bytes=config.demand_log_max_bytes,
                                keep=config.demand_log_keep) if config.demand_log else None
        self.session: aiohttp.ClientSession | None = None  # one keep-alive pool per backend host
        self._tasks: list[asyncio.Task] = []
        self._reload_now: asyncio.Event | None = None
        self._marks = self._source_marks()
        self._publish_weights()

    # ---- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        self.session = self._new_session()
        self._reload_now = asyncio.Event()
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGHUP, self._reload_now.set)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread (tests), or no SIGHUP
            pass
        self._tasks = [asyncio.create_task(self._health_loop()), asyncio.create_task(self._reload_loop())]
        if self.demand is not None:
            self._tasks.append(asyncio.create_task(self._flush_loop()))
        for w in self.table.warnings:
            log.warning(w)

    def _new_session(self) -> aiohttp.ClientSession:
        """HTTP/1.1 keep-alive pools (``max_connections`` per backend host, idle ones kept 60 s);
        ``connect`` covers waiting for a pooled connection and opening one, ``sock_read`` every read."""
        c = self.config
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=c.max_connections, keepalive_timeout=60,
                                         ttl_dns_cache=60)
        return aiohttp.ClientSession(
            connector=connector, trust_env=False, skip_auto_headers=("User-Agent",),
            timeout=aiohttp.ClientTimeout(total=None, connect=c.connect_timeout_s, sock_read=c.read_timeout_s))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass
        if self.session is not None:
            await self.session.close()
        if self.demand is not None:
            self.demand.close()

    # ---- reloads -----------------------------------------------------------------------------------------

    def _source_marks(self) -> dict[str, tuple[int, int, int] | None]:
        """Each source's (mtime, size, inode): a file rewritten within one tick of the file system's clock
        (a `cp` over plan.json the gateway read half-way, its rest landing in the same tick) or replaced by a
        copy that keeps its time (`cp -p`, `rsync -t`) keeps its mtime, which alone was compared: the old
        table was served until the next change or a SIGHUP."""
        out = {}
        paths = list(self.table.sources)
        src = Path(self.config.source)
        if src.is_dir():  # files that may appear later
            paths += [str(src / "plan.json"), str(src / "router" / "weights.json"), str(src / "state.json")]
        for p in set(paths):
            try:
                st = os.stat(p)
                out[p] = (st.st_mtime_ns, st.st_size, st.st_ino)
            except OSError:
                out[p] = None
        return out

    def reload(self) -> bool:
        """Re-read the sources and swap the table in; in-flight requests keep their backend.
        A bad file keeps the old table (logged, counted)."""
        try:
            table = load_table(self.config.source, split_endpoints(self.config.endpoints)[0], self.config.region)
        except Exception as exc:  # noqa: BLE001 - a broken file must never take the gateway down
            log.error("reload failed, keeping the current routing table: %s", exc)
            self.metrics.reloads.labels("error").inc()
            return False
        self.balancer = Balancer(table, previous=self.balancer)
        self.table = table
        self._publish_weights()
        self.metrics.reloads.labels("ok").inc()
        log.info("routing table reloaded from %s", ", ".join(table.sources))
        return True

    async def _reload_loop(self) -> None:
        interval = self.config.reload_interval_s
        while True:
            try:
                if interval > 0:
                    await asyncio.wait_for(self._reload_now.wait(), timeout=interval)
                else:
                    await self._reload_now.wait()
            except asyncio.TimeoutError:
                pass
            signalled = self._reload_now.is_set()
            self._reload_now.clear()
            marks = self._source_marks()
            if signalled or marks != self._marks:
                self._marks = marks
                self.reload()

    def _publish_weights(self) -> None:
        self.metrics.weight.clear()
        for m in self.table.models.values():
            for c in m.classes:
                for u, w in c.weights:
                    self.metrics.weight.labels(m.name, c.name, u).set(w)

    # ---- health ------------------------------------------------------------------------------------------

    async def check(self, b: Backend) -> None:
        try:
            async with self.session.get(b.url + "/health", headers=self.backend_headers(),
                                        timeout=aiohttp.ClientTimeout(total=self.config.health_timeout_s)) as r:
                ok = r.status == 200
                await r.read()
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            ok = False
        if ok:
            b.fails = 0
            if not b.healthy:
                b.oks += 1
                if b.oks >= self.config.rise:
                    b.admit()
                    log.warning("backend %s (%s) re-admitted", b.url, b.unit)
        else:
            b.oks = 0
            b.fails += 1
            if b.healthy and b.fails >= self.config.fall:
                b.eject()
                log.warning("backend %s (%s) ejected: health check failed %d times", b.url, b.unit, b.fails)

    async def _health_loop(self) -> None:
        while True:
            backends = self.balancer.all_backends()
            await asyncio.gather(*(self.check(b) for b in backends), return_exceptions=True)
            for b in backends:
                self.metrics.up.labels(b.unit, b.url).set(1 if b.healthy else 0)
            await asyncio.sleep(self.config.health_interval_s)

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self.demand.flush()

    def backend_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.config.backend_key}"} if self.config.backend_key else {}

    # ---- requests ----------------------------------------------------------------------------------------

    async def completions(self, request: Request) -> Response:
        return await self.proxy(request, "/v1/completions", "completion")

    async def chat(self, request: Request) -> Response:
        return await self.proxy(request, "/v1/chat/completions", "chat")

    async def proxy(self, request: Request, path: str, kind: str) -> Response:
        """A completion or chat request through the steps (the key was checked by the route's middleware)."""
        call = Call(path, kind)
        try:
            await parse(self, request, call)
            classify(self, call)
        except Refused as refused:
            self.metrics.rejected.labels(refused.reason).inc()
            return refused.response
        return await forward(self, call, request.headers.get("x-request-id"))

    def account(self, call: Call, unit: str, status: int, out_tokens: int | None, t_first: float | None) -> None:
        """Metrics and the demand log of one answered call (``unit`` "-" when no backend answered)."""
        try:
            self._count(call.model, call.cname, unit, status, call.n_in, call.budget, out_tokens, call.t0, t_first)
        except Exception:  # metrics and the demand log never turn a served answer into an error
            log.exception("accounting of a %s request failed", call.model)

    def _count(self, model: str, cname: str, unit: str, status: int, n_in: int, budget: int,
               out_tokens: int | None, t0: float, t_first: float | None) -> None:
        c = self.metrics.children(model, cname, unit, status)
        c.requests.inc()
        c.input_tokens.inc(n_in)
        c.output_budget.inc(budget)
        c.input_hist.observe(n_in)
        if out_tokens:
            c.output_tokens.inc(out_tokens)
        c.latency.observe(time.perf_counter() - t0)
        if t_first is not None:
            c.ttfb.observe(t_first - t0)
        if self.demand is not None:
            self.demand.record(model, n_in, budget, cname, out_tokens, status, region=current_origin())

    async def models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [
            {"id": n, "object": "model", "created": 0, "owned_by": self.table.service or "hetinfra"}
            for n in sorted(self.table.models)]})

    async def health(self, request: Request) -> Response:
        units = {}
        for u in self.balancer.units.values():
            units[u.name] = {"healthy": sum(b.healthy for b in u.backends), "replicas": len(u.backends),
                             "outstanding": sum(b.outstanding for b in u.backends)}
        ok = any(v["healthy"] for v in units.values())
        return JSONResponse({"status": "ok" if ok else "no healthy backend", "service": self.table.service,
                             "units": units}, status_code=200 if ok else 503)

    async def weights(self, request: Request) -> Response:
        """``GET /admin/weights``: live per-class weights and unit health (client key required)."""
        return JSONResponse({"service": self.table.service, "models": {
            m.name: {c.name: dict(c.weights) for c in m.classes} for m in self.table.models.values()},
            "units": {u.name: [{"url": b.url, "healthy": b.healthy, "outstanding": b.outstanding}
                               for b in u.backends] for u in self.balancer.units.values()}})

    async def metrics_endpoint(self, request: Request) -> Response:
        for b in self.balancer.all_backends():
            self.metrics.outstanding.labels(b.unit, b.url).set(b.outstanding)
        return Response(generate_latest(self.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    async def demand_csv(self, request: Request) -> Response:
        if self.demand is None:
            return error(404, "this gateway keeps no demand log (start it with --demand-log)", "not_found")
        self.demand.flush()
        try:  # a rotation planted as a FIFO, or one not UTF-8: an answer naming it, never a hang or a 500 trace
            text = await asyncio.to_thread(read_all, self.demand.path, self.demand.keep)
        except InvalidInputError as exc:
            return error(500, f"cannot read the demand log: {exc}", "server_error")
        return PlainTextResponse(text, media_type="text/csv")


def _check_tokenized(tokenizers: dict[str, str], table: RoutingTable) -> None:
    """--tokenizer names models the plan serves: one for another name was loaded and never used, and
    the prompts of the model meant were counted by the approximation, silently."""
    unknown = sorted(m for m in tokenizers if m not in table.models)
    if unknown:
        from hetinfra.errors import did_you_mean

        raise InvalidInputError(f"--tokenizer {unknown[0]!r}=...: the plan serves no model of that name",
                                hint=did_you_mean(unknown[0], sorted(table.models)))


def create_app(config: GatewayConfig) -> Starlette:
    """The ASGI app; its Gateway is ``app.state.gateway`` (started and stopped by the app's lifespan)."""
    from contextlib import asynccontextmanager

    gw = Gateway(config)

    @asynccontextmanager
    async def lifespan(app):
        await gw.start()
        try:
            yield
        finally:
            await gw.stop()

    # the client key, checked once per request by the protected routes' middleware; /health and
    # /metrics stay open (load balancers and Prometheus); a proxied request's refusal is counted
    proxied = [Middleware(Authenticate, gateway=gw, counted=True,
                          message="invalid or missing API key (send Authorization: Bearer <key>)")]
    keyed = [Middleware(Authenticate, gateway=gw)]
    app = Starlette(routes=[
        Route("/v1/completions", gw.completions, methods=["POST"], middleware=proxied),
        Route("/v1/chat/completions", gw.chat, methods=["POST"], middleware=proxied),
        Route("/v1/models", gw.models, methods=["GET"], middleware=keyed),
        Route("/health", gw.health, methods=["GET"]),
        Route("/metrics", gw.metrics_endpoint, methods=["GET"]),
        Route("/admin/weights", gw.weights, methods=["GET"], middleware=keyed),
        Route("/admin/demand.csv", gw.demand_csv, methods=["GET"], middleware=keyed),
    ], lifespan=lifespan)
    app.state.gateway = gw
    return app


def serve(config: GatewayConfig, host: str = "127.0.0.1", port: int = GATEWAY_PORT, *, log_level: str = "info",
          ssl_certfile: str | None = None, ssl_keyfile: str | None = None, client_timeout_s: float = 30.0,
          max_clients: int | None = None) -> None:
    """Run the gateway until SIGINT/SIGTERM (uvicorn finishes in-flight requests first). A client sends its
    request within ``client_timeout_s`` (and 16 KiB/s after), else its connection is closed; past
    ``max_clients`` connections a new one is answered 503 (hetinfra.gateway.clients)."""
    import uvicorn

    from hetinfra.gateway.clients import protocol

    app = create_app(config)
    # loop "auto": uvloop when importable; http: uvicorn's "auto" (httptools, else h11) with the client deadline.
    # proxy_headers off: the gateway is the edge; nothing it does depends on the client's address.
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False, timeout_graceful_shutdown=30,
                ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile, loop="auto",
                http=protocol(client_timeout_s, max_clients), proxy_headers=False)
