"""The gateway's Prometheus series (``GET /metrics``): requests, refusals, tokens, latencies, retries,
broken streams, backend health and load, live routing weights and reloads, in one registry per
gateway. An answered request updates its labelled series through :meth:`Metrics.children`, looked up
once per label set."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
TOKEN_BUCKETS = (16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 131072)


class Metrics:
    def __init__(self):
        r = self.registry = CollectorRegistry()
        self.requests = Counter("hetinfra_gateway_requests", "Requests answered, by model, class, unit and status",
                                ["model", "cls", "unit", "status"], registry=r)
        self.rejected = Counter("hetinfra_gateway_rejected", "Requests refused before routing, by reason",
                                ["reason"], registry=r)
        self.input_tokens = Counter("hetinfra_gateway_input_tokens", "Prompt tokens (counted or approximated)",
                                    ["model", "cls"], registry=r)
        self.output_budget = Counter("hetinfra_gateway_output_budget_tokens", "max_tokens of routed requests",
                                     ["model", "cls"], registry=r)
        self.output_tokens = Counter("hetinfra_gateway_output_tokens", "Tokens generated (as the backends report)",
                                     ["model", "cls"], registry=r)
        self.input_hist = Histogram("hetinfra_gateway_request_input_tokens", "Prompt tokens per request",
                                    ["model"], buckets=TOKEN_BUCKETS, registry=r)
        self.latency = Histogram("hetinfra_gateway_request_seconds", "Gateway arrival to last byte",
                                 ["model", "cls"], buckets=LATENCY_BUCKETS, registry=r)
        self.ttfb = Histogram("hetinfra_gateway_first_byte_seconds", "Arrival to the backend's first byte (TTFT for streams)",
                              ["model", "cls"], buckets=LATENCY_BUCKETS, registry=r)
        self.retries = Counter("hetinfra_gateway_retries", "Attempts retried on another backend, by reason",
                               ["unit", "reason"], registry=r)
        self.stream_errors = Counter("hetinfra_gateway_stream_errors", "Streams broken after their first byte",
                                     ["unit"], registry=r)
        self.clipped = Counter("hetinfra_gateway_oversize", "Requests larger than every planned class (clipped)",
                               ["model"], registry=r)
        self.up = Gauge("hetinfra_gateway_backend_up", "1 while a backend is admitted", ["unit", "url"], registry=r)
        self.outstanding = Gauge("hetinfra_gateway_backend_outstanding", "Requests in flight per backend",
                                 ["unit", "url"], registry=r)
        self.weight = Gauge("hetinfra_gateway_weight", "Live routing weight of a unit in a class", ["model", "cls", "unit"],
                            registry=r)
        self.reloads = Counter("hetinfra_gateway_reloads", "Routing table reloads, by result", ["result"], registry=r)
        self._children: dict[tuple, _Children] = {}

    def children(self, model: str, cname: str, unit: str, status: int) -> "_Children":
        """The labelled series one answered request updates, looked up once per label set (``labels()``
        takes a lock and builds its key on every call)."""
        key = (model, cname, unit, status)
        c = self._children.get(key)
        if c is None:
            c = self._children[key] = _Children(
                self.requests.labels(model, cname, unit, str(status)), self.input_tokens.labels(model, cname),
                self.output_budget.labels(model, cname), self.input_hist.labels(model),
                self.output_tokens.labels(model, cname), self.latency.labels(model, cname),
                self.ttfb.labels(model, cname))
        return c


@dataclass(frozen=True, slots=True)
class _Children:
    requests: Counter
    input_tokens: Counter
    output_budget: Counter
    input_hist: Histogram
    output_tokens: Counter
    latency: Histogram
    ttfb: Histogram
