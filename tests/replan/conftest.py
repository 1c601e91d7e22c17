"""A tiny deployable service (one model, AWS offers from a CSV) whose prices the tests move."""

from __future__ import annotations


import pytest
import yaml

from tests.conftest import QuietHandler, loopback_server, write_offers, write_profiles
from tests.deploy.conftest import cloud_env, fake_cloud, fake_pulumi  # noqa: F401  (fixtures)

G5 = {"cloud": "aws", "region": "us-east-1", "instance_type": "g5.xlarge", "gpu": "A10G", "gpu_count": 1,
      "gpu_memory_gb": 24, "vcpus": 4, "memory_gb": 16}
G6 = {"cloud": "aws", "region": "us-east-1", "instance_type": "g6.xlarge", "gpu": "L4", "gpu_count": 1,
      "gpu_memory_gb": 24, "vcpus": 4, "memory_gb": 16}


def toy_spec(tmp_path, **sections):
    """The toy service's spec (8 req/s that one A10G, L4 or A10 serves), ``sections`` replacing its
    top-level sections (e.g. infrastructure, deploy); returns its path."""
    rows = [{"model": "toy", "gpu": g, "tp": 1, "pp": 1, "input_tokens": 500, "output_tokens": 200,
             "ttft_slo_ms": 2000, "tpot_slo_ms": 100, "max_rps": 10} for g in ("A10G", "L4", "A10")]
    write_profiles(tmp_path / "profiles.csv", rows)
    spec = {"name": "toy", "models": [{
        "name": "toy", "architecture": {"layers": 32, "hidden_size": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128,
                                        "params": "8B", "max_context": 8192},
        "source": "org/toy", "slo": {"ttft_ms": 2000, "tpot_ms": 100},
        "demand": {"rate_rps": 8, "sizes": {"classes": [{"name": "c", "input_tokens": 500, "output_tokens": 200,
                                                          "share": 1}]}}}],
        "infrastructure": {"clouds": ["aws"]}, "planning": {"mip_gap": 0, "verify": {"enabled": False}}, "profiles": ["profiles.csv"]}
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(dict(spec, **sections)))
    return path


@pytest.fixture
def service(tmp_path):
    """(spec path, offers writer): 8 req/s that one g5.xlarge or one g6.xlarge serves."""
    path = toy_spec(tmp_path)

    def offers(name: str, g5: float | None, g6: float | None):
        rows = [dict(G5, price_per_hour=g5)] if g5 is not None else []
        rows += [dict(G6, price_per_hour=g6)] if g6 is not None else []
        p = tmp_path / f"{name}.csv"
        write_offers(p, rows)
        return p

    return path, offers


@pytest.fixture
def healthy_server():
    """A loopback server that answers 200 on every */health (the new endpoints are 'up')."""
    hits: list[str] = []

    class Handler(QuietHandler):
        def do_GET(self):  # noqa: N802
            hits.append(self.path)
            self.send_response(200 if self.path.endswith("/health") else 404)
            self.end_headers()

    with loopback_server(Handler) as (_, url):
        yield url, hits
