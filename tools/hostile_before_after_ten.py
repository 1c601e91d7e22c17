"""Before and after, round ten (docs/trust.md): logs appended to a FIFO or a device, the group APIs'
URL variables, what those APIs answer, the processes a time-limited program leaves, names derived
from a long service name, HETINFRA_AWS_REGIONS and a --feeds PATH. Run as tools/hostile_before_after.py runs its
inputs (its BEFORE_BIN / AFTER_BIN installs, its run() and $HOSTILE_DIR), each case in its own folder:

    BEFORE_BIN=... .venv/bin/python tools/hostile_before_after_ten.py    # about 4 minutes on 2 cores

A case that starts a process (a gateway, a stand-in server) stops it by its id however the case ends;
the processes a case's wrapper scripts start are counted from the ids they write, then stopped by them.
A table of the outcomes is printed and saved as $HOSTILE_DIR/table.json.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_before_after import BINS, CHAT, PY, REPO, ROOT, first_error, run, run_table  # noqa: E402

PLAN = ["--no-verify", "--no-baselines"]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _folder(who, name):
    d = ROOT / who / ("ten-" + str(abs(hash(name)) % 10**6))
    d.mkdir(parents=True)
    return d


def _planned(who, d):
    run(who, ["plan", str(REPO / "services/chat.yaml"), "--out", "P", *PLAN], d)
    return json.loads((d / "P" / "plan.json").read_text())["allocations"][0]["deployment_unit"]


def _alive(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _stop(pids):
    """The processes a case's scripts wrote the ids of that still run: stopped by their ids; how many."""
    left = [p for p in pids if _alive(p)]
    for p in left:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(left)


# ---------------------------------------------------------------- logs appended to
def log_case(who, name, target, cmd):
    """``cmd`` with its log at ``target`` (a FIFO made there, or a device); handled: it ends within 10 s
    with the path refused (exit 2, or replan's warning)."""
    d = _folder(who, name)
    unit = _planned(who, d)
    if target == "FIFO":
        os.mkfifo(d / "FIFO")
    args = {"gateway": ["gateway", "P", "--port", str(_free_port()), "--endpoint", f"{unit}=http://127.0.0.1:9/v1",
                        "--demand-log", target],
            "replan": ["replan", str(REPO / "services/chat.yaml"), "--state", "P", "--log-file", target]}[cmd]
    rc, out, err = run(who, args, d, timeout=10)
    if rc == "hang":
        return "hang", "no answer in 10 s (blocked opening the log, or serving with it)", False
    note = first_error(err) if rc not in (0, 10) else ([l for l in err.splitlines() if "log" in l] or ["ok"])[0][:110]
    return rc, note, "not a regular file" in err and "Traceback" not in err


# ---------------------------------------------------------------- the group APIs (status, replan, apply)
GROUPS = """
import os, sys
from hetinfra.deploy import groups
from hetinfra.errors import HetinfraError
try:
    if os.environ.get("CASE_CLOUD") == "gcp":
        print(groups.gcp_groups([("p", "us-central1-a", "u-head", True)], os.environ))
    else:
        print(groups.azure_groups([("/subscriptions/s/rg/x/virtualMachineScaleSets/u", True)], os.environ))
except HetinfraError as exc:
    print(f"exit {exc.exit_code}: {exc.message}")
"""

ANSWER = """
import http.server, sys
BODY = sys.argv[2].encode()
class H(http.server.BaseHTTPRequestHandler):
    def _a(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200); self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(BODY))); self.end_headers(); self.wfile.write(BODY)
    do_GET = do_POST = _a
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def _groups(who, d, env, timeout=60):
    e = dict(os.environ, GOOGLE_OAUTH_ACCESS_TOKEN="t", AZURE_ACCESS_TOKEN="t", PATH="/usr/bin:/bin", **env)
    p = subprocess.run([PY[who], "-c", GROUPS], cwd=d, env=e, capture_output=True, text=True, timeout=timeout)
    out = (p.stdout.strip().splitlines() or [""])[-1]
    return ("traceback: " + p.stderr.strip().splitlines()[-1][:90]) if p.returncode else out


def url_case(who, name, var, value, secret=None):
    """groups' reader under ``var``=``value``; handled: exit 2 naming the variable (and no password shown)."""
    d = _folder(who, name)
    cloud = "gcp" if "GCP" in var else "azure"
    out = _groups(who, d, {var: value, "CASE_CLOUD": cloud})
    return out.split(":")[0], out[:110], out.startswith(f"exit 2: {var}=") and not (secret and secret in out)


def answer_case(who, name, cloud, body):
    """groups' reader against a stand-in API answering ``body``; handled: counted, or exit 4 naming the field."""
    d = _folder(who, name)
    port = _free_port()
    srv = subprocess.Popen([sys.executable, "-c", ANSWER, str(port), body], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        var = "HETINFRA_GCP_COMPUTE_URL" if cloud == "gcp" else "HETINFRA_AZURE_ARM_URL"
        out = _groups(who, d, {var: f"http://127.0.0.1:{port}", "CASE_CLOUD": cloud})
    finally:
        srv.kill()
        srv.wait()
    return out.split(":")[0], out[:110], out.startswith("exit 4: ") and "malformed answer" in out


# ---------------------------------------------------------------- processes a time-limited program leaves
WRAPPER = "#!/bin/bash\necho $$ >> {d}/pids\nsleep 300 &\necho $! >> {d}/pids\nwait\n"

VLLM = """
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": "llama-3.1-8b", "max_model_len": 131072}]}).encode()
        self.send_response(200); self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def _wrapper(d, name):
    path = d / name
    path.write_text(WRAPPER.format(d=d))
    path.chmod(0o755)
    return path


def _left(d):
    pids = [int(p) for p in (d / "pids").read_text().split()] if (d / "pids").exists() else []
    return pids, _stop(pids)


def profile_case(who, name, stop):
    """`profile` against a stand-in vLLM with ``--vllm-cmd`` a wrapper script that starts a child, ended by
    its --timeout 3 (``stop`` None) or by ``stop`` (a signal) after 3 s; handled: none of the script's
    processes left."""
    d = _folder(who, name)
    vllm = _wrapper(d, "vllm-wrapper")
    port = _free_port()
    srv = subprocess.Popen([sys.executable, "-c", VLLM, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    args = [BINS[who], "profile", "--endpoint", f"http://127.0.0.1:{port}", "--model", "llama-3.1-8b", "--gpu", "L4",
            "--tp", "1", "--out", "p.csv", "--inputs", "512", "--outputs", "128", "--rates", "1,2", "--ttft-ms",
            "1000", "--tpot-ms", "100", "--vllm-cmd", str(vllm), "--timeout", "3" if stop is None else "60",
            "--result-dir", "rd"]
    try:
        time.sleep(0.5)
        p = subprocess.Popen(args, cwd=d, env=dict(os.environ, HETINFRA_CACHE_DIR=str(d / "cache")),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if stop is not None:
            time.sleep(3)
            p.send_signal(stop)
        try:
            _, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
        time.sleep(0.5)
        pids, left = _left(d)
    finally:
        srv.kill()
        srv.wait()
    return p.returncode, f"{first_error(err)[:60]}; {left} of the wrapper's {len(pids)} process(es) left running", \
        bool(pids) and left == 0


def availability_case(who):
    """`plan --availability` with a `gcloud` on PATH that starts a child and never answers (30 s limit);
    handled: none of its processes left."""
    d = _folder(who, "availability")
    _wrapper(d, "gcloud")
    env = {"PATH": f"{d}:{os.environ['PATH']}", "GOOGLE_OAUTH_ACCESS_TOKEN": "", "AZURE_ACCESS_TOKEN": ""}
    rc, out, err = run(who, ["plan", str(REPO / "services/chat.yaml"), "--availability", *PLAN], d, env=env, timeout=120)
    time.sleep(0.5)
    pids, left = _left(d)
    return rc, f"{left} of gcloud's {len(pids)} process(es) left running", bool(pids) and left == 0


# ---------------------------------------------------------------- names derived from the service name
def names_case(who, name, service, target):
    """`plan` of chat.yaml named ``service`` with ``target``'s gateway; handled: every Kubernetes Service name
    and label value in OUT/kubernetes at most 63 characters."""
    d = _folder(who, name)
    s = json.loads(json.dumps(CHAT))
    s["name"] = service
    s["infrastructure"]["clouds"] = ["aws"]
    s["deploy"] = {"target": "kubernetes", "kubernetes": {"clusters": {"aws/us-east-1": {"context": "c"}}}}
    (d / "s.yaml").write_text(yaml.safe_dump(s, sort_keys=False))
    rc, out, err = run(who, ["plan", "s.yaml", "--out", "O", *PLAN], d, timeout=120)
    if rc != 0:
        return rc, first_error(err), False
    too_long = []
    for f in (d / "O" / "kubernetes").rglob("*.yaml"):
        for o in yaml.safe_load_all(f.read_text()):
            if not isinstance(o, dict):
                continue
            meta = o.get("metadata", {})
            if o.get("kind") in ("Service", "EC2NodeClass") and len(meta.get("name", "")) > 63:
                too_long.append(f"{o['kind']} {len(meta['name'])}")
            too_long += [f"label {len(v)}" for v in (meta.get("labels") or {}).values() if len(str(v)) > 63]
    return rc, (f"over 63 characters: {', '.join(sorted(set(too_long)))}" if too_long else "every name and label fits"), \
        not too_long


# ---------------------------------------------------------------- HETINFRA_AWS_REGIONS
def regions_case(who, value):
    """`feeds refresh --source aws` with HETINFRA_AWS_REGIONS=``value`` (the pricing URL a closed port);
    handled: exit 2 naming the variable's entry."""
    d = _folder(who, "regions" + value)
    env = {"HETINFRA_AWS_REGIONS": value, "HETINFRA_AWS_PRICING_URL": f"http://127.0.0.1:{_free_port()}",
           "HETINFRA_AWS_SPOT": "off", "HETINFRA_FEEDS_RETRIES": "0"}
    rc, out, err = run(who, ["feeds", "refresh", "--source", "aws"], d, env=env, timeout=60)
    return rc, first_error(err), rc == 2 and "HETINFRA_AWS_REGIONS entry" in err


# ---------------------------------------------------------------- --feeds PATH
def feeds_case(who, name, word):
    """`prices --feeds WORD` (a loop of links made as ``loop``); handled: exit 2 naming --feeds and the problem."""
    d = _folder(who, name)
    os.symlink("loop2", d / "loop")
    os.symlink("loop", d / "loop2")
    rc, out, err = run(who, ["prices", "--feeds", word, "--limit", "1"], d, timeout=60)
    return rc, first_error(err), rc == 2 and "Traceback" not in err and "no such file" not in err


def main():
    cases = [("gateway --demand-log FIFO", lambda w: log_case(w, "gw-fifo", "FIFO", "gateway")),
             ("gateway --demand-log /dev/null", lambda w: log_case(w, "gw-null", "/dev/null", "gateway")),
             ("replan --log-file FIFO", lambda w: log_case(w, "replan-fifo", "FIFO", "replan"))]
    cases += [(f"{var}={value!r} (status/replan's group reader)", lambda w, n=n, var=var, value=value, s=s:
               url_case(w, n, var, value, s)) for n, (var, value, s) in enumerate((
                   ("HETINFRA_GCP_COMPUTE_URL", "not a url", None),
                   ("HETINFRA_GCP_COMPUTE_URL", "file:///etc/passwd", None),
                   ("HETINFRA_AZURE_ARM_URL", "http://ops:s3cret@127.0.0.1:1", "s3cret")))]
    cases += [(f"{cloud} group API answers {body}", lambda w, cloud=cloud, body=body: answer_case(w, body, cloud, body))
              for cloud, body in (("gcp", '{"managedInstances": "abc"}'),
                                  ("gcp", '{"managedInstances": [], "nextPageToken": 5}'),
                                  ("gcp", '{"managedInstances": [{"lastAttempt": {"errors": 3}}]}'),
                                  ("azure", '{"value": [5]}'),
                                  ("azure", '{"value": [{"properties": {"instanceView": {"statuses": "x"}}}]}'))]
    cases += [("profile --vllm-cmd WRAPPER --timeout 3 (the wrapper starts a child)",
               lambda w: profile_case(w, "profile-timeout", None)),
              ("profile --vllm-cmd WRAPPER, SIGTERM after 3 s", lambda w: profile_case(w, "profile-term", signal.SIGTERM)),
              ("plan --availability, a gcloud on PATH that starts a child and hangs", availability_case)]
    cases += [(f"plan, deploy.target kubernetes, service name of {len(s)} characters",
               lambda w, s=s: names_case(w, f"names{len(s)}", s, "kubernetes")) for s in ("c" * 40, "c" * 60)]
    cases += [(f"feeds refresh --source aws, HETINFRA_AWS_REGIONS={v!r}", lambda w, v=v: regions_case(w, v))
              for v in ("../../../x", "us-east-1?x=1", "US-EAST-1")]
    cases += [(f"prices --feeds {label}", lambda w, label=label, word=word: feeds_case(w, label, word))
              for label, word in (("NAME (300 characters)", "x" * 300), ("'~nosuchuser/offers.csv'", "~nosuchuser/offers.csv"),
                                  ("LOOP (a loop of links)", "loop"))]
    run_table("round ten", cases)


if __name__ == "__main__":
    main()
