"""The gateway: one OpenAI-compatible endpoint per service, in front of the plan's units.

It routes each request by its class (prompt tokens and max_tokens, known at arrival) with the
plan's weights, keeps the backends' key from clients, and records traffic for re-planning.
``table`` (routing table from plan/weights/state files), ``classify`` (token counts),
``balancer`` (weights, least outstanding, health), ``demand`` (the demand log), ``server``
(starlette app under uvicorn, aiohttp to the backends, Prometheus metrics).

Heavy imports (starlette, uvicorn, aiohttp, prometheus_client) live in ``server`` only.
"""
