"""The gateway's client keys (``HETINFRA_API_KEY``), read by the gateway and by the commands that
call its admin API; no web framework imported here."""

from __future__ import annotations

__all__ = ["first_client_key", "parse_client_keys"]


def parse_client_keys(value: str | None) -> dict[str, str]:
    """``HETINFRA_API_KEY``: ``key`` or ``name:key``, comma-separated -> {key: client name}."""
    out: dict[str, str] = {}
    for k, item in enumerate(x.strip() for x in (value or "").split(",")):
        if not item:
            continue
        name, sep, key = item.partition(":")
        if not sep:
            name, key = f"client{k}", item
        out[key.strip()] = name.strip() or f"client{k}"
    return out


def first_client_key(value: str | None) -> str | None:
    """The key of the first client in ``HETINFRA_API_KEY`` (what a command sends as its bearer token)."""
    return next(iter(parse_client_keys(value)), None)
