"""The gateway fixture talks to the gateway it started, never to a process that took its port first."""

from __future__ import annotations

import httpx

from tests.gateway import conftest
from tests.gateway.conftest import UNITS, listening_pid_owns, write_out


def test_a_port_taken_before_the_gateway_binds_it_is_tried_anew(procs, tmp_path, monkeypatch):
    impostor, impostor_url = procs.backend("u9")  # a stand-in answers /health 200 too
    taken = int(impostor_url.rsplit(":", 1)[1].split("/")[0])
    ports = iter([taken])
    monkeypatch.setattr(conftest, "free_port", lambda: next(ports, None) or conftest.socket_free_port())
    p, gw = procs.gateway(write_out(tmp_path), [f"{UNITS['u1']}={impostor_url}"])
    assert not gw.endswith(f":{taken}")
    assert listening_pid_owns(p.pid, int(gw.rsplit(":", 1)[1])) and not listening_pid_owns(p.pid, taken)
    assert "units" in httpx.get(gw + "/health", timeout=10).json()  # the gateway's health, not the stand-in's
