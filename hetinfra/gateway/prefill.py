"""The prefill hop of a prefill/decode bundle (issue 37): the step before ``forward`` that vLLM's
disaggregated proxy takes (vllm tests/v1/kv_connector/nixl_integration/toy_proxy_server.py, checked
against vLLM 0.12.0, the pinned ``deploy.vllm_version``):

1. the request goes to one of the unit's prefill engines with ``max_tokens: 1``, ``stream: false``,
   no ``stream_options`` / ``min_tokens``, and ``kv_transfer_params: {"do_remote_decode": true, ...}``;
2. the prefill engine's answer carries ``kv_transfer_params`` (where its KV blocks are: engine id,
   block ids, host, port), which go into the original request;
3. ``forward`` sends that to a decode engine of the unit, which pulls the KV (NIXL) and streams the
   answer; its retries and ejection cover the decode step as for any unit.

Failure handling: a prefill engine that refuses to connect is ejected; a 5xx, a timeout or a broken
connection tries another prefill engine; when none answers, the request goes to the decode engine
as it came (decode-only: it prefills itself), as llm-d's routing sidecar does. So a dead prefill or
decode engine costs latency, never a request. One prefill answer serves every decode attempt of the
call (the KV stays on the prefill engine until a decode engine reads it).

Prefill endpoints come as ``--endpoint <deployment_unit>/prefill=URL`` (the unit's decode engines
are its ordinary endpoints)."""

from __future__ import annotations

import asyncio
import json
import logging

import aiohttp

from hetinfra.gateway.balancer import Backend
from hetinfra.gateway.table import base_url

__all__ = ["PREFILL_SUFFIX", "prefill_body", "prefill_hop", "split_endpoints"]

log = logging.getLogger("hetinfra.gateway")
PREFILL_SUFFIX = "/prefill"
#: what the prefill engine must be told (vLLM's NixlConnector request fields)
_REMOTE_DECODE = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                  "remote_block_ids": None, "remote_host": None, "remote_port": None}


def split_endpoints(endpoints: dict[str, list[str]]) -> tuple[dict[str, list[str]], dict[str, list[Backend]]]:
    """(the ordinary endpoints, deployment unit -> its prefill engines) from ``--endpoint`` overrides."""
    plain = {k: v for k, v in endpoints.items() if not k.endswith(PREFILL_SUFFIX)}
    prefill = {k[:-len(PREFILL_SUFFIX)]: [Backend(k, base_url(url)) for url in v]
               for k, v in endpoints.items() if k.endswith(PREFILL_SUFFIX)}
    return plain, prefill


def prefill_body(body: dict) -> dict:
    """The prefill engine's request: one token, not streamed, asking it to keep the KV for a remote decode."""
    out = {k: v for k, v in body.items() if k not in ("stream_options", "min_tokens", "min_completion_tokens")}
    out.update(kv_transfer_params=dict(_REMOTE_DECODE), stream=False, max_tokens=1)
    if "max_completion_tokens" in out:
        out["max_completion_tokens"] = 1
    return out


def _pick(backends: list[Backend], tried: set[Backend]) -> Backend | None:
    ready = [b for b in backends if b.healthy and b not in tried]
    return min(ready, key=lambda b: b.outstanding) if ready else None


async def prefill_hop(gw, call, unit: str, headers: dict[str, str]) -> bytes:
    """The body ``forward`` sends to ``unit``'s decode engine: with the prefill's ``kv_transfer_params``
    when one of the unit's prefill engines answered, else the request as it came. Remembered on the
    call, so a decode retry on the same unit reuses the prefill."""
    engines = gw.prefill.get(unit)
    if not engines:
        return call.raw
    if unit in call.prefilled:
        return call.prefilled[unit]
    raw, tried = json.dumps(prefill_body(call.body)).encode(), set()
    for _ in range(gw.config.retries + 1):
        b = _pick(engines, tried)
        if b is None:
            break
        tried.add(b)
        params = await _ask(gw, b, call.path, raw, headers)
        if params is not None:
            call.prefilled[unit] = json.dumps({**call.body, "kv_transfer_params": params}).encode()
            return call.prefilled[unit]
    log.warning("no prefill engine of %s answered; decoding %s without a prefill hop", unit, call.model)
    gw.metrics.retries.labels(unit, "prefill").inc()
    call.prefilled[unit] = call.raw
    return call.raw


async def _ask(gw, b: Backend, path: str, raw: bytes, headers: dict[str, str]) -> dict | None:
    """One prefill engine's ``kv_transfer_params``, or None (ejected when it refuses to connect)."""
    b.outstanding += 1
    try:
        async with gw.session.post(b.url + path, data=raw, headers=headers) as resp:
            if resp.status != 200:
                return None
            params = (await resp.json(content_type=None) or {}).get("kv_transfer_params")
            return params if isinstance(params, dict) else None
    except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError):
        b.eject()
        return None
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError, AttributeError):
        return None
    finally:
        b.outstanding -= 1
