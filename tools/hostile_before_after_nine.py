"""Before and after, round nine (docs/trust.md): plan.json's figures read back (a unit's, a model's and the
plan's $/h, a class's rate), the cloud/region keys of deploy's Kubernetes clusters, the gateway VM's type,
the gateway's backend URLs given twice, dataset rows below the first edge under ``outside: drop``, and a request's ``stream`` that is no boolean or ``n`` above 1.
Run as tools/hostile_before_after.py runs its inputs (its BEFORE_BIN / AFTER_BIN
installs, its run() and $HOSTILE_DIR), each case in its own folder:

    BEFORE_BIN=... .venv/bin/python tools/hostile_before_after_nine.py    # about 2 minutes on 2 cores

A table of the outcomes is printed and saved as $HOSTILE_DIR/table.json.
"""
import json
import socket
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_before_after import CHAT, REPO, ROOT, first_error, run, run_table  # noqa: E402

PLAN = ["--no-verify", "--no-baselines"]
SIM = ["--requests", "2000"]


def _refused(*words):
    return lambda rc, err, d: rc == 2 and "Traceback" not in err and all(w in err for w in words)


def _spec(d, deploy):
    """services/chat.yaml with ``deploy`` as its deploy section, as s.yaml."""
    s = json.loads(json.dumps(CHAT))
    s["deploy"] = deploy
    (d / "s.yaml").write_text(yaml.safe_dump(s, sort_keys=False))


def _edited_plan(edit):
    """A case's setup: `plan chat.yaml --out P`, then plan.json edited by ``edit`` (a function of its dict)."""
    def make(who, d):
        run(who, ["plan", str(REPO / "services/chat.yaml"), "--out", "P", *PLAN], d)
        doc = json.loads((d / "P" / "plan.json").read_text())
        edit(doc)
        (d / "P" / "plan.json").write_text(json.dumps(doc, indent=2))
    return make


def _fewer(doc):
    a = doc["allocations"][0]
    a["count"] = a["instances"] = 1


def _kube(*keys):
    return {"target": "kubernetes", "kubernetes": {"clusters": {k: {"context": f"ctx{i}"} for i, k in enumerate(keys)}}}


def _gateway_vm(field, value):
    return {"gateway": {"enabled": True, field: value}}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dataset_below(d, rows):
    """services/chat.yaml sized by a dataset of ``rows`` (input, output) whose input edges start at 1000,
    ``outside: drop``."""
    s = json.loads(json.dumps(CHAT))
    s["models"][0]["demand"]["sizes"] = {"dataset": {"path": "d.csv", "input_edges": [1000, 2000, 4000],
                                                     "output_edges": [0, 100, 500], "outside": "drop"}}
    (d / "d.csv").write_text("input_tokens,output_tokens\n" + "".join(f"{i},{o}\n" for i, o in rows))
    (d / "s.yaml").write_text(yaml.safe_dump(s, sort_keys=False))


# name -> (how the case sets up its folder d, the command line, what handled means)
NINE = {
    "plan.json: a unit's count and instances 4 -> 1, its $/h left at 4's (simulate)": (
        _edited_plan(_fewer), ["simulate", "P", *SIM], _refused("allocations[0].cost_usd_per_hour")),
    "plan.json: a unit's price per instance 1.861 -> 0.01 (simulate)": (
        _edited_plan(lambda p: p["allocations"][0].update(price_per_instance_usd_per_hour=0.01)),
        ["simulate", "P", *SIM], _refused("allocations[0].cost_usd_per_hour")),
    "plan.json: the plan's cost_usd_per_hour 7.444 -> 0.5 (simulate)": (
        _edited_plan(lambda p: p.update(cost_usd_per_hour=0.5)), ["simulate", "P", *SIM],
        _refused("cost_usd_per_hour is 0.5")),
    "plan.json: a model's cost_usd_per_hour 7.444 -> 0 (simulate)": (
        _edited_plan(lambda p: p["models"][0].update(cost_usd_per_hour=0)), ["simulate", "P", *SIM],
        _refused("models[0].cost_usd_per_hour")),
    "plan.json: a class's rate_rps 2.4 -> 100, its share 0.2 of 12 (simulate)": (
        _edited_plan(lambda p: p["models"][0]["classes"][0].update(rate_rps=100)), ["simulate", "P", *SIM],
        _refused("models[0].classes[0].rate_rps")),
    "plan.json: a model's rate_rps 12 -> 1200, its classes' at 12 (simulate)": (
        _edited_plan(lambda p: p["models"][0].update(rate_rps=1200)), ["simulate", "P", *SIM],
        _refused("models[0].classes[0].rate_rps")),
    "deploy.kubernetes.clusters: aws/us-east-1 and aws/us-west2 (mistyped)": (
        lambda w, d: _spec(d, _kube("aws/us-east-1", "aws/us-west2")), ["plan", "s.yaml", *PLAN],
        _refused("deploy.kubernetes.clusters", "did you mean 'us-west-2'")),
    "deploy.kubernetes.clusters: gcp/us-centrall1 alone (mistyped)": (
        lambda w, d: _spec(d, _kube("gcp/us-centrall1")), ["plan", "s.yaml", *PLAN],
        _refused("deploy.kubernetes.clusters", "did you mean 'us-central1'")),
    "deploy.kubernetes.clusters: aws/us-east-1 and gcp/us-central1 (both real)": (
        lambda w, d: _spec(d, _kube("aws/us-east-1", "gcp/us-central1")), ["plan", "s.yaml", *PLAN],
        lambda rc, err, d: rc == 0),
    "deploy.gateway.aws_instance_type: c7i-large": (
        lambda w, d: _spec(d, _gateway_vm("aws_instance_type", "c7i-large")), ["plan", "s.yaml", *PLAN],
        _refused("deploy.gateway.aws_instance_type", "FAMILY.SIZE")),
    "deploy.gateway.aws_instance_type: c7i.lrage": (
        lambda w, d: _spec(d, _gateway_vm("aws_instance_type", "c7i.lrage")), ["plan", "s.yaml", *PLAN],
        _refused("deploy.gateway.aws_instance_type")),
    "deploy.gateway.gcp_machine_type: e2.standard.2": (
        lambda w, d: _spec(d, _gateway_vm("gcp_machine_type", "e2.standard.2")), ["plan", "s.yaml", *PLAN],
        _refused("deploy.gateway.gcp_machine_type")),
    "deploy.gateway.azure_vm_size: D2s_v5 (no Standard_)": (
        lambda w, d: _spec(d, _gateway_vm("azure_vm_size", "D2s_v5")), ["plan", "s.yaml", *PLAN],
        _refused("deploy.gateway.azure_vm_size", "Standard_")),
    "deploy.gateway.aws_instance_type: m7i-flex.large (real)": (
        lambda w, d: _spec(d, _gateway_vm("aws_instance_type", "m7i-flex.large")), ["plan", "s.yaml", *PLAN],
        lambda rc, err, d: rc == 0),
    "dataset edges from 1000, outside: drop, every row 10 tokens in": (
        lambda w, d: _dataset_below(d, [(10, 50)] * 20), ["plan", "s.yaml", *PLAN],
        _refused("d.csv: no request falls inside the dataset's edges")),
}


def nine_case(who, name):
    make, args, handled = NINE[name]
    d = ROOT / who / ("nine-" + str(abs(hash(name)) % 10**6)); d.mkdir(parents=True)
    make(who, d)
    rc, out, err = run(who, args, d, timeout=180)
    note = first_error(err) if rc != 0 else (out.strip().splitlines() or [""])[-1][:110]
    return rc, note, handled(rc, err, d)


def gateway_case(who, spellings):
    """`gateway P --endpoint UNIT=URL ...` with one backend URL in each of ``spellings``; handled: exit 2 before
    serving."""
    d = ROOT / who / ("gw-" + str(abs(hash(spellings)) % 10**6)); d.mkdir(parents=True)
    _edited_plan(lambda p: None)(who, d)
    unit = json.loads((d / "P" / "plan.json").read_text())["allocations"][0]["deployment_unit"]
    flags = [x for s in spellings for x in ("--endpoint", f"{unit}={s}")]
    rc, out, err = run(who, ["gateway", "P", "--port", str(_free_port()), "--no-demand-log", *flags], d, timeout=8)
    if rc == "hang":  # still serving after 8 s: it took the flags
        return "served", "served (no refusal in 8 s)", False
    return rc, first_error(err), rc == 2 and "given again" in err


def body_case(who, key, value):
    """A request with ``key: value`` to `gateway P` (one unit's backend a closed port, no client key): the
    status it answers; handled is a 400 naming ``key``. The gateway is stopped, by its id, however it ends."""
    import os
    import signal
    import subprocess
    import time
    import urllib.error
    import urllib.request

    from hostile_before_after import BINS

    d = ROOT / who / ("body-" + str(abs(hash((key, repr(value)))) % 10**6)); d.mkdir(parents=True)
    _edited_plan(lambda p: None)(who, d)
    unit = json.loads((d / "P" / "plan.json").read_text())["allocations"][0]["deployment_unit"]
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "HETINFRA_API_KEY"}
    gw = subprocess.Popen([BINS[who], "gateway", "P", "--port", str(port), "--no-demand-log", "--endpoint",
                           f"{unit}=http://127.0.0.1:{_free_port()}/v1"], cwd=d, env=dict(env, HETINFRA_CACHE_DIR=str(d / "cache")),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        body = json.dumps({"model": "chat-8b", "prompt": "hi", "max_tokens": 5, key: value}).encode()
        for _ in range(100):
            try:
                req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                             headers={"content-type": "application/json"})
                with urllib.request.urlopen(req, timeout=10) as r:
                    return r.status, "answered", False
            except urllib.error.HTTPError as e:
                text = e.read().decode("utf-8", "replace")
                return e.code, text[:110], e.code == 400 and f'"param":"{key}"' in text
            except OSError:
                time.sleep(0.2)  # not listening yet
        return "no answer", "the gateway did not listen in 20 s", False
    finally:
        gw.send_signal(signal.SIGTERM)
        try:
            gw.wait(timeout=10)
        except subprocess.TimeoutExpired:
            gw.kill()
            gw.wait()


def main():
    cases = [(n, lambda w, n=n: nine_case(w, n)) for n in NINE]
    cases += [("gateway --endpoint U=http://127.0.0.1:9/v1 --endpoint U=http://127.0.0.1:9",
               lambda w: gateway_case(w, ("http://127.0.0.1:9/v1", "http://127.0.0.1:9"))),
              ("gateway --endpoint U=http://127.0.0.1:9/v1 twice",
               lambda w: gateway_case(w, ("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1")))]
    cases += [(f"gateway request {json.dumps({k: v})}", lambda w, k=k, v=v: body_case(w, k, v))
              for k, v in (("stream", "false"), ("stream", "0"), ("n", 8), ("best_of", 4))]
    run_table("round nine", cases)


if __name__ == "__main__":
    main()
