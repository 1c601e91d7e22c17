"""hetinfra.httpget, the one GET of a server hetinfra does not control: whatever bytes come back, the
answer is (status, the whole body), urllib's HTTPError for a 4xx/5xx, or an AnswerError (an OSError
the callers already take as "not answering"), never http.client's own exceptions, and never a body
cut short of its Content-Length."""

from __future__ import annotations

import socket
import threading
import urllib.error

import pytest
from hypothesis import given, settings, strategies as st

from hetinfra.httpget import AnswerError, get


class OneShot:
    """A loopback server that answers every connection with ``answer`` (raw bytes) and closes it."""

    def __init__(self):
        self.answer = b""
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/x"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self._answer(conn)

    def _answer(self, conn):
        with conn:
            conn.recv(65536)
            conn.sendall(self.answer)


@pytest.fixture(scope="module")
def server():
    srv = OneShot()
    yield srv
    srv.sock.close()


BAD = {
    "not HTTP": b"garbage\r\n\r\n",
    "cut short": b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nts,model\n",
    "a header over 64 KiB": b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70000 + b"\r\n\r\n",
    "over 100 headers": b"HTTP/1.1 200 OK\r\n" + b"X: a\r\n" * 200 + b"\r\n",
    "a broken chunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n",
    "nothing": b"",
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_each_kind_of_bad_answer_is_an_answer_error(server, kind):
    server.answer = BAD[kind]
    with pytest.raises(AnswerError):
        get(server.url, timeout=5)


head = st.sampled_from([b"HTTP/1.1 200 OK\r\n", b"HTTP/1.0 404 Not Found\r\n", b"HTTP/1.1 500 X\r\n", b"", b"HTTP/9 x\r\n"])
headers = st.lists(st.sampled_from([b"Content-Length: 5\r\n", b"Content-Length: -1\r\n", b"Content-Length: x\r\n",
                                    b"Transfer-Encoding: chunked\r\n", b"Connection: close\r\n"]), max_size=3)


@settings(max_examples=80, deadline=None)
@given(head=head, headers=headers, body=st.binary(max_size=40))
def test_any_answer_is_a_whole_body_or_a_named_failure(server, head, headers, body):
    server.answer = head + b"".join(headers) + b"\r\n" + body
    try:
        status, got = get(server.url, timeout=5, max_bytes=30)
    except (AnswerError, urllib.error.HTTPError):
        return
    assert 200 <= status < 400 and len(got) <= 30
    if b"Content-Length: 5\r\n" in headers and b"Transfer-Encoding: chunked\r\n" not in headers:
        assert got == body[:5]


@pytest.mark.parametrize("kind", sorted(BAD))
def test_the_callers_take_a_bad_answer_as_no_answer(server, kind, tmp_path):
    """replan --demand-from (exit 4, nothing written) and profile's server check (exit 4): each was a
    traceback on every kind but "nothing", and a log cut short was planned on as a shorter log."""
    from hetinfra.cli.replan import fetch_demand
    from hetinfra.errors import FeedError, HetinfraError
    from hetinfra.perf.harness import check_endpoint

    server.answer = BAD[kind]
    with pytest.raises(FeedError, match="cannot fetch the demand log"):
        fetch_demand(server.url, tmp_path)
    assert not (tmp_path / "gateway").exists()
    with pytest.raises(HetinfraError, match="not answering") as err:
        check_endpoint(server.url.removesuffix("/x"), "m", timeout_s=5)
    assert err.value.exit_code == 4


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10)
#: a gateway's answers as it writes them, each node of which the strategy may replace by any JSON
WEIGHTS = {"units": {"u1": [{"url": "http://a", "healthy": True, "outstanding": 2}]},
           "models": {"chat": {"c1": {"u1": 1.0}}}}
HEALTH = {"units": {"u1": {"healthy": 1, "replicas": 1, "outstanding": 0}}}


def _replace(doc, path, value):
    if not path:
        return value
    doc = dict(doc) if isinstance(doc, dict) else doc
    if isinstance(doc, dict) and doc:
        key = sorted(doc)[path[0] % len(doc)]
        doc[key] = _replace(doc[key], path[1:], value)
    return doc


@settings(max_examples=150, deadline=None)
@given(path=st.lists(st.integers(0, 5), max_size=4), value=json_values)
def test_any_gateway_answer_gives_status_lines_or_says_it_is_not_one(server, path, value):
    """`status` shows a gateway's /admin/weights and `apply` waits on its /health: a server at that URL
    answering other JSON was an AttributeError or a ValueError (a weight '0.5')."""
    import json

    from hetinfra.deploy.destroy import gateway_status
    from hetinfra.deploy.health import _gateway_units

    for doc in (WEIGHTS, HEALTH):
        server.answer = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
                         + json.dumps(_replace(doc, path, value)).encode())
        lines = gateway_status("f", server.url, env={}, timeout_s=5)
        assert lines and all(isinstance(line, str) for line in lines)
        units = _gateway_units(server.url, 5)
        assert all(isinstance(v["replicas"], int) and isinstance(v["healthy"], int) for v in units.values())


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.test/x", "data:,hello", "/etc/passwd"])
def test_only_http_is_asked(url):
    """A URL read from a file (state.json's gateways) is asked only over http(s): urllib opens file://."""
    with pytest.raises(AnswerError, match="not an http"):
        get(url, timeout=1)


# ---- an answer that trickles: the whole of it within the deadline (hetinfra.httpget.deadline_opener) --------

import time  # noqa: E402

from hetinfra.price_feeds.http import FetchError, HttpClient  # noqa: E402

#: answers that come a few bytes at a time: the status line and headers, a body of a stated length, a chunked
#: body, a body that ends with the connection; each piece is (bytes sent at once, then the wait before the next)
TRICKLES = {
    "headers": (b"HTTP/1.1 200 OK\r\n", b"X-A: " + b"a" * 400),
    "body": (b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n", b"x" * 5000),
    "chunked": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"1\r\nx\r\n" * 800),
    "until closed": (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", b"x" * 5000),
}


class Trickle(OneShot):
    """A loopback server that sends ``TRICKLES[kind]``: the first part at once, then ``step`` bytes every
    ``every`` seconds, for at most ``lasts`` seconds (then it closes): each read waits far less than a
    read's time limit, and the whole answer far longer than the deadline."""

    def __init__(self, kind: str, step: int, every: float, lasts: float = 4.0):
        self.first, self.rest = TRICKLES[kind]
        self.step, self.every, self.lasts = step, every, lasts
        super().__init__()

    def _answer(self, conn):
        threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn):
        end = time.monotonic() + self.lasts
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(self.first)
                for at in range(0, len(self.rest), self.step):
                    if time.monotonic() > end:
                        return
                    time.sleep(self.every)
                    conn.sendall(self.rest[at:at + self.step])
            except OSError:
                return


@settings(max_examples=6, derandomize=True, deadline=None)
@given(kind=st.sampled_from(sorted(TRICKLES)), step=st.integers(1, 3), every=st.sampled_from([0.05, 0.1, 0.2]),
       reader=st.sampled_from(["httpget", "feeds"]))
def test_an_answer_that_trickles_ends_by_the_deadline(kind, step, every, reader):
    """A server that sends its status line, headers or body a few bytes at a time (each read waits less than
    a read's limit) is answered within the reader's deadline: `hetinfra.httpget.get` (timeout 0.4 s here: health
    checks, a gateway's weights, `replan --demand-from`) an AnswerError, the price feeds' client (deadline
    0.4 s) a FetchError. Each read had its own limit only: `replan --demand-from URL` and `feeds refresh` of
    such a server ran on for days (here: until the server gave up, 4 s)."""
    server = Trickle(kind, step, every)
    t0 = time.monotonic()
    try:
        if reader == "httpget":
            with pytest.raises(AnswerError):
                get(server.url, timeout=0.4)
        else:
            with pytest.raises(FetchError):
                HttpClient(timeout_s=0.4, deadline_s=0.4, retries=0).get_bytes(server.url)
    finally:
        server.sock.close()
    assert time.monotonic() - t0 < 0.4 + 0.6, f"{kind}: {time.monotonic() - t0:.1f} s"


@settings(max_examples=4, derandomize=True, deadline=None)
@given(kind=st.sampled_from(sorted(TRICKLES)), step=st.integers(1, 3), every=st.sampled_from([0.02, 0.05, 0.1]))
def test_an_answer_slower_than_the_slowest_rate_ends_after_the_grace(kind, step, every):
    """With a slowest rate (``slowest``: bytes a second, grace seconds), an answer that trickles ends once what
    came is late at that rate, long before a deadline sized for the largest answer: `replan --demand-from URL`
    (ten minutes for up to 1 GiB) of a gateway sending a byte a second waited out all ten minutes (here a
    deadline of 30 s, the grace 0.2 s, at least 10 KiB/s), and the error says the rate."""
    server = Trickle(kind, step, every)
    t0 = time.monotonic()
    try:
        with pytest.raises(AnswerError, match="slower than 10 KiB/s"):
            get(server.url, timeout=5, total=30, slowest=(10 * 1024, 0.2))
    finally:
        server.sock.close()
    assert time.monotonic() - t0 < 0.2 + 0.5, f"{kind}: {time.monotonic() - t0:.1f} s"


def test_an_answer_at_the_slowest_rate_or_faster_is_read_whole(server):
    server.answer = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"
    assert get(server.url, timeout=2, slowest=(1 << 20, 0.5)) == (200, b"abc")


# ---- https: the deadline's TLS sockets, with the CA store the default context reads -------------------------

def _self_signed(folder) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and its key, as PEM files in ``folder``."""
    import datetime as dt
    import ipaddress

    crypto = pytest.importorskip("cryptography")  # noqa: F841 (skips where the test extra lacks it)
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


class TlsOneShot(OneShot):
    """OneShot over TLS with ``cert``/``key``."""

    def __init__(self, cert: str, key: str):
        import ssl

        self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.tls.load_cert_chain(cert, key)
        super().__init__()
        self.url = self.url.replace("http://", "https://")

    def _answer(self, conn):
        try:
            with self.tls.wrap_socket(conn, server_side=True) as tls:
                tls.recv(65536)
                tls.sendall(self.answer)
        except OSError:  # the client refused the certificate
            return


def test_https_answers_whole_within_the_deadline_and_an_untrusted_certificate_is_refused(tmp_path, monkeypatch):
    """`get` over TLS (the price feeds and gateways are https): the deadline's TLS socket class reads the whole
    answer where the CA store (here SSL_CERT_FILE, as the default context reads it) trusts the server, and
    refuses a certificate it does not trust. The TLS context is made for https requests only."""
    cert, key = _self_signed(tmp_path)
    server = TlsOneShot(cert, key)
    server.answer = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"
    try:
        with pytest.raises(AnswerError, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
            get(server.url, timeout=2, proxies=False)
        monkeypatch.setenv("SSL_CERT_FILE", cert)
        assert get(server.url, timeout=2, proxies=False) == (200, b"hello")
    finally:
        server.sock.close()
