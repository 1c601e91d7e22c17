"""Before and after, round twelve (docs/trust.md): figures of the clouds' answers that are no figures, merges
into one profile CSV at once, spec keys YAML reads as no text, writes the system refuses (a full or read-only
disk) and answers that trickle. Run as tools/hostile_before_after.py runs its inputs (its BEFORE_BIN /
AFTER_BIN installs, its run() and $HOSTILE_DIR), each case in its own folder:

    BEFORE_BIN=/work/main/.venv/bin/hetinfra .venv/bin/python tools/hostile_before_after_twelve.py  # ~6 min

The stand-in servers (a cloud's price list and quota API, a server that trickles) run on loopback in this
process and stop with it. The disk cases mount a small tmpfs (they need root; without it they are reported
as not run) and unmount it however the case ends. The quota cases call the quota reader of `plan
--availability` through the install's own Python, as `plan` calls it (its API's URL is no variable). A
table of the outcomes is printed and saved as $HOSTILE_DIR/table.json ($HOSTILE_ONLY=TEXT: only the cases
whose name holds TEXT).
"""
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_before_after import BINS, REPO, ROOT, first_error, run, run_table  # noqa: E402
from hostile_before_after_b import answer_server  # noqa: E402

PLAN = ["--no-verify", "--no-baselines"]
CHAT = REPO / "services/chat.yaml"
PROFILE_COLUMNS = ("model", "gpu", "tp", "pp", "input_tokens", "output_tokens", "ttft_slo_ms", "tpot_slo_ms", "max_rps",
                   "statistic", "vllm_version")


def _folder(who, name):
    d = ROOT / who / ("twelve-" + str(abs(hash(name)) % 10**6))
    d.mkdir(parents=True)
    return d


def _python(who):
    return str(Path(BINS[who]).parent / "python")


# ---------------------------------------------------------------- stand-in servers
def _serving(doc):
    """A loopback server answering ``doc`` (JSON) to every GET (round three's, hostile_before_after_b); its
    base URL. It stops with this process."""
    return answer_server(json.dumps(doc).encode())


def _trickling(first: bytes, rest: bytes):
    """A loopback server that sends ``first`` at once, then ``rest`` a byte a second; its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)

    def answer(conn):
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(first)
                for i in range(len(rest)):
                    time.sleep(1)
                    conn.sendall(rest[i:i + 1])
            except OSError:
                return

    def serve():
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}"


# ---------------------------------------------------------------- figures of the clouds' answers
def _az_item(sku, price):
    return {"armSkuName": sku, "armRegionName": "eastus", "type": "Consumption", "unitOfMeasure": "1 Hour",
            "currencyCode": "USD", "retailPrice": price, "productName": "Virtual Machines Series",
            "skuName": "x", "meterName": "x"}


def azure_price_case(who, name, price):
    """`prices --feeds live:azure` of a price list whose A100 row is priced ``price`` (a T4 row priced 0.526);
    handled: the A100 row not taken (no offer priced from it)."""
    d = _folder(who, name)
    url = _serving({"Items": [_az_item("Standard_NC24ads_A100_v4", price), _az_item("Standard_NC4as_T4_v3", 0.526)],
                    "NextPageLink": None})
    rc, out, err = run(who, ["prices", "--feeds", "live:azure", "--strict-feeds", "--json"], d, timeout=60,
                       env={"HETINFRA_AZURE_PRICES_URL": url, "HETINFRA_FEEDS_RETRIES": "0"})
    if rc != 0:
        return rc, first_error(err), rc == 4 and "Traceback" not in err
    offers = {o["instance_type"]: o["price_per_hour"] for o in json.loads(out)["offers"] if o["cloud"] == "azure"}
    a100 = offers.get("Standard_NC24ads_A100_v4")
    return rc, f"offers {offers}", a100 is None


QUOTAS = """
import json, sys
from hetinfra.price_feeds.cloud_quotas import gcp_caps
caps, warnings = gcp_caps(["us-central1"], base_url=sys.argv[1], credentials=lambda: ("tok", "proj"))
print(json.dumps([(c.gpu, c.max_gpus, c.purchase) for c in caps]))
"""


def gcp_quota_case(who, name, limit):
    """`plan --availability`'s GCP quota reader (through the install's Python) of a region whose L4 quota is
    ``limit``; handled: no cap from it, no traceback."""
    d = _folder(who, name)
    url = _serving({"quotas": [{"metric": "NVIDIA_L4_GPUS", "limit": limit, "usage": 0}]})
    p = subprocess.run([_python(who), "-c", QUOTAS, url], cwd=d, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        return p.returncode, first_error(p.stderr), False
    caps = json.loads(p.stdout)
    return 0, f"caps {caps}", caps == []


# ---------------------------------------------------------------- merges into one profile CSV at once
def _results(d, k):
    """A `vllm bench serve` sweep of input length 512 + k (tests/perf/test_bench_import.py's result files)."""
    folder = d / f"r{k}"
    folder.mkdir()
    for rate, ttft, tpot in ((1, 300, 40), (2, 320, 60), (4, 400, 90), (8, 900, 150)):
        doc = {"model_id": "m", "request_rate": rate, "completed": 200, "failed": 0, "request_throughput": rate,
               "random_input_len": str(512 + k), "random_output_len": "128", "max_concurrency": None,
               "mean_ttft_ms": ttft, "mean_tpot_ms": tpot}
        (folder / f"{rate}qps.json").write_text(json.dumps(doc))
    return sorted(str(p) for p in folder.glob("*.json"))


def merge_case(who, name, writers, link=False, trials=3):
    """``writers`` `profile-import --merge --out p.csv` at once (p.csv a link to a shared file when ``link``),
    each with a sweep of its own input length, ``trials`` times; handled: every row kept every time."""
    d = _folder(who, name)
    files = [_results(d, k) for k in range(writers)]
    kept = []
    for _ in range(trials):
        target = d / "shared.csv" if link else d / "p.csv"
        target.unlink(missing_ok=True)
        if link:  # the shared file, as a team keeps it: its header, no row yet
            target.write_text(",".join(PROFILE_COLUMNS) + "\n")
            (d / "p.csv").unlink(missing_ok=True)
            os.symlink("shared.csv", d / "p.csv")
        env = dict(os.environ, HETINFRA_CACHE_DIR=str(d / "cache"))
        procs = [subprocess.Popen([BINS[who], "profile-import", "--gpu", "L4", "--tp", "1", "--ttft-ms", "2000",
                                   "--tpot-ms", "100", "--merge", "--out", "p.csv", *f], cwd=d, env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for f in files]
        for p in procs:
            p.wait(120)
        kept.append(len(target.read_text().splitlines()) - 1 if target.exists() else 0)
    return 0, f"rows kept in {trials} trials: {kept} of {writers}", all(k == writers for k in kept)


# ---------------------------------------------------------------- spec keys YAML reads as no text
def key_case(who, name, after, line):
    """`plan` of chat.yaml with ``line`` inserted after the line ``after``; handled: exit 2 at that line."""
    d = _folder(who, name)
    lines = CHAT.read_text().splitlines(keepends=True)
    at = next(i for i, x in enumerate(lines) if x.rstrip("\n") == after) + 1
    (d / "s.yaml").write_text("".join(lines[:at] + [line + "\n"] + lines[at:]))
    rc, out, err = run(who, ["plan", "s.yaml", *PLAN], d, timeout=120)
    where = f"s.yaml:{at + 1}:{len(line) - len(line.lstrip()) + 1}: "
    return rc, first_error(err) if rc else "planned", rc == 2 and where in err


# ---------------------------------------------------------------- writes the system refuses
def _tmpfs(path: Path, *, read_only: bool) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    opts = "size=1m" + (",ro" if read_only else "")
    return subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], capture_output=True).returncode == 0


def _fill(path: Path) -> None:
    """Fill the tmpfs at ``path`` to its last byte."""
    fd = os.open(path / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        for size in (4096, 1):
            while True:
                try:
                    os.write(fd, b"x" * size)
                except OSError:
                    break
    finally:
        os.close(fd)


def disk_case(who, name, args, *, read_only=False, planned=False):
    """``args`` run in a folder with D, a tmpfs filled to its last byte (or mounted read-only); with
    ``planned``, D/O is a copy of a `plan --out`; handled: exit 2 naming a file it could not write."""
    d = _folder(who, name)
    disk = d / "D"
    if planned:
        run(who, ["plan", str(CHAT), "--out", "O", *PLAN], d, timeout=120)
    if not _tmpfs(disk, read_only=False):
        return "not run", "could not mount a tmpfs (needs root)", False
    try:
        if planned:
            subprocess.run(["cp", "-r", str(d / "O"), str(disk / "O")], check=True)
        if read_only:
            subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        else:
            _fill(disk)
        rc, out, err = run(who, args, d, timeout=120)
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)
    return rc, first_error(err) if rc else "exit 0", rc == 2 and "cannot write" in err and "Traceback" not in err


# ---------------------------------------------------------------- answers that trickle
HEAD = b"HTTP/1.1 200 OK\r\n"
TRICKLE = {"body": (HEAD + b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n", b" " * 100000),
           "headers": (HEAD, b"X-A: " + b"a" * 100000)}


def trickle_case(who, name, part, args, env_of, within):
    """``args`` against a server that sends its ``part`` a byte a second (``env_of(url)``: the variables
    naming it); handled: a failure naming it within ``within`` seconds (the deadline, and start-up)."""
    d = _folder(who, name)
    (d / "bin").mkdir()
    (d / "bin" / "vllm").write_text("#!/bin/sh\nexit 0\n")  # `profile` looks for the benchmark client first
    (d / "bin" / "vllm").chmod(0o755)
    sock, url = _trickling(*TRICKLE[part])
    t0 = time.monotonic()
    try:
        env = {"PATH": f"{d / 'bin'}:{os.environ['PATH']}", **env_of(url)}
        rc, out, err = run(who, [a.replace("URL", url) for a in args], d, env=env, timeout=40)
    finally:
        sock.close()
    took = time.monotonic() - t0
    if rc == "hang":
        return rc, "no answer in 40 s", False
    return rc, f"{first_error(err)} ({took:.0f} s)", rc in (2, 4) and took <= within


def main():
    feeds = ["prices", "--feeds", "live:azure", "--strict-feeds", "--limit", "1"]
    azure = lambda url: {"HETINFRA_AZURE_PRICES_URL": url, "HETINFRA_FEEDS_DEADLINE_S": "5",  # noqa: E731
                         "HETINFRA_FEEDS_RETRIES": "0"}
    profile = ["profile", "--endpoint", "URL", "--model", "m", "--gpu", "L4", "--tp", "1", "--out", "p.csv",
               "--rates", "1,2", "--timeout", "5"]
    cases = [("Azure price list: retailPrice true", lambda w: azure_price_case(w, "az-true", True)),
             ("Azure price list: retailPrice false", lambda w: azure_price_case(w, "az-false", False)),
             ("GCP quota: limit \"inf\" (plan --availability)", lambda w: gcp_quota_case(w, "q-inf", "inf")),
             ("GCP quota: limit 1e999 (plan --availability)", lambda w: gcp_quota_case(w, "q-1e999", 1e999)),
             ("GCP quota: limit true (plan --availability)", lambda w: gcp_quota_case(w, "q-true", True))]
    cases += [("8 x profile-import --merge --out p.csv at once", lambda w: merge_case(w, "merge8", 8)),
              ("6 x profile-import --merge at once, p.csv a link to a shared file",
               lambda w: merge_case(w, "merge-link", 6, link=True))]
    cases += [("spec key `1: x` at the top level", lambda w: key_case(w, "k-int", "name: chat", "1: x")),
              ("spec key `null: x` at the top level", lambda w: key_case(w, "k-null", "name: chat", "null: x")),
              ("spec key `on: 3` in infrastructure", lambda w: key_case(w, "k-on", "  spot: false", "  on: 3")),
              ("spec key `12: 5` in a model's demand",
               lambda w: key_case(w, "k-12", "      rate_rps: 12", "      12: 5")),
              ("spec key `2026-01-01: 3` in infrastructure",
               lambda w: key_case(w, "k-date", "  spot: false", "  2026-01-01: 3"))]
    imp = ["profile-import", "--gpu", "L4", "--tp", "1", "--ttft-ms", "2000", "--tpot-ms", "100"]
    cases += [("profile-import --out p.csv on a full disk",
               lambda w: disk_case(w, "full-import", [*imp, "--out", "D/p.csv", *_results(_folder(w, "r-full"), 0)])),
              ("profile-import --out p.csv on a read-only disk",
               lambda w: disk_case(w, "ro-import", [*imp, "--out", "D/p.csv", *_results(_folder(w, "r-ro"), 0)],
                                   read_only=True)),
              ("replan --state OUT --no-refresh, OUT on a full disk",
               lambda w: disk_case(w, "full-replan", ["replan", str(CHAT), "--state", "D/O", "--no-refresh"],
                                   planned=True))]
    cases += [("prices --feeds live:azure (deadline 5 s), the body a byte a second",
               lambda w: trickle_case(w, "t-feed-body", "body", feeds, azure, 15)),
              ("prices --feeds live:azure (deadline 5 s), the headers a byte a second",
               lambda w: trickle_case(w, "t-feed-head", "headers", feeds, azure, 15)),
              ("profile --endpoint URL, /health's headers a byte a second",
               lambda w: trickle_case(w, "t-profile-head", "headers", profile, lambda url: {}, 15)),
              ("profile --endpoint URL, /health's body a byte a second",
               lambda w: trickle_case(w, "t-profile-body", "body", profile, lambda url: {}, 15))]
    only = os.environ.get("HOSTILE_ONLY")  # a part of a case's name: run those cases alone
    run_table("round twelve", [c for c in cases if not only or only in c[0]])


if __name__ == "__main__":
    main()
