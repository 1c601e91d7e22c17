"""A split plan for the deployment tests: ``golden/split/plan.json`` is what `hetinfra plan` wrote for
Qwen3-32B fp8 on H200 (p5en.48xlarge), 4000 -> 500 tokens at 40 req/s, TTFT 300 / TPOT 10 ms,
``planning.disaggregation: auto``, one-node templates, 2000 requests per replication: 12 x 1P1D
(TP4 + TP4) bundles. ``split_plan("2P1D")`` re-shapes its bundle to 2 prefill engines at TP2 and one
decode engine at TP4, so that a test sees several engines of one role. ``split_plan("across")`` is
a bundle across the nodes of one placement group (2 x TP4 prefill on one p5en node, 2 x TP4 decode on
another, over EFA), ``split_plan("hetero")`` the same with its decode node a p4de.24xlarge (8 x
A100-80GB, us-east-1's snapshot price): the shapes issue 37's planner offers across nodes, built here
through the plan model until the planner emits them."""

from __future__ import annotations

import copy
import json
import os
import random
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from hetinfra.document import Plan

PLAN = Path(__file__).parent / "golden" / "split" / "plan.json"
UNIT = "qwen32-aws-us-east-1-p5en-48xlarge"


def split_plan(shape: str = "1P1D", **deploy) -> dict:
    plan = json.loads(PLAN.read_text())
    plan["deploy"].update(deploy)
    if shape == "2P1D":
        a = plan["allocations"][0]
        d = a["disaggregation"]
        d["xpyd"], d["roles"][0]["engines"], d["roles"][0]["tp"] = "2P1D", 2, 2
    elif shape in ("across", "hetero"):
        across(plan["allocations"][0], hetero=shape == "hetero")
    from tests.plan.golden_plans import totals_added_up  # the re-shaped unit's cost in the totals

    return Plan.parse(totals_added_up(copy.deepcopy(plan))).to_dict()


#: the decode role's own instance type in ``split_plan("hetero")``
HETERO_DECODE = {"instance_type": "p4de.24xlarge", "gpu": "A100-80GB", "gpus_per_node": 8,
                 "price_per_node_usd_per_hour": 27.44705}


def across(a: dict, hetero: bool = False) -> dict:
    """``a`` (a one-node 1P1D bundle) re-shaped to 2P2D at TP4 across two nodes over EFA; ``hetero``:
    its decode node of another instance type."""
    d = a["disaggregation"]
    d["xpyd"], d["link"], d["link_gbytes_s"] = "2P2D", "efa", 360.0
    for r in d["roles"]:
        r.update(engines=2, tp=4, nodes=1)
    if hetero:  # as the planner writes one: both roles priced, the allocation's price their nodes' mean
        prefill = a["price_per_instance_usd_per_hour"]
        d["roles"][0]["price_per_node_usd_per_hour"] = prefill
        d["roles"][1].update(HETERO_DECODE)
        a["price_per_instance_usd_per_hour"] = (prefill + HETERO_DECODE["price_per_node_usd_per_hour"]) / 2
    a["nodes_per_replica"], a["instances"] = 2, 2 * a["count"]
    a["cost_usd_per_hour"] = a["price_per_instance_usd_per_hour"] * a["instances"]
    return a


def wait_healthy(url: str, seconds: float, *nodes: subprocess.Popen) -> None:
    """Until ``url``/health answers 200 (bounded by ``seconds``); fails the test, with the nodes'
    stderr, when it does not or when a node's process ends first: a caller's next request would
    otherwise meet a bare "connection refused" with no trace of why the hop never came up."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if any(n.poll() is not None for n in nodes):
            break
        time.sleep(0.2)
    for n in nodes:  # a live node's stderr is read once it is stopped: its group, bounded
        if n.poll() is None:
            os.killpg(n.pid, signal.SIGKILL)
    errs = [n.communicate(timeout=10)[1] or "" for n in nodes]
    pytest.fail(f"{url}/health did not answer 200 within {seconds} s or a node ended first; node stderr: {errs!r}")


def free_port_block(n: int) -> int:
    """A base port P with P..P+n-1 all free on 127.0.0.1: a unit's hop takes P and its engines
    P+1.. (hetinfra.compile.bundle). Drawn below the kernel's ephemeral range (32768-60999 on
    Linux), where other tests' client sockets take ports at random: an engine port one above a
    free ephemeral port could be a live client's and the stand-in engine could not bind it."""
    rng = random.Random(os.getpid())
    for _ in range(200):  # bounded: a block is found in a try or two on any machine running tests
        base = rng.randrange(20000, 32000 - n)
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no {n} consecutive free ports in 20000-32000 on 127.0.0.1")
