"""The gateway's client keys (``HETINFRA_API_KEY``): the one reader of that variable, for the gateway
itself, for ``apply`` (which checks them before it hands them to the gateway VMs or the cluster as a
Pulumi secret: a key the gateway would refuse at start was found only in its log, after provisioning)
and for the commands that call its admin API (``status``'s gateway lines, ``replan --demand-from``).
In the shared base (tests/test_imports.py), so ``deploy`` reads it as ``gateway`` does; no web
framework imported here.

A key is 1-256 printable ASCII characters without whitespace or ',' (the separator): HTTP headers
carry bytes that servers decode as Latin-1, so a key with 'é' or an invisible character pasted with
it (a zero-width space) would match from one client and not from another (curl sends UTF-8), and an
empty key (``alice:``) would turn authentication on with no key that can pass it. Each is exit 2 at
start naming the entry and the client, never the key itself. Two clients with one key are refused
too (the second would silently take the first's name in logs and metrics).
"""

from __future__ import annotations

from hetinfra.csvtext import comma_items
from hetinfra.errors import InvalidInputError
from hetinfra.facts import key_problem

__all__ = ["first_client_key", "parse_client_keys"]

_FORMAT = "HETINFRA_API_KEY is key or name:key, comma-separated, each key printable ASCII without spaces"


def parse_client_keys(value: str | None) -> dict[str, str]:
    """``HETINFRA_API_KEY``: ``key`` or ``name:key``, comma-separated -> {key: client name}; an entry
    that cannot be a key is an InvalidInputError (see the module docstring)."""
    out: dict[str, str] = {}
    for k, item in enumerate(comma_items(value, "HETINFRA_API_KEY", keep_empty=True)):
        if not item:  # names no key (hetinfra.csvtext.comma_items says why it is skipped)
            continue
        name, sep, key = item.partition(":")
        if not sep:
            name, key = f"client{k}", item
        name, key = name.strip() or f"client{k}", key.strip()
        why = key_problem(key)
        if why is None and key in out:
            why = f"has the key of client '{out[key]}'"
        if why:
            raise InvalidInputError(f"HETINFRA_API_KEY entry {k + 1} (client {name[:40]!r}) {why}", hint=_FORMAT)
        out[key] = name
    return out


def first_client_key(value: str | None) -> str | None:
    """The key of the first client in ``HETINFRA_API_KEY`` (what a command sends as its bearer token)."""
    return next(iter(parse_client_keys(value)), None)
