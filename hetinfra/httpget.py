"""The one way a command reads an HTTP answer from a server it does not control (a vLLM server, a
gateway, a demand log URL), for every stage (it imports nothing of hetinfra). The price feeds have
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
import urllib.error
import urllib.request

__all__ = ["AnswerError", "get"]


class AnswerError(OSError):
    """No usable answer: none came, it was not HTTP, or its body was cut short or too long."""


def get(request: str | urllib.request.Request, *, timeout: float, max_bytes: int = 1 << 20,
        opener: urllib.request.OpenerDirector | None = None) -> tuple[int, bytes]:
    """(status, body) of one request. An answer of 4xx/5xx raises urllib.error.HTTPError as urllib
    does (callers read its code); anything else that goes wrong raises AnswerError. Only http(s): a
    URL read from a file (state.json's gateways) that says file:// or ftp:// is no server's answer."""
    url = request.full_url if isinstance(request, urllib.request.Request) else str(request)
    if not url.lower().startswith(("http://", "https://")):
        raise AnswerError(f"{url[:60]!r} is not an http(s) URL")
    try:
        with (opener.open if opener else urllib.request.urlopen)(request, timeout=timeout) as resp:
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
