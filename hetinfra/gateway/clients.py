"""How long a client may take to send its request: the gateway's one HTTP protocol (uvicorn's, with a
deadline on what the client owes).

uvicorn bounds an idle keep-alive connection (5 s) and nothing else: a client that sent part of a
request line or its headers, or a body slower than a byte a second, held its connection and its
task for as long as it kept trickling (a probe kept one open for 60 s and more with a byte a second;
enough of them use up the process's file descriptors). Here a connection owes a request from when it
opens and again from each answer's end until the request's body has come whole, and must deliver
it by ``timeout_s`` plus a second per ``SLOWEST_BYTES_S`` bytes it has sent (a 4 MiB body at 16 KiB/s
or faster is never cut, however long it takes). Past that the connection is closed: with a 408 where
no request has begun, else as a client that left (the request is refused as a disconnect, 499). While
the gateway itself has paused reading (a body it has not consumed yet), the client owes nothing.

At most ``max_clients`` connections are served at once (default: half the process's open-file limit,
:func:`default_max_clients`); one past them is answered 503 and closed at once, so that clients never
take the descriptors the backends' connections and the demand log need (each slow client is bounded in
time above, not in number).

A request's line and headers are at most ``MAX_HEAD_BYTES`` (a 431 and the connection closed past
them): uvicorn's httptools protocol kept every header it was sent, so a client sending headers at
full speed and never ending them grew the gateway by 2 GB in 5 s (600 MB of headers), and the
deadline's allowance for bytes sent never ran out.
"""

from __future__ import annotations

import asyncio
import logging
import time

log = logging.getLogger("hetinfra.gateway")

#: the slowest a client may send after its first ``timeout_s`` (the bytes it sent buy it this much time)
SLOWEST_BYTES_S = 16 * 1024
#: the most bytes of a request's line and headers (an OpenAI client's are well under 8 KiB)
MAX_HEAD_BYTES = 64 * 1024
#: the answer to a connection whose request line and headers did not come in time
TIMEOUT_408 = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
#: the answer to a connection past max_clients
BUSY_503 = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nretry-after: 1\r\n"
            b"connection: close\r\n\r\n")
#: the answer to a connection whose request line and headers run past MAX_HEAD_BYTES
TOO_LARGE_431 = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


class ClientDeadline:
    """A mixin before uvicorn's HTTP protocol class (httptools' or h11's): see the module."""

    timeout_s: float = 30.0
    max_clients: int = 1024

    def connection_made(self, transport) -> None:  # noqa: ANN001 - asyncio's signature
        self._check, self._sent = None, 0
        super().connection_made(transport)
        if len(self.connections) > self.max_clients:
            log.info("refused a connection from %s: %d clients are connected (--max-clients)",
                     _peer(self.client), self.max_clients)
            transport.write(BUSY_503)
            transport.close()
            return
        self._owed_from(time.monotonic())

    def data_received(self, data: bytes) -> None:
        self._sent += len(data)
        super().data_received(data)
        if self._sent > MAX_HEAD_BYTES and self._in_head() and not self.transport.is_closing():
            log.info("closed a connection from %s: its request's line and headers ran past %d bytes",
                     _peer(self.client), MAX_HEAD_BYTES)
            self.transport.write(TOO_LARGE_431)
            self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._owed_from(time.monotonic())  # the next request is owed (uvicorn closes an idle one sooner)

    def connection_lost(self, exc) -> None:  # noqa: ANN001
        if self._check is not None:
            self._check.cancel()
            self._check = None
        super().connection_lost(exc)

    def _owed_from(self, start: float) -> None:
        self._start, self._sent = start, 0
        if self._check is not None:
            self._check.cancel()
        self._check = self.loop.call_at(self.loop.time() + self.timeout_s, self._on_check)

    def _deadline(self) -> float:
        return self._start + self.timeout_s + self._sent / SLOWEST_BYTES_S

    def _in_head(self) -> bool:
        """Whether the owed request's line and headers are still to come (no request has begun)."""
        return self.cycle is None or self.cycle.response_complete

    def _owing(self) -> bool:
        """Whether a request (its line, headers or body) is still to come."""
        cycle = self.cycle
        return cycle is None or cycle.response_complete or cycle.more_body

    def _on_check(self) -> None:
        self._check = None
        if self.transport.is_closing() or not self._owing():
            return  # served, or being answered: the answer's end owes the next request
        now = time.monotonic()
        if self.flow.read_paused:  # the gateway is not reading: the client cannot send
            self._owed_from(now)
            return
        left = self._deadline() - now
        if left > 0:
            self._check = self.loop.call_at(self.loop.time() + left, self._on_check)
            return
        began = not self._in_head()
        log.info("closed a connection from %s: its request did not come within %g s (%d bytes)",
                 _peer(self.client), self.timeout_s, self._sent)
        if not began:
            self.transport.write(TIMEOUT_408)
        self.transport.close()


def _peer(client) -> str:  # noqa: ANN001
    return f"{client[0]}:{client[1]}" if client else "a client"


def default_max_clients() -> int:
    """Half the process's open-file limit (its soft limit), at least 16: the rest is the backends'."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(16, min(soft if soft != resource.RLIM_INFINITY else 1 << 20, 1 << 20) // 2)


def protocol(timeout_s: float, max_clients: int | None = None) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol ("auto": httptools where importable, else h11) with a client deadline of
    ``timeout_s`` seconds and at most ``max_clients`` connections (default :func:`default_max_clients`;
    :class:`ClientDeadline`): the ``http`` the gateway serves with."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    return type("ClientDeadlineProtocol", (ClientDeadline, AutoHTTPProtocol),
                {"timeout_s": timeout_s, "max_clients": max_clients or default_max_clients()})
