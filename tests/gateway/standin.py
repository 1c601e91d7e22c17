"""A small OpenAI-compatible stand-in for a vLLM backend, for the gateway's tests and benchmark.

``python -m tests.gateway.standin --name A [--key K] [--mode ok|500] [--tokens N] [--delay-ms D]``
binds 127.0.0.1 on an ephemeral port, prints ``PORT <n>`` on stdout and serves until killed.
Answers name the backend (``"backend": A``) so a test can count where requests went;
``GET /stats`` returns the request count. Streaming answers send N token chunks, D ms apart.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


def build(name: str, key: str | None, mode: str, tokens: int, delay_ms: float) -> Starlette:
    stats = {"requests": 0, "auth_failures": 0}

    def authorized(request: Request) -> bool:
        return key is None or request.headers.get("authorization") == f"Bearer {key}"

    async def health(request: Request):
        return Response("ok" if mode != "sick" else "sick", status_code=200 if mode != "sick" else 503)

    async def stats_ep(request: Request):
        return JSONResponse(stats)

    async def complete(request: Request):
        body = await request.json()
        if not authorized(request):
            stats["auth_failures"] += 1
            return JSONResponse({"error": {"message": "bad backend key"}}, status_code=401)
        stats["requests"] += 1
        if mode == "500":
            return JSONResponse({"error": {"message": "boom"}}, status_code=500)
        n = min(int(body.get("max_tokens") or tokens), tokens)
        if not body.get("stream"):
            return JSONResponse({"id": "x", "object": "text_completion", "backend": name, "model": body.get("model"),
                                 "choices": [{"index": 0, "text": "t" * n, "finish_reason": "length"}],
                                 "usage": {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1}})

        async def gen():
            for k in range(n):
                yield f"data: {json.dumps({'backend': name, 'choices': [{'index': 0, 'text': 't'}]})}\n\n".encode()
                await asyncio.sleep(delay_ms / 1000)
            yield b"data: [DONE]\n\n"

        return StreamingResponse(gen(), media_type="text/event-stream")

    return Starlette(routes=[Route("/health", health), Route("/stats", stats_ep),
                             Route("/v1/completions", complete, methods=["POST"]),
                             Route("/v1/chat/completions", complete, methods=["POST"])])


def main() -> None:
    import uvicorn

    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True)
    ap.add_argument("--key")
    ap.add_argument("--mode", default="ok", choices=["ok", "500", "sick"])
    ap.add_argument("--tokens", type=int, default=4)
    ap.add_argument("--delay-ms", type=float, default=5.0)
    a = ap.parse_args()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    sys.stdout.flush()
    config = uvicorn.Config(build(a.name, a.key, a.mode, a.tokens, a.delay_ms), log_level="error", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
