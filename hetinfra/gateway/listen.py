"""What the gateway needs before it serves, checked so that a mistake is a clear exit 2 instead of
uvicorn's traceback or its bare exit 1: the TLS certificate and key load and match, the host is an
address of this machine, and the port is free."""

from __future__ import annotations

import errno
import socket
import ssl

from hetinfra.errors import InvalidInputError


def check_tls(cert: str | None, key: str | None) -> None:
    if not cert:
        return
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)
        raise InvalidInputError(f"--tls-cert {cert} / --tls-key {key}: not a PEM certificate and its private key "
                                f"({reason})", hint="pass the PEM chain and the matching unencrypted key") from None


def check_bind(host: str, port: int) -> None:
    """Bind ``host:port`` once (as uvicorn will, with SO_REUSEADDR) and let it go again."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise InvalidInputError(f"--host {host!r} is not an address or name this machine can listen on ({exc})",
                                hint="use 127.0.0.1, 0.0.0.0 or one of this machine's addresses") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise InvalidInputError(f"port {port} on {host} is in use by another process",
                                        hint="stop it or pass another --port") from None
            if exc.errno == errno.EACCES:
                raise InvalidInputError(f"no permission to listen on port {port}",
                                        hint="ports below 1024 need root; pass a higher --port") from None
            raise InvalidInputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                                    hint="use an address of this machine (127.0.0.1, 0.0.0.0)") from None
