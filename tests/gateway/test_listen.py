"""`hetinfra gateway` refuses a busy port, a host that is not this machine's and a garbage TLS
certificate with exit 2 and one clear line (uvicorn would exit 1 or raise)."""

from __future__ import annotations

import socket

import pytest

from tests.gateway.conftest import write_out


@pytest.fixture
def out(tmp_path):
    return write_out(tmp_path / "out")


def test_a_busy_port_is_exit_2(out, run_cli):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, _, err = run_cli("gateway", str(out), "--port", str(port), "--no-demand-log")
    assert code == 2 and f"port {port} on 127.0.0.1 is in use" in err and "Traceback" not in err


def test_a_host_that_is_not_ours_is_exit_2(out, run_cli):
    # TEST-NET-3: binding to it fails locally (EADDRNOTAVAIL); no packet leaves the machine
    code, _, err = run_cli("gateway", str(out), "--host", "203.0.113.77", "--port", "0", "--no-demand-log")
    assert code == 2 and "cannot listen on 203.0.113.77" in err, err


def test_a_garbage_tls_cert_is_exit_2(out, run_cli, tmp_path):
    (tmp_path / "cert.pem").write_text("not a certificate")
    (tmp_path / "key.pem").write_text("not a key")
    code, _, err = run_cli("gateway", str(out), "--tls-cert", str(tmp_path / "cert.pem"), "--tls-key",
                           str(tmp_path / "key.pem"), "--port", "0", "--no-demand-log")
    assert code == 2 and "not a PEM certificate" in err and "Traceback" not in err
