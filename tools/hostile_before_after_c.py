"""Before and after, as a hostile user would (issue 36, round four): unicode and whitespace in every
string that reaches a name, a shell, a header or a log (homoglyphs, zero-width and bidi characters,
no-break spaces, fullwidth letters, names that differ only in case or punctuation), in the spec, the
gateway's client keys and the demand log. Each case runs in its own process on two checkouts:

    BEFORE_PY=/work/main/.venv/bin/python BEFORE_ROOT=/work/main .venv/bin/python tools/hostile_before_after_c.py

BEFORE_ROOT is put first on PYTHONPATH of BEFORE_PY; "after" is this checkout with its venv. A case
prints one JSON line: its outcome and whether it was handled (a clear HetinfraError with exit 2, or
the right result: distinct resource names, a key every client can send, a log read as written).
"""
from __future__ import annotations

import copy
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
ZWSP, RLO, NBSP, CYR_C = "\u200b", "\u202e", "\u00a0", "\u0441"
BASE = {"name": "chat", "models": [{"name": "chat-8b", "model": "llama-3.1-8b", "source": "meta-llama/Llama-3.1-8B-Instruct",
        "slo": {"ttft_ms": 2000, "tpot_ms": 120}, "demand": {"rate_rps": 4, "sizes": {"classes": [
            {"name": "short", "input_tokens": 200, "output_tokens": 100, "share": 1}]}}}],
        "infrastructure": {"clouds": ["aws"], "gpus": ["L4"], "regions": ["us-east-1", "us-west-2"]}}


# ------------------------------------------------------------------ spec
def _plan(spec: dict) -> dict:
    """`hetinfra plan --no-verify --no-baselines --out` in process: the units' resource names."""
    import yaml
    from click.testing import CliRunner

    from hetinfra.cli import cli

    d = Path(tempfile.mkdtemp())
    (d / "s.yaml").write_text(yaml.safe_dump(spec, allow_unicode=True), encoding="utf-8")
    r = CliRunner().invoke(cli, ["plan", str(d / "s.yaml"), "--no-verify", "--no-baselines", "--out", str(d / "o")])
    if r.exit_code != 0:
        from hetinfra.errors import InvalidInputError

        if r.exception is not None and not isinstance(r.exception, SystemExit):
            raise r.exception
        raise InvalidInputError((r.output or "").strip().splitlines()[-1][7:] if r.output else f"exit {r.exit_code}")
    plan = json.loads((d / "o" / "plan.json").read_text())
    return {a["model"]: a["deployment_unit"] for a in plan["allocations"]}


def _model(name: str, **demand) -> dict:
    m = copy.deepcopy(BASE["models"][0])
    m["name"] = name
    m["demand"].update(demand)
    return m


def _spec(*models, **top) -> dict:
    return {**copy.deepcopy(BASE), "models": list(models) or copy.deepcopy(BASE["models"]), **top}


def distinct(r: dict) -> bool:
    """Every model's resources named apart (a slug drops what a DNS name cannot hold, by the rule of
    hetinfra.plan.naming.model_slugs, and ends in a hash where two names would meet)."""
    units = list(r.values())
    return len(set(units)) == len(units) == len(r)


# ------------------------------------------------------------------ keys
def _keys(value: str) -> dict:
    """Which clients of HETINFRA_API_KEY=value can authenticate with what they were given, sent by
    curl (UTF-8 bytes, read by the server as Latin-1)."""
    try:  # hetinfra.clientkeys since stop 64; a checkout before it has hetinfra.gateway.keys
        from hetinfra.clientkeys import parse_client_keys
    except ImportError:
        from hetinfra.gateway.keys import parse_client_keys
    from hetinfra.gateway.steps import client_name

    keys = parse_client_keys(value)
    names = [e.partition(":")[0].strip() if ":" in e else f"client{k}" for k, e in enumerate(value.split(","))]
    sent = [e.partition(":")[2].strip() if ":" in e else e.strip() for e in value.split(",")]
    passes = [client_name(keys, {"authorization": ("Bearer " + s).encode().decode("latin-1")}) for s in sent]
    return {"clients": names, "authenticated_as": passes}


def all_pass(r: dict) -> bool:
    return r["authenticated_as"] == r["clients"]


# ------------------------------------------------------------------ demand log
def _log(model: str = "chat-8b", region: str = "us-east-1", header: str | None = None, bom: bool = False) -> dict:
    """replan's view of a 2-hour log whose rows carry ``model`` and ``region``, against BASE."""
    from hetinfra.replan.demand_log import observe_spec, read_demand_log
    from hetinfra.spec.models import ServiceSpec

    spec = _spec(_model("chat-8b", origins={"us-east-1": 0.5, "us-west-2": 0.5}))
    now = 1_790_000_000
    head = header or "timestamp,model,input_tokens,output_tokens,region"
    rows = [f"{now - 7200 + 2 * k},{model},150,80,{region}" for k in range(3600)]
    path = Path(tempfile.mkdtemp()) / "log.csv"
    path.write_text(("\ufeff" if bom else "") + head + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    observed, notes = observe_spec(read_demand_log(path, clock=lambda: now), ServiceSpec.model_validate(spec))
    o = observed.get("chat-8b")
    return {"observed": sorted(observed), "origins": sorted(o.origins) if o and o.origins else [], "notes": notes[:1]}


def chat_observed(r: dict) -> bool:
    return r["observed"] == ["chat-8b"]


CASES = {
    "spec: model 'сhat-8b' (Cyrillic с)": (lambda: _plan(_spec(_model(CYR_C + "hat-8b"))), distinct),
    "spec: model 'ｃhat-8b' (fullwidth c)": (lambda: _plan(_spec(_model("\uff43hat-8b"))), distinct),
    "spec: model 'chat-8b' + zero-width space": (lambda: _plan(_spec(_model("chat-8b" + ZWSP))), None),
    "spec: model 'chat-8b' + RLO (bidi override)": (lambda: _plan(_spec(_model("chat" + RLO + "-8b"))), None),
    "spec: models 'chat-8b' and 'Chat-8b'": (lambda: _plan(_spec(_model("chat-8b"), _model("Chat-8b"))), distinct),
    "spec: models 'chat-8b' and 'chat.8b'": (lambda: _plan(_spec(_model("chat-8b"), _model("chat.8b"))), distinct),
    "spec: models 'chat-8b' and 'сhat-8b'": (lambda: _plan(_spec(_model("chat-8b"), _model(CYR_C + "hat-8b"))), distinct),
    "spec: class name 'short' + zero-width space": (lambda: _plan(_spec(_model("chat-8b", sizes={"classes": [
        {"name": "short" + ZWSP, "input_tokens": 200, "output_tokens": 100, "share": 1}]}))), None),
    "spec: origin 'us-east-1' + no-break space": (lambda: _plan(_spec(_model("chat-8b", origins={
        "us-east-1" + NBSP: 1.0}))), None),
    "spec: service name 'chat' + zero-width space": (lambda: _plan(_spec(name="chat" + ZWSP)), None),
    "spec: kubernetes context 'prod' + zero-width space": (lambda: _plan(_spec(deploy={
        "target": "kubernetes", "kubernetes": {"clusters": {"aws/us-east-1": {"context": "prod" + ZWSP}}}})), None),
    "spec: kubernetes cluster key with a no-break space": (lambda: _plan(_spec(deploy={
        "target": "kubernetes", "kubernetes": {"clusters": {"aws/us-east-1" + NBSP: {"context": "prod"}}}})), None),
    "keys: 'alice:' (an empty key)": (lambda: _keys("alice:"), all_pass),
    "keys: 'alice:clé' (non-ASCII)": (lambda: _keys("alice:clé"), all_pass),
    "keys: 'alice:k1' + zero-width space": (lambda: _keys("alice:k1" + ZWSP), all_pass),
    "keys: 'alice:k1,bob:k1' (one key, two clients)": (lambda: _keys("alice:k1,bob:k1"), all_pass),
    "keys: 'alice:k1' + CR (a key file with CRLF)": (lambda: _keys("alice:k1\r"), all_pass),
    "keys: ' alice : k1 ' (spaces around)": (lambda: _keys(" alice : k1 "), all_pass),
    "log: model 'chat-8b' + trailing space": (lambda: _log(model="chat-8b "), chat_observed),
    "log: model 'chat-8b' + no-break space": (lambda: _log(model="chat-8b" + NBSP), chat_observed),
    "log: model 'chat-8b' + zero-width space": (lambda: _log(model="chat-8b" + ZWSP),  # said, and visibly
                                                lambda r: not r["observed"] and "\\u200b" in r["notes"][0]),
    "log: region 'us-east-1' + no-break space": (lambda: _log(region="us-east-1" + NBSP),
                                                 lambda r: r["origins"] == ["us-east-1"]),
    "log: header with a no-break space before 'model'": (lambda: _log(
        header="timestamp,\u00a0model,input_tokens,output_tokens,region"), chat_observed),
    "log: a BOM before the header": (lambda: _log(bom=True), chat_observed),
}


# ------------------------------------------------------------------ the driver: tools/hostile_before_after_b.py's
def main() -> None:
    from hostile_before_after_b import drive, one  # beside this file

    if len(sys.argv) > 2 and sys.argv[1] == "--case":
        print(json.dumps(one(CASES, sys.argv[2], exits=(2,))))
        return
    os.environ.setdefault("BEFORE_ROOT", "/work/main")
    drive(Path(__file__).resolve(), CASES, timeout=120)


if __name__ == "__main__":
    main()
