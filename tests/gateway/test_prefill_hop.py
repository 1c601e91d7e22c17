"""The gateway's prefill hop (hetinfra.gateway.prefill) on loopback: the real gateway in front of
stand-in prefill and decode engines (tests/gateway/pd_standin.py) of one unit."""

from __future__ import annotations

import subprocess
import sys

import httpx

from hetinfra.gateway.prefill import prefill_body
from tests.gateway.conftest import BACKEND_KEY, MODEL, REPO, UNITS, auth, write_out

UNIT = UNITS["u3"]  # the unit every class may reach


def _engine(procs, role: str, name: str) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen([sys.executable, "-m", "tests.gateway.pd_standin", "--role", role, "--name", name,
                          "--key", BACKEND_KEY], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    procs.procs.append(p)
    line = p.stdout.readline()
    assert line.startswith("PORT "), line
    return p, f"http://127.0.0.1:{int(line.split()[1])}/v1"


def _stats(url: str) -> dict:
    return httpx.get(url[:-3] + "/stats", timeout=5).json()


def test_prefill_body_is_what_vllms_proxy_sends():
    body = prefill_body({"model": "m", "prompt": "p", "max_tokens": 200, "stream": True,
                         "stream_options": {"include_usage": True}, "min_tokens": 3, "max_completion_tokens": 9})
    assert body["max_tokens"] == 1 and body["max_completion_tokens"] == 1 and body["stream"] is False
    assert "stream_options" not in body and "min_tokens" not in body
    assert body["kv_transfer_params"]["do_remote_decode"] is True


def test_two_step_hop_loses_no_request_with_a_decode_engine_killed(tmp_path, procs):
    out = write_out(tmp_path / "out")
    _, p1 = _engine(procs, "prefill", "p1")
    _, p2 = _engine(procs, "prefill", "p2")
    d1_proc, d1 = _engine(procs, "decode", "d1")
    _, d2 = _engine(procs, "decode", "d2")
    _, gw = procs.gateway(out, [f"{UNIT}={d1}", f"{UNIT}={d2}", f"{UNIT}/prefill={p1}", f"{UNIT}/prefill={p2}",
                                f"{UNITS['u1']}={d2}", f"{UNITS['u2']}={d2}"], "--no-demand-log")
    body = {"model": MODEL, "prompt": "x " * 1500, "max_tokens": 500}  # in<=2000,out<=1000: only u3 serves it
    with httpx.Client(base_url=gw, headers=auth(), timeout=10) as client:
        first = [client.post("/v1/completions", json=body) for _ in range(6)]
        d1_proc.kill()  # one decode engine dies: its requests go to the other, none is lost
        d1_proc.wait(timeout=5)
        after = [client.post("/v1/completions", json=dict(body, stream=k % 2 == 0)) for k in range(8)]
    assert all(r.status_code == 200 for r in first + after), [r.text for r in first + after if r.status_code != 200]
    assert {r.json()["prefilled_by"] for r in first} <= {"p1", "p2"}
    assert all("data:" in r.text for r in after[::2])
    s1, s2 = _stats(p1), _stats(p2)
    assert s1["bad_prefill"] == s2["bad_prefill"] == 0 and s1["requests"] + s2["requests"] == 14
    assert _stats(d2)["without_kv"] == 0 and _stats(d2)["with_kv"] >= 8
