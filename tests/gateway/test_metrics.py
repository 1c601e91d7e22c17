"""The gateway's Prometheus series (hetinfra.gateway.metrics): one answered request's labelled series
are looked up once per label set and show in the exposition under their published names."""

from __future__ import annotations

from prometheus_client import generate_latest

from hetinfra.gateway.metrics import Metrics


def test_children_are_cached_per_label_set_and_exposed():
    m = Metrics()
    a = m.children("chat", "short", "unit-a", 200)
    assert m.children("chat", "short", "unit-a", 200) is a
    assert m.children("chat", "short", "unit-a", 502) is not a  # another status: other series
    a.requests.inc()
    a.input_tokens.inc(12)
    a.latency.observe(0.3)
    text = generate_latest(m.registry).decode()
    assert 'hetinfra_gateway_requests_total{cls="short",model="chat",status="200",unit="unit-a"} 1.0' in text
    assert 'hetinfra_gateway_input_tokens_total{cls="short",model="chat"} 12.0' in text
    assert 'hetinfra_gateway_request_seconds_bucket{cls="short",le="0.5",model="chat"} 1.0' in text
