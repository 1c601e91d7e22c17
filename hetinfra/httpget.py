"""The one way a command reads an HTTP answer from a server it does not control (a vLLM server, a
gateway, a demand log URL), and the one check of a URL a user gives (:func:`checked_url`), for every
stage (it imports only hetinfra.errors). The price feeds have
their own client with retries and deadlines (hetinfra.price_feeds.http); this is a single GET.

urllib raises more than OSError on a bad answer: http.client's BadStatusLine (a server that does
not speak HTTP), LineTooLong (a header over 64 KiB), HTTPException (over 100 headers) and
IncompleteRead (a broken chunked body) are not OSErrors, and every caller caught OSError alone: each
was a traceback. And ``read(n)`` of a body cut short of its Content-Length returns what came,
without a word: a truncated demand log was planned on. Here each of them is an :class:`AnswerError`,
an OSError, so a caller's ``except OSError`` takes it as it takes a refused connection.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request

from hetinfra.errors import InvalidInputError

__all__ = ["AnswerError", "checked_url", "deadline_opener", "get", "shown_url", "url_problem"]


def url_problem(url: str) -> str | None:
    """Why ``url`` is not an http(s) URL of a server, or None. Each place that took a URL from a
    flag, a variable or a file checked only its ``http://`` prefix: ``http://[::1`` was a ValueError
    traceback in `profile --endpoint` and `replan --demand-from` and "malformed feed data" (exit 4)
    in `feeds refresh`; a port of 99999 and a user and password (``http://u:pw@h``, which urllib
    reads as a host name, and which logs and errors then printed) were taken as given."""
    if not url or any(c.isspace() or not c.isprintable() for c in url):
        return "holds whitespace or a character that does not print"
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # raises on a port that is not a number in 0-65535
    except ValueError as exc:
        return f"not a URL ({exc})"
    if parts.scheme.lower() not in ("http", "https"):
        return "not an http:// or https:// URL"
    if not parts.hostname:
        return "names no host"
    if port == 0:
        return "port 0 is no server's"
    if "@" in parts.netloc:
        return "holds a user or password before '@'; keys go in the variables hetinfra reads them from"
    return None


def shown_url(url: str) -> str:
    """``url`` as errors and logs may print it: what precedes an '@' of its host part (a user and
    password) replaced by ``***``, at most 100 characters."""
    scheme, sep, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    if sep and "@" in host:
        url = f"{scheme}://***@{host.rpartition('@')[2]}{slash}{path}"
    return url if len(url) <= 100 else url[:97] + "..."


def checked_url(url: str, what: str, hint: str | None = None) -> str:
    """``url``, or an InvalidInputError (exit 2) naming ``what`` (a flag, ``--endpoint``, or a
    variable as ``NAME=``) where :func:`url_problem` finds one."""
    problem = url_problem(url)
    if problem:
        raise InvalidInputError(f"{what}{'' if what.endswith('=') else ' '}{shown_url(url)!r}: {problem}",
                                hint=hint or "give an http(s) URL such as http://10.0.0.5:8000")
    return url


class AnswerError(OSError):
    """No usable answer: none came, it was not HTTP, or its body was cut short or too long."""


# ---- answers within a deadline ---------------------------------------------------------------------------
# A socket timeout bounds each read, not the answer: a server that sends a byte a second (its headers or its
# body) never trips it, and `replan --demand-from URL` (60 s a read, a log of up to 1 GiB) and `feeds refresh`
# (whose deadline was checked between 64 KiB reads, each of which waited until it was full) ran on for days.
# Every read of a connection these openers make waits at most what is left of the deadline.

def _read(sock, read, *args):
    """``read(*args)`` of ``sock`` (a class of :func:`_timed`) waiting at most what is left of its deadline
    (and at most the time one read may take); none left is a TimeoutError saying so. Where the opener has a
    slowest rate, the deadline is also when what came so far would have come at that rate after its grace."""
    now = time.monotonic()
    by_rate = sock.rate_deadline()
    left = min(sock.deadline_at, by_rate) - now
    if left > 0:
        sock.settimeout(min(left, sock.per_read_s))
        try:
            got = read(*args)
        except TimeoutError:
            if min(sock.deadline_at, sock.rate_deadline()) > time.monotonic():
                raise  # one read's own limit
        else:
            sock.progress[0] += got if isinstance(got, int) else len(got)
            return got
    if by_rate < sock.deadline_at:
        raise TimeoutError(f"the answer came slower than {_rate(sock.slowest[0])} ({sock.progress[0]} bytes in "
                           f"{time.monotonic() - sock.started:.0f} s)")
    raise TimeoutError(f"no whole answer within {sock.deadline_s:g} s")


def _rate(bytes_per_s: float) -> str:
    return f"{bytes_per_s / 1024:g} KiB/s" if bytes_per_s >= 1024 else f"{bytes_per_s:g} bytes/s"


def _rate_deadline(sock) -> float:
    """When the bytes come so far would be late at the opener's slowest rate (infinity without one)."""
    if sock.slowest is None:
        return float("inf")
    rate, grace = sock.slowest
    return sock.started + grace + sock.progress[0] / rate


class _TimedSocket(socket.socket):
    __slots__ = ()

    def recv_into(self, buffer, nbytes=0, flags=0):
        return _read(self, super().recv_into, buffer, nbytes, flags)

    def recv(self, bufsize, flags=0):
        return _read(self, super().recv, bufsize, flags)


class _TimedSSLSocket(ssl.SSLSocket):
    def recv_into(self, buffer, nbytes=None, flags=0):
        return _read(self, super().recv_into, buffer, nbytes, flags)


def _timed(base: type, at: float, total: float, per_read: float, slowest: tuple[float, float] | None) -> type:
    """``base`` with the opener's deadline; ``progress`` (the bytes read so far, on every connection of the
    opener: one answer, its redirects included) is shared by the class's sockets."""
    return type(base.__name__, (base,), {"deadline_at": at, "deadline_s": total, "per_read_s": per_read,
                                         "slowest": slowest, "started": time.monotonic(), "progress": [0],
                                         "rate_deadline": _rate_deadline})


def deadline_opener(total_s: float, per_read_s: float, *, proxies: bool = True, at: float | None = None,
                    slowest: tuple[float, float] | None = None) -> urllib.request.OpenerDirector:
    """An opener whose connections end every read by ``at`` (time.monotonic(); default ``total_s`` from
    now) and wait at most ``per_read_s`` for one; ``proxies``: False for loopback servers (never through an
    environment proxy). ``slowest``: (bytes a second, grace seconds): the answer ends too once it has come
    slower than that on average since the grace (a deadline sized for the largest answer, as `replan
    --demand-from`'s ten minutes for 1 GiB, let a server sending a byte a second run it out). A read past
    either deadline raises TimeoutError (an OSError)."""
    at = time.monotonic() + total_s if at is None else at
    plain, tls = (_timed(base, at, total_s, per_read_s, slowest) for base in (_TimedSocket, _TimedSSLSocket))

    def connect(address, timeout=socket._GLOBAL_DEFAULT_TIMEOUT, source_address=None):  # noqa: SLF001 - urllib's
        sock = socket.create_connection(address, timeout, source_address)
        timed = plain(sock.family, sock.type, sock.proto, fileno=sock.detach())
        timed.settimeout(min(per_read_s, max(at - time.monotonic(), 0.001)))  # the request's writes too
        return timed

    class Plain(http.client.HTTPConnection):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            self._create_connection = connect

    class Tls(http.client.HTTPSConnection):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            self._create_connection = connect

    class Http(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(Plain, req)

    class Https(urllib.request.HTTPSHandler):
        def https_open(self, req):
            # made here, for https only: loading the CA store takes tens of milliseconds, which every
            # loopback http request (status, apply's health waits, the gateway's tests) paid
            context = ssl.create_default_context()
            context.sslsocket_class = tls
            return self.do_open(Tls, req, context=context)

    return urllib.request.build_opener(Http(), Https(), *([] if proxies else [urllib.request.ProxyHandler({})]))


def get(request: str | urllib.request.Request, *, timeout: float, max_bytes: int = 1 << 20,
        proxies: bool = True, total: float | None = None,
        slowest: tuple[float, float] | None = None) -> tuple[int, bytes]:
    """(status, body) of one request: the whole answer within ``total`` seconds (default ``timeout``,
    which bounds each read; :func:`deadline_opener`) and, with ``slowest`` (bytes a second, grace seconds),
    at least at that rate on average after the grace. An answer of 4xx/5xx raises urllib.error.HTTPError
    as urllib does (callers read its code); anything else that goes wrong raises AnswerError. Only
    http(s): a URL read from a file (state.json's gateways) that says file:// or ftp:// is no server's
    answer. ``proxies``: False never sends the request through an environment proxy."""
    url = request.full_url if isinstance(request, urllib.request.Request) else str(request)
    problem = url_problem(url)
    if problem:
        raise AnswerError(f"{shown_url(url)!r}: {problem}")
    opener = deadline_opener(timeout if total is None else total, timeout, proxies=proxies, slowest=slowest)
    try:
        with opener.open(request, timeout=timeout) as resp:
            body = resp.read(max_bytes + 1)
            short = resp.length  # what the Content-Length still promises after the read
            status = resp.status
    except urllib.error.HTTPError:
        raise
    except http.client.IncompleteRead:
        raise AnswerError("the answer's body broke off") from None
    except (OSError, ValueError) as exc:  # no answer (RemoteDisconnected among them); ValueError: a bad URL
        raise AnswerError(_first_line(getattr(exc, "reason", None) or exc)) from None
    except http.client.BadStatusLine as exc:
        raise AnswerError(f"not an HTTP answer ({str(exc)[:60]!r})") from None
    except http.client.HTTPException as exc:  # a header line over 64 KiB, over 100 headers
        raise AnswerError(f"not a usable HTTP answer ({_first_line(exc)})") from None
    if len(body) > max_bytes:
        raise AnswerError(f"the answer is larger than {max_bytes} bytes")
    if short:
        raise AnswerError(f"the answer ended {short} bytes before its Content-Length")
    return status, body


def _first_line(exc: object) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
