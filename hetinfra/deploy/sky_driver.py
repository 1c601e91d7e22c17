"""Drive SkyServe through SkyPilot's SDK: one service per deployment unit.

``sky.serve.up`` for a unit that is not running, ``sky.serve.update`` for one that is (a new
replica count or resources roll out without downtime), ``sky.serve.down`` for units that left
the plan. SkyPilot and the clouds it can reach are checked before anything starts (exit 4).
Secrets (``HF_TOKEN``, ``VLLM_API_KEY``) are declared by reference in the task YAMLs and given
their values here, from the environment, with ``Task.update_secrets``.

Processes we start, we stop: SkyPilot's SDK starts a local API server (and its executors) on the
first call when none runs. Inside :func:`session` (every `apply` and `destroy`), the first use of
SkyPilot notes whether a local server was up; one that was not is stopped when the session ends,
also on errors. SkyPilot's banners and request logs go to stderr, so ``--json`` stdout stays one
JSON document.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from pathlib import Path

from hetinfra.errors import ProviderError

#: the open sessions (innermost last): {"used": SkyPilot was touched, "was_running": a local server was up}
_SESSIONS: list[dict] = []


@contextlib.contextmanager
def session():
    """Stop, on leaving, a local SkyPilot API server that this block's SkyPilot calls started."""
    mine = {"used": False, "was_running": True}
    _SESSIONS.append(mine)
    try:
        yield
    finally:
        _SESSIONS.remove(mine)
        if mine["used"] and not mine["was_running"]:
            _stop_api_server()


def in_session(fn):
    """``fn`` run inside :func:`session` (apply, destroy)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with session():
            return fn(*args, **kwargs)
    return wrapper


def _local_server_up() -> bool:
    """Whether a local API server answers now (a remote one counts as up: it is never ours to stop)."""
    from sky.server import common

    try:
        if not common.is_api_server_local():
            return True
        return common.get_api_server_status().status == common.ApiServerStatus.HEALTHY
    except Exception:  # unreadable: assume it was there, so that we never stop someone else's server
        return True


def _stop_api_server() -> None:
    from sky.client import sdk

    try:
        with to_stderr():
            sdk.api_stop()
    except Exception as exc:  # the command's outcome stands; say what may be left behind
        print(f"warning: could not stop the SkyPilot API server this run started: {exc}; run `sky api stop`",
              file=sys.stderr)


@contextlib.contextmanager
def to_stderr():
    """Send everything written to stdout (Python's and file descriptor 1, for SkyPilot's logging
    handlers and subprocesses) to stderr for the duration."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no fd 1 (an embedding host): the Python-level redirect alone
        saved = None
    try:
        if saved is not None:
            os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def sky_module():
    try:
        with to_stderr():
            import sky
            from sky import serve  # noqa: F401
    except ImportError:
        raise ProviderError("SkyPilot is not installed", hint="pip install 'hetinfra[skypilot]'") from None
    if _SESSIONS and not _SESSIONS[-1]["used"]:
        _SESSIONS[-1]["used"] = True
        _SESSIONS[-1]["was_running"] = _local_server_up()
    return sky


def _call(what: str, fn, *args, **kwargs):
    """Run an SDK call and wait for its request; SkyPilot failures become exit 4 with the cause."""
    sky = sky_module()
    try:
        with to_stderr():
            return sky.stream_and_get(fn(*args, **kwargs))
    except ProviderError:
        raise
    except Exception as exc:  # SkyPilot raises many exception types; all mean "the provider failed"
        raise ProviderError(f"SkyPilot {what} failed: {type(exc).__name__}: {exc}") from None


def check_ready(clouds: list[str]) -> None:
    sky_module()
    from sky.client import sdk

    enabled = {str(c).lower() for c in (_call("enabled_clouds", sdk.enabled_clouds) or [])}
    missing = [c for c in clouds if c not in enabled]
    if missing:
        raise ProviderError(f"SkyPilot cannot use {', '.join(missing)} (enabled: {', '.join(sorted(enabled)) or 'none'})",
                            hint=f"set up credentials, then run `sky check {' '.join(missing)}`")


def serve_up(task_yaml: Path, service: str, secrets: dict[str, str], *, update: bool) -> str | None:
    """Launch or update one service; returns its endpoint (None for an update)."""
    sky = sky_module()
    with to_stderr():
        task = sky.Task.from_yaml(str(task_yaml))
    task.update_secrets(secrets)
    if update:
        from sky.serve import UpdateMode

        _call(f"serve update {service}", sky.serve.update, task, service, mode=UpdateMode.ROLLING)
        return None
    result = _call(f"serve up {service}", sky.serve.up, task, service)
    return result[1] if isinstance(result, (tuple, list)) and len(result) > 1 else None


def serve_down(services: list[str]) -> None:
    if services:
        sky = sky_module()
        _call(f"serve down {', '.join(services)}", sky.serve.down, services)


def serve_status(services: list[str]) -> list[dict]:
    sky = sky_module()
    return list(_call("serve status", sky.serve.status, services) or [])
