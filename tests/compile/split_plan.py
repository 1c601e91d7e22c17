"""A split plan for the deployment tests: ``golden/split/plan.json`` is what `hetinfra plan` wrote for
Qwen3-32B fp8 on H200 (p5en.48xlarge), 4000 -> 500 tokens at 40 req/s, TTFT 300 / TPOT 10 ms,
``planning.disaggregation: auto``, one-node templates, 2000 requests per replication: 12 x 1P1D
(TP4 + TP4) bundles. ``split_plan("2P1D")`` re-shapes its bundle to 2 prefill engines at TP2 and one
decode engine at TP4, so that a test sees several engines of one role."""

from __future__ import annotations

import copy
import json
from pathlib import Path

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
    return Plan.parse(copy.deepcopy(plan)).to_dict()
