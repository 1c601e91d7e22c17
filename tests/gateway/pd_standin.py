"""Stand-in prefill and decode engines for the gateway's prefill hop (hetinfra.gateway.prefill).

``python -m tests.gateway.pd_standin --role prefill|decode --name N [--key K]`` binds 127.0.0.1 on an
ephemeral port, prints ``PORT <n>`` and serves until killed. A prefill engine answers one token and
``kv_transfer_params`` naming itself only when asked as vLLM's proxy asks (max_tokens 1, not streamed,
``do_remote_decode``); a decode engine counts the requests that came with a prefill's parameters
(``GET /stats``: ``with_kv``, ``without_kv``) and streams or returns its answer."""

from __future__ import annotations

import argparse
import json
import socket
import sys

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route


def build(role: str, name: str, key: str | None) -> Starlette:
    stats = {"requests": 0, "with_kv": 0, "without_kv": 0, "bad_prefill": 0}

    async def complete(request: Request):
        if key and request.headers.get("authorization") != f"Bearer {key}":
            return JSONResponse({"error": {"message": "bad backend key"}}, status_code=401)
        body = await request.json()
        stats["requests"] += 1
        if role == "prefill":
            kv = body.get("kv_transfer_params") or {}
            if body.get("max_tokens") != 1 or body.get("stream") or not kv.get("do_remote_decode"):
                stats["bad_prefill"] += 1
                return JSONResponse({"error": {"message": "not a prefill request"}}, status_code=400)
            return JSONResponse({"id": "p", "choices": [{"index": 0, "text": "t", "finish_reason": "length"}],
                                 "kv_transfer_params": {"do_remote_prefill": True, "do_remote_decode": False,
                                                        "remote_engine_id": name, "remote_block_ids": [1, 2],
                                                        "remote_host": "127.0.0.1", "remote_port": 5600}})
        kv = body.get("kv_transfer_params") or {}
        stats["with_kv" if kv.get("remote_engine_id") else "without_kv"] += 1
        n = int(body.get("max_tokens") or 4)
        if not body.get("stream"):
            return JSONResponse({"id": "d", "backend": name, "prefilled_by": kv.get("remote_engine_id"),
                                 "choices": [{"index": 0, "text": "t" * n, "finish_reason": "length"}],
                                 "usage": {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1}})

        async def gen():
            for _ in range(n):
                yield f"data: {json.dumps({'backend': name, 'choices': [{'index': 0, 'text': 't'}]})}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(gen(), media_type="text/event-stream")

    async def stats_ep(request: Request):
        return JSONResponse(stats)

    async def health(request: Request):
        return JSONResponse({"ok": True})

    return Starlette(routes=[Route("/health", health), Route("/stats", stats_ep),
                             Route("/v1/completions", complete, methods=["POST"]),
                             Route("/v1/chat/completions", complete, methods=["POST"])])


def main() -> None:
    import uvicorn

    ap = argparse.ArgumentParser()
    ap.add_argument("--role", required=True, choices=["prefill", "decode"])
    ap.add_argument("--name", required=True)
    ap.add_argument("--key")
    ap.add_argument("--port", type=int, default=0, help="0: an ephemeral one")
    a = ap.parse_args()
    sock = socket.socket()
    sock.bind(("127.0.0.1", a.port))
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    sys.stdout.flush()
    uvicorn.Server(uvicorn.Config(build(a.role, a.name, a.key), log_level="error", access_log=False)).run(sockets=[sock])


if __name__ == "__main__":
    main()
