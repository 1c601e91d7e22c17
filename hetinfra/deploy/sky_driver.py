"""Drive SkyServe through SkyPilot's SDK: one service per deployment unit.

``sky.serve.up`` for a unit that is not running, ``sky.serve.update`` for one that is (a new
replica count or resources roll out without downtime), ``sky.serve.down`` for units that left
the plan. SkyPilot and the clouds it can reach are checked before anything starts (exit 4).
Secrets (``HF_TOKEN``, ``VLLM_API_KEY``) are declared by reference in the task YAMLs and given
their values here, from the environment, with ``Task.update_secrets``.
"""

from __future__ import annotations

from pathlib import Path

from hetinfra.errors import ProviderError


def sky_module():
    try:
        import sky
        from sky import serve  # noqa: F401
    except ImportError:
        raise ProviderError("SkyPilot is not installed", hint="pip install 'hetinfra[skypilot]'") from None
    return sky


def _call(what: str, fn, *args, **kwargs):
    """Run an SDK call and wait for its request; SkyPilot failures become exit 4 with the cause."""
    sky = sky_module()
    try:
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
