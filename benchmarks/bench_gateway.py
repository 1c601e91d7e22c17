"""Gateway overhead on loopback: latency added (p50/p99) and requests/s, direct vs through the gateway, in one run.

    python benchmarks/bench_gateway.py [--requests 3000] [--concurrency 32] [--rounds 3]

Starts one stand-in backend (tests/gateway/standin.py) and the real gateway (`python -m hetinfra.cli
gateway`) on 127.0.0.1, then drives non-streaming tiny completions with an aiohttp load generator (a
lighter client than httpx, so the client does not hide the gateway's cost): first sequentially
(latency: one request at a time) and then with ``--concurrency`` workers (throughput). Every
process is on the same machine; on 2 cores the client, gateway and backend share them. Each of
``--rounds`` rounds measures direct and gateway back to back; the last lines are the medians over rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.gateway.conftest import MODEL, UNITS, Procs, auth, write_out  # noqa: E402


async def latency(url: str, n: int) -> list[float]:
    import aiohttp

    body = {"model": MODEL, "prompt": "hi", "max_tokens": 4}
    out = []
    async with aiohttp.ClientSession() as s:
        for _ in range(50):  # warm-up
            async with s.post(url, json=body, headers=auth()) as r:
                await r.read()
        for _ in range(n):
            t = time.perf_counter()
            async with s.post(url, json=body, headers=auth()) as r:
                await r.read()
                assert r.status == 200
            out.append(time.perf_counter() - t)
    return out


async def throughput(url: str, n: int, conc: int) -> float:
    import aiohttp

    body = {"model": MODEL, "prompt": "hi", "max_tokens": 4}
    left = [n]
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=conc)) as s:
        async def worker():
            while left[0] > 0:
                left[0] -= 1
                async with s.post(url, json=body, headers=auth()) as r:
                    await r.read()
                    assert r.status == 200

        t = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(conc)))
        return n / (time.perf_counter() - t)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    procs = Procs()
    try:
        out = write_out(Path(tempfile.mkdtemp()))
        _, backend = procs.backend("u1", key=None, delay_ms=0)
        eps = [f"{dep}={backend}" for dep in UNITS.values()]  # every unit on the one backend
        _, gw = procs.gateway(out, eps, "--health-interval-s", "5", "--no-demand-log")
        direct_url, gw_url = backend + "/completions", gw + "/v1/completions"
        n_lat = min(a.requests, 2000)
        rows = []
        for k in range(a.rounds):
            d = asyncio.run(latency(direct_url, n_lat))
            g = asyncio.run(latency(gw_url, n_lat))
            d_rps = asyncio.run(throughput(direct_url, a.requests, a.concurrency))
            g_rps = asyncio.run(throughput(gw_url, a.requests, a.concurrency))
            row = {"direct_p50": pct(d, .5), "direct_p99": pct(d, .99), "gw_p50": pct(g, .5), "gw_p99": pct(g, .99),
                   "added_p50": pct(g, .5) - pct(d, .5), "added_p99": pct(g, .99) - pct(d, .99),
                   "added_mean": 1000 * (statistics.mean(g) - statistics.mean(d)), "direct_rps": d_rps, "gw_rps": g_rps}
            rows.append(row)
            print(f"round {k + 1}: added p50 {row['added_p50']:.2f} ms p99 {row['added_p99']:.2f} ms; "
                  f"direct {d_rps:.0f} req/s, gateway {g_rps:.0f} req/s", flush=True)
        med = {key: statistics.median(r[key] for r in rows) for key in rows[0]}
        print(f"medians over {a.rounds} round(s):")
        print(f"sequential latency ({n_lat} requests): direct p50 {med['direct_p50']:.2f} ms p99 {med['direct_p99']:.2f} ms; "
              f"gateway p50 {med['gw_p50']:.2f} ms p99 {med['gw_p99']:.2f} ms")
        print(f"added by the gateway: p50 {med['added_p50']:.2f} ms, p99 {med['added_p99']:.2f} ms (goal < 2 ms p50); "
              f"mean {med['added_mean']:.2f} ms")
        print(f"throughput ({a.requests} requests, concurrency {a.concurrency}): direct {med['direct_rps']:.0f} req/s, "
              f"gateway {med['gw_rps']:.0f} req/s (goal > 1000 req/s non-streaming)")
    finally:
        procs.stop()


if __name__ == "__main__":
    main()
