"""Clients that trickle their request into the gateway (round fifteen; hetinfra.gateway.clients): a
connection that sends part of a request line, of its headers or of its body slower than the
gateway's client deadline (`--client-timeout-s`, plus a second per 16 KiB sent) is closed, a 408
where no request had begun, and the gateway answers others meanwhile. uvicorn alone held such a
connection open for as long as the client kept sending a byte a second. A client that sends at
16 KiB/s or faster is never cut, however long its body takes. A request line and headers past
hetinfra.gateway.clients.MAX_HEAD_BYTES are a 431 and a closed connection."""

from __future__ import annotations

import json
import socket
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.conftest import budget
from tests.gateway.conftest import CLIENT_KEY, MODEL, UNITS, Procs, write_out

TIMEOUT_S = 1.0
#: hetinfra.gateway.clients.MAX_HEAD_BYTES (written out: the test runs against a gateway that may lack it)
MAX_HEAD_BYTES = 64 * 1024
#: how late past its deadline a trickling connection may still be open (a loaded 2-core machine)
SLACK_S = 2.5


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    ps = Procs(tmp_path_factory.mktemp("slowprocs"))
    try:
        _, backend = ps.backend("b1")
        out = write_out(tmp_path_factory.mktemp("slow") / "out")
        _, url = ps.gateway(out, [f"{u}={backend}" for u in UNITS.values()], "--client-timeout-s", str(TIMEOUT_S),
                            "--no-demand-log")
        yield int(url.rsplit(":", 1)[1])
    finally:
        ps.stop()


def _request(body: bytes) -> tuple[bytes, bytes]:
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer {CLIENT_KEY}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    return head, body


def _body(size: int) -> bytes:
    doc = {"model": MODEL, "prompt": "", "max_tokens": 4}
    doc["prompt"] = "x" * max(0, size - len(json.dumps(doc)))
    return json.dumps(doc).encode()


def _answer(sock: socket.socket, wait_s: float) -> bytes:
    sock.settimeout(wait_s)
    got = b""
    try:
        while b"\r\n\r\n" not in got:
            chunk = sock.recv(4096)
            if not chunk:
                break
            got += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    return got


def _health(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: gw\r\n\r\n")
        return _answer(s, 5)


@budget(8)
@given(where=st.sampled_from(["request line", "headers", "body"]), gap=st.floats(0.15, 0.4),
       step=st.integers(1, 3))
def test_a_client_that_trickles_is_cut_and_the_gateway_serves_others(gateway, where, gap, step):
    head, body = _request(_body(600))
    cut = {"request line": 10, "headers": len(head) - 20, "body": len(head) + 5}[where]
    data = head + body
    with socket.create_connection(("127.0.0.1", gateway), timeout=5) as s:
        s.sendall(data[:cut])
        started, at, closed = time.monotonic(), cut, False
        while time.monotonic() - started < TIMEOUT_S + SLACK_S + 1.0 and at < len(data):
            try:
                s.sendall(data[at:at + step])
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            at += step
            got = _answer(s, gap)
            if got or _eof(s):
                closed = True
                assert where == "body" or got.startswith(b"HTTP/1.1 408"), got[:80]
                break
        held = time.monotonic() - started
        assert closed, f"a client trickling its {where} ({step} bytes every {gap:.2f} s) was held {held:.1f} s"
        assert held <= TIMEOUT_S + SLACK_S, held
    assert _health(gateway).startswith(b"HTTP/1.1 200"), "the gateway stopped answering"


def _eof(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        return s.recv(1, socket.MSG_PEEK) == b""
    except (BlockingIOError, socket.timeout):
        return False
    except ConnectionResetError:
        return True
    finally:
        s.setblocking(True)


def test_a_body_sent_at_a_steady_rate_is_served_however_long_it_takes(gateway):
    """200 KiB at about 100 KiB/s: twice the deadline of 1 s, every byte ahead of its 16 KiB/s."""
    head, body = _request(_body(200 * 1024))
    with socket.create_connection(("127.0.0.1", gateway), timeout=10) as s:
        s.sendall(head)
        for at in range(0, len(body), 10 * 1024):
            s.sendall(body[at:at + 10 * 1024])
            time.sleep(0.1)
        got = _answer(s, 10)
    assert got.startswith(b"HTTP/1.1 200"), got[:200]


def test_a_kept_alive_connection_owes_each_request_anew(gateway):
    """Two requests on one connection, the second sent after the first one's deadline would be past."""
    head, body = _request(_body(100))
    with socket.create_connection(("127.0.0.1", gateway), timeout=10) as s:
        for _ in range(2):
            s.sendall(head + body)
            got = _answer(s, 10)
            assert got.startswith(b"HTTP/1.1 200"), got[:200]
            length = int(next(line.split(b":")[1] for line in got.split(b"\r\n") if line.lower().startswith(
                b"content-length")))
            rest = got.split(b"\r\n\r\n", 1)[1]
            while len(rest) < length:
                rest += s.recv(4096)
            time.sleep(TIMEOUT_S * 0.8)  # idle within uvicorn's keep-alive (5 s); the deadline restarts


@budget(4)
@given(size=st.integers(20, 400), kind=st.sampled_from(["headers", "request line"]))
def test_a_request_head_that_never_ends_is_cut_at_its_bound(gateway, size, kind):
    """Headers (or a request line) sent at full speed without end: cut at MAX_HEAD_BYTES with a 431, where
    uvicorn's httptools protocol kept them all (600 MB of headers grew the gateway by 2 GB in 5 s)."""
    filler = (b"X-%d: " + b"v" * size + b"\r\n") if kind == "headers" else b"a" * size
    start = b"GET /health HTTP/1.1\r\n" if kind == "headers" else b"GET /"
    chunk = b"".join(filler.replace(b"%d", str(i).encode()) for i in range(200))
    sent, cut = 0, False
    with socket.create_connection(("127.0.0.1", gateway), timeout=10) as s:
        s.sendall(start)
        try:
            while sent < 256 * MAX_HEAD_BYTES:  # 16 MiB; the sockets' buffers alone take a few MiB
                s.sendall(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            cut = True
        if not cut:
            got = _answer(s, 5)
            cut = got.startswith(b"HTTP/1.1 4") or _eof(s)
    assert cut, f"{sent:,} bytes of {kind} taken, and the connection still open"
    assert _health(gateway).startswith(b"HTTP/1.1 200"), "the gateway stopped answering"


def test_headers_under_the_bound_are_served(gateway):
    head, body = _request(_body(100))
    extra = b"".join(b"X-Pad-%d: %s\r\n" % (i, b"p" * 200) for i in range(150))  # 31 KiB of headers
    with socket.create_connection(("127.0.0.1", gateway), timeout=10) as s:
        s.sendall(head.replace(b"\r\n\r\n", b"\r\n" + extra + b"\r\n", 1) + body)
        got = _answer(s, 10)
    assert got.startswith(b"HTTP/1.1 200"), got[:200]


def test_clients_past_max_clients_are_refused_at_once_and_served_again_after(tmp_path_factory):
    """--max-clients 4: the fifth connection and on get a 503 and are closed at once (they never take the
    descriptors the backends need); once the idle four are cut by the deadline, the gateway serves again."""
    ps = Procs(tmp_path_factory.mktemp("maxprocs"))
    try:
        _, backend = ps.backend("b1")
        out = write_out(tmp_path_factory.mktemp("max") / "out")
        _, url = ps.gateway(out, [f"{u}={backend}" for u in UNITS.values()], "--client-timeout-s", str(TIMEOUT_S),
                            "--max-clients", "4", "--no-demand-log")
        port = int(url.rsplit(":", 1)[1])
        time.sleep(TIMEOUT_S + 1.5)  # the start's own /health connections are gone
        held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(4)]
        extra = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(4)]
        answers = [_answer(s, 2) for s in extra]
        assert all(a.startswith(b"HTTP/1.1 503") for a in answers), answers
        time.sleep(TIMEOUT_S + SLACK_S)  # the four held ones, sending nothing, are cut by the deadline
        assert all(_answer(s, 1).startswith(b"HTTP/1.1 408") for s in held), "an idle client outlived the deadline"
        assert _health(port).startswith(b"HTTP/1.1 200")
        for s in held + extra:
            s.close()
    finally:
        ps.stop()
