"""HTTP for the feeds: standard library (urllib) only, always bounded in time.

Every request has a socket timeout (connect and each read), bounded retries with exponential
backoff on 429, 408 and 5xx responses and on timeouts/resets (``Retry-After`` honoured, in seconds
or as an HTTP date), and every client has a total deadline that no retry, wait or streamed read
can pass. Connection refused and name-resolution failures are not retried: offline, the caller's
fallback starts at once. Bodies are streamed line by line (:meth:`HttpClient.iter_lines`) or read
with a size cap (:meth:`HttpClient.get_json`). API keys in URLs never appear in messages.
"""

from __future__ import annotations

import email.utils
import http.client
import io
import json
import math
import re
import socket
import time
from datetime import timezone
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Iterator

from hetinfra.csvtext import is_plain_number, whole_number
from hetinfra.errors import FeedError
from hetinfra.fileio import json_value

USER_AGENT = "hetinfra-feeds/0.1 (+https://github.com/hetinfra)"
_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
_SECRET_RE = re.compile(r"((?:^|[?&])(?:key|api_key|apikey|token|sig)=)[^&#]*", re.IGNORECASE)


#: the largest figure read from a cloud's answer (a quota, a count, a price): past it a figure is a broken answer
MAX_ANSWER_NUMBER = 1e12


def answer_number(value: Any, *, whole: bool = False, least: float = 0.0,
                  most: float = MAX_ANSWER_NUMBER) -> float | int | None:
    """A figure of a cloud's JSON answer (a price list's price, a quota's limit and usage), or None
    where it is none: the one reader of them, so every adapter drops or skips such a figure alike.

    A JSON number, or a decimal string (GCP writes its int64 fields as strings: ``"units": "12"``),
    finite and in ``least..most``, whole where ``whole``. A boolean is no figure (``float(True)`` had
    made ``"retailPrice": true`` a price of $1.00/h, a GCP quota ``"limit": true`` one GPU), nor is
    NaN, an infinity or a figure past ``most`` (a quota ``"limit": "inf"`` was an OverflowError
    traceback in `plan --availability`, whose quota reader never raises)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    if isinstance(value, str):
        text = value.strip()
        if len(text) > 40 or not is_plain_number(text):  # the language of every number hetinfra reads as text
            return None
        value = float(text)
    elif isinstance(value, int):
        value = float(value) if abs(value) <= most + 1 else math.inf  # float() of a 400-digit int raises
    if not math.isfinite(value) or not least <= value <= most or (whole and value != int(value)):
        return None
    return int(value) if whole else value


class FetchError(FeedError):
    """A feed could not be fetched (network, HTTP status, deadline, malformed body): exit 4.

    ``status`` is the HTTP status for a final non-retryable HTTP error, else None.
    """

    def __init__(self, message: str, *, hint: str | None = None, details: dict | None = None,
                 status: int | None = None):
        super().__init__(message, hint=hint, details=details)
        self.status = status


def redact(url: str, *, max_query: int = 80) -> str:
    """The URL with API keys and tokens replaced by ``***`` (a long query shortened with "...")."""
    url = _SECRET_RE.sub(r"\1***", url)
    base, q, query = url.partition("?")
    if q and len(query) > max_query:
        query = query[:max_query] + "..."
    return base + q + query


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds from now: an integer, or an HTTP date; None when absent/bad."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    ref = now if now is not None else time.time()
    return max(0.0, when.timestamp() - ref)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError):
        exc = exc.reason if isinstance(exc.reason, BaseException) else exc
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timed out"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return "host name not resolved (offline?)"
    return f"{type(exc).__name__}: {exc}".rstrip(": ")


def _fatal_network(exc: BaseException) -> bool:
    """Errors that a retry will not cure (refused, no DNS): fail fast so fallbacks start."""
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    return isinstance(reason, (ConnectionRefusedError, socket.gaierror))


class HttpClient:
    """A urllib client with timeouts, retries and a total deadline (see the module docstring).

    ``timeout_s`` bounds each connect and each socket read; ``deadline_s`` bounds the client's
    whole life (all requests, retries and waits). ``sleep``/``clock`` are injectable for tests.
    """

    def __init__(self, *, timeout_s: float = 20.0, retries: int = 3, backoff_s: float = 0.5,
                 max_backoff_s: float = 8.0, deadline_s: float = 300.0, max_retry_after_s: float = 60.0,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic):
        if timeout_s <= 0 or deadline_s <= 0:
            raise ValueError("timeout_s and deadline_s must be > 0")
        self.timeout_s = timeout_s
        self.retries = max(0, int(retries))
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.deadline_s = deadline_s
        self.max_retry_after_s = max_retry_after_s
        self._sleep = sleep
        self._clock = clock
        self._deadline = clock() + deadline_s
        self.requests = 0  # attempts made (tests and progress)

    def remaining(self) -> float:
        return self._deadline - self._clock()

    def _check_deadline(self, url: str) -> float:
        left = self.remaining()
        if left <= 0:
            raise FetchError(f"gave up on {redact(url)}: the feed deadline of {self.deadline_s:g} s passed",
                             hint="raise the deadline (HETINFRA_FEEDS_DEADLINE_S) or fetch fewer regions")
        return left

    def _opener(self, url: str) -> urllib.request.OpenerDirector:
        """An opener whose every read ends by the client's deadline (hetinfra.httpget.deadline_opener): it
        was checked between 64 KiB reads, each of which waited until it was full, so a feed that sent a
        byte a second ran past any deadline. Loopback traffic never goes through an environment proxy."""
        from hetinfra.httpget import deadline_opener

        host = urllib.parse.urlsplit(url).hostname or ""
        return deadline_opener(self.deadline_s, self.timeout_s, proxies=host not in _LOOPBACK,
                               at=time.monotonic() + self.remaining())

    def _backoff(self, attempt: int) -> float:
        return min(self.max_backoff_s, self.backoff_s * (2 ** (attempt - 1)))

    def _with_retries(self, url: str, consume: Callable[[Any], Any], *, keep_open: bool = False,
                      data: bytes | None = None) -> Any:
        """Open ``url`` (a POST of ``data`` when given) and run ``consume(response)``, retrying
        transient failures of either (only read-only POSTs belong here).

        The response is closed afterwards unless ``keep_open`` (then only on failure).
        """
        headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=data, headers=headers)
        opener = self._opener(url)
        attempt = 0
        while True:
            attempt += 1
            left = self._check_deadline(url)
            wait: float | None = None
            self.requests += 1
            try:
                resp = opener.open(req, timeout=min(self.timeout_s, left))
            except urllib.error.HTTPError as exc:
                status = exc.code
                try:
                    excerpt = exc.read(300).decode("utf-8", "replace").strip().replace("\n", " ")
                except Exception:  # noqa: BLE001 - the body is only for the message
                    excerpt = ""
                finally:
                    exc.close()
                why = f"HTTP {status}" + (f" ({excerpt[:200]})" if excerpt else "")
                if not (status in (408, 429) or 500 <= status <= 599):
                    hint = ("check the API key (HETINFRA_GCP_API_KEY)" if status in (400, 401, 403) and "key=" in url
                            else None)
                    raise FetchError(f"{why} from {redact(url)}", hint=hint, status=status) from None
                ra = retry_after_seconds(exc.headers.get("Retry-After") if exc.headers else None)
                if ra is not None and ra > self.max_retry_after_s:
                    raise FetchError(f"{why} from {redact(url)}: server asks to retry after {ra:g} s",
                                     hint="try again later") from None
                wait = ra if ra is not None else self._backoff(attempt)
            except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
                why = _describe(exc)
                if _fatal_network(exc):
                    raise FetchError(f"cannot reach {redact(url)}: {why}",
                                     hint="check the network, or use --feeds snapshot") from None
                wait = self._backoff(attempt)
            else:
                ok = False
                try:
                    result = consume(resp)
                    ok = True
                    return result
                except FetchError:
                    raise
                except (OSError, http.client.HTTPException) as exc:  # reset or timeout mid-body
                    why = f"{_describe(exc)} while reading the body"
                    wait = self._backoff(attempt)
                finally:
                    if not (ok and keep_open):
                        resp.close()
            if attempt > self.retries:
                raise FetchError(f"{why} from {redact(url)} (gave up after {attempt} attempts)",
                                 hint="the feed may be down; the last good snapshot is used unless strict")
            if wait >= self.remaining():
                raise FetchError(f"{why} from {redact(url)}; retrying in {wait:g} s would pass the "
                                 f"{self.deadline_s:g} s deadline")
            self._sleep(wait)

    def get_bytes(self, url: str, *, max_bytes: int = 64 << 20, data: bytes | None = None) -> bytes:
        """The whole body (at most ``max_bytes``), read in chunks within the deadline; a POST of
        ``data`` when given."""

        def consume(resp) -> bytes:
            chunks, size = [], 0
            while True:
                self._check_deadline(url)
                chunk = resp.read(1 << 16)
                if not chunk:
                    if resp.length:  # read(n) returns what came: a body cut short is retried, not taken
                        raise http.client.IncompleteRead(b"", resp.length)
                    return b"".join(chunks)
                size += len(chunk)
                if size > max_bytes:
                    raise FetchError(f"response from {redact(url)} is larger than {max_bytes} bytes")
                chunks.append(chunk)

        return self._with_retries(url, consume, data=data)

    def get_json(self, url: str, *, max_bytes: int = 64 << 20, post: dict | None = None) -> Any:
        """The JSON body of a GET, or of a POST of ``post`` (a read-only query such as GCE's
        ``listManagedInstances``)."""
        body = self.get_bytes(url, max_bytes=max_bytes, data=None if post is None else json.dumps(post).encode())
        try:
            return json_value(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise FetchError(f"malformed JSON from {redact(url)}: {exc}",
                             hint="the feed changed format or returned an error page") from None

    def iter_lines(self, url: str, *, progress: Callable[[int, int | None], None] | None = None,
                   check_every: int = 2048) -> Iterator[str]:
        """Stream the body line by line (UTF-8, newlines kept) without holding it in memory.

        The request itself is retried; a failure after the first line raises :class:`FetchError`.
        ``progress(bytes_read, content_length)`` is called every ``check_every`` lines.
        """
        resp = self._with_retries(url, lambda r: r, keep_open=True)
        total = resp.headers.get("Content-Length")
        total_n = whole_number(total or "")
        read = 0
        try:
            text = io.TextIOWrapper(resp, encoding="utf-8", errors="replace", newline="")
            for i, line in enumerate(text):
                read += len(line)
                if i % check_every == 0:
                    self._check_deadline(url)
                    if progress is not None:
                        progress(read, total_n)
                yield line
            if resp.length:  # the stream ended short of its Content-Length: a price list cut off mid-way
                raise FetchError(f"the body of {redact(url)} ended {resp.length} bytes short of its Content-Length "
                                 f"after {read} bytes", hint="the feed may be down; the last good snapshot is used "
                                                             "unless strict")
            if progress is not None:
                progress(read, total_n)
        except FetchError:
            raise
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise FetchError(f"{_describe(exc)} while streaming {redact(url)} after {read} bytes") from None
        finally:
            resp.close()
