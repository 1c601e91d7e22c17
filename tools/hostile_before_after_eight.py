"""Before and after, round eight (docs/trust.md): regions the spec names outside its infrastructure
(and an adapter's residency pruned away), YAML integers past Python's limit and numbers in another
script's digits, folder variables, profile cells measured twice, a model config's flags, demand-log
numbers, a file a flag names that is a link, and the terminal's size from the environment.
Run as tools/hostile_before_after.py runs its inputs (its BEFORE_BIN / AFTER_BIN
installs, its run() and $HOSTILE_DIR), each case in its own folder:

    BEFORE_BIN=... .venv/bin/python tools/hostile_before_after_eight.py    # about 1 minute on 2 cores

A table of the outcomes is printed and saved as $HOSTILE_DIR/table.json.
"""
import json
import os
import pty
import select
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_before_after import BINS, CHAT, REPO, ROOT, first_error, run, run_table  # noqa: E402

CUSTOM = REPO / "services/custom-gpu"
PLAN = ["--no-verify", "--no-baselines"]
PROFILE_HEADER = "model,gpu,tp,pp,input_tokens,output_tokens,ttft_slo_ms,tpot_slo_ms,max_rps,statistic,vllm_version\n"
ROW = "chat-8b,T1,1,1,1000,300,2000,100,{},{},{}\n"


def _spec(d, **top):
    """services/chat.yaml with ``top``'s sections merged in, as s.yaml."""
    s = json.loads(json.dumps(CHAT))
    for key, value in top.items():
        s[key] = value
    (d / "s.yaml").write_text(yaml.safe_dump(s, sort_keys=False))


def _adapter_in(region):
    return {"adapters": [{"name": "sql", "base": "chat-8b", "source": "acme/sql-lora", "rank": 16,
                          "demand": {"share": 0.2}, "regions": [region]}]}


def _custom(d, *rows, second_file=None):
    """services/custom-gpu copied to d, its profiles.csv holding ``rows`` (and p2.csv ``second_file``)."""
    for f in CUSTOM.iterdir():
        shutil.copy(f, d / f.name)
    (d / "profiles.csv").write_text(PROFILE_HEADER + "".join(ROW.format(*r) for r in rows))
    if second_file:
        (d / "p2.csv").write_text(PROFILE_HEADER + "".join(ROW.format(*r) for r in second_file))
        text = (d / "service.yaml").read_text().replace("profiles: [profiles.csv]", "profiles: [profiles.csv, p2.csv]")
        (d / "service.yaml").write_text(text)


def _linked_profile(who, d):
    """Two `vllm bench serve` results, and p.csv a link to shared/p.csv (a header only)."""
    from hostile_before_after import bench_doc

    for i, (rate, tpot) in enumerate(((1, 40), (2, 150))):
        (d / f"r{i}.json").write_text(json.dumps(bench_doc(rate, 300, tpot)))
    (d / "shared").mkdir()
    (d / "shared" / "p.csv").write_text(PROFILE_HEADER)
    (d / "p.csv").symlink_to("shared/p.csv")


LLAMA_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
            "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}
ESTIMATE = ["estimate", "--architecture", "config.json", "--gpu", "H100", "--input", "500", "--output", "100",
            "--ttft-ms", "2000", "--tpot-ms", "100", "--json"]


def _config(d, **edits):
    (d / "config.json").write_text(json.dumps({**LLAMA_8B, **edits}))


def _refused(*words):
    return lambda rc, err, d: rc == 2 and "Traceback" not in err and all(w in err for w in words)


# name -> (how the case sets up its folder d, the command line, extra environment, what handled means)
EIGHT = {
    "adapter residency regions: [us-eats-1]": (
        lambda w, d: _spec(d, **_adapter_in("us-eats-1")), ["plan", "s.yaml", *PLAN], {},
        _refused("adapters[0].regions", "did you mean 'us-east-1'")),
    "adapter residency regions: [us-west-2] (offered, at us-east-1's prices)": (
        lambda w, d: _spec(d, **_adapter_in("us-west-2")), ["plan", "s.yaml", *PLAN], {},
        lambda rc, err, d: rc == 0),
    "deploy.network_cidrs key aws/us-east1 (mistyped)": (
        lambda w, d: _spec(d, deploy={"network_cidrs": {"aws/us-east1": "10.50.0.0/16"}}),
        ["plan", "s.yaml", "--out", "o", *PLAN], {}, _refused("network_cidrs", "did you mean 'us-east-1'")),
    "deploy.network_cidrs of two fleets overlapping": (
        lambda w, d: _spec(d, deploy={"network_cidrs": {"aws/us-east-1": "10.50.0.0/16", "gcp/us-central1": "10.50.16.0/20"}}),
        ["plan", "s.yaml", "--out", "o", *PLAN], {}, _refused("network_cidrs", "overlap")),
    "spec rate_rps: a 5,000-digit integer": (
        lambda w, d: (d / "s.yaml").write_text((REPO / "services/chat.yaml").read_text().replace(
            "rate_rps: 12", "rate_rps: " + "9" * 5000)), ["plan", "s.yaml", *PLAN], {}, _refused("s.yaml:11:")),
    "spec rate_rps: a 5,000-digit hex integer": (
        lambda w, d: (d / "s.yaml").write_text((REPO / "services/chat.yaml").read_text().replace(
            "rate_rps: 12", "rate_rps: 0x" + "f" * 5000)), ["plan", "s.yaml", *PLAN], {}, _refused("s.yaml:11:")),
    "spec rate_rps: '\uff11\uff12' (fullwidth digits)": (
        lambda w, d: (d / "s.yaml").write_text((REPO / "services/chat.yaml").read_text().replace(
            "rate_rps: 12", "rate_rps: '\uff11\uff12'")), ["plan", "s.yaml", *PLAN], {},
        _refused("s.yaml:11:", "digits of another script", "write 12")),
    "HOME='~': feeds list": (
        lambda w, d: None, ["feeds", "list"], {"HOME": "~", "HETINFRA_CACHE_DIR": "", "XDG_CACHE_HOME": ""},
        _refused("HOME='~'")),
    "HETINFRA_CACHE_DIR='~nosuchuserzz/x': feeds list": (
        lambda w, d: None, ["feeds", "list"], {"HETINFRA_CACHE_DIR": "~nosuchuserzz/x"}, _refused("HETINFRA_CACHE_DIR=")),
    "HF_HUB_CACHE='~nosuchuserzz/hub': estimate --model org/x": (
        lambda w, d: None, ["estimate", "--model", "org/x", "--gpu", "H100", "--input", "10", "--output", "10",
                            "--ttft-ms", "1000", "--tpot-ms", "100"], {"HF_HUB_CACHE": "~nosuchuserzz/hub"},
        _refused("HF_HUB_CACHE=")),
    "profiles.csv: one cell at 4 and at 40 req/s": (
        lambda w, d: _custom(d, (4, "p99", "0.12.0"), (40, "p99", "0.12.0")), ["plan", "service.yaml", *PLAN], {},
        _refused("profiles.csv:3", "profiles.csv:2")),
    "profiles.csv: one cell p99 4 req/s, mean 40 req/s": (
        lambda w, d: _custom(d, (4, "p99", "0.12.0"), (40, "mean", "0.12.0")), ["plan", "service.yaml", *PLAN], {},
        _refused("profiles.csv:3", "mean")),
    "two profile files: one cell at 4 and at 40 req/s": (
        lambda w, d: _custom(d, (4, "p99", "0.12.0"), second_file=[(40, "p99", "0.12.0")]),
        ["plan", "service.yaml", *PLAN], {}, _refused("p2.csv:2", "profiles.csv:2")),
    "COLUMNS=\u00b2 (a superscript two): prices into a pipe": (
        lambda w, d: None, ["prices", "--gpu", "H100", "--limit", "1"], {"COLUMNS": "\u00b2"},
        lambda rc, err, d: rc == 0 and "Traceback" not in err),
    "profile-import --out p.csv, p.csv a link to a shared profile": (
        _linked_profile, ["profile-import", "r0.json", "r1.json", "--gpu", "L4", "--tp", "1", "--ttft-ms", "2000",
                          "--tpot-ms", "100", "--out", "p.csv"], {},
        lambda rc, err, d: rc == 0 and (d / "p.csv").is_symlink() and "m,L4" in (d / "shared" / "p.csv").read_text()),
    "config.json multi_query: \"false\" (a string), no KV heads named": (
        lambda w, d: _config(d, num_key_value_heads=None, multi_query="false"), ESTIMATE, {},
        _refused("multi_query is 'false'")),
    "config.json tie_word_embeddings: \"false\" (a string)": (
        lambda w, d: _config(d, tie_word_embeddings="false"), ESTIMATE, {}, _refused("tie_word_embeddings is 'false'")),
}


def on_terminal(who, args, env):
    """``hetinfra ARGS`` with stdout and stderr a terminal (a pseudo-terminal 100 x 30): (exit, what it printed)."""
    d = ROOT / who / ("tty-" + str(abs(hash((tuple(args), tuple(env.items())))) % 10**6)); d.mkdir(parents=True)
    master, slave = pty.openpty()
    os.set_blocking(master, False)
    e = dict(os.environ, HETINFRA_CACHE_DIR=str(d / "cache"), **env)
    p = subprocess.Popen([BINS[who], *args], cwd=d, stdin=slave, stdout=slave, stderr=slave, env=e,
                         preexec_fn=lambda: __import__("fcntl").ioctl(0, __import__("termios").TIOCSWINSZ,
                                                                         b"\x1e\x00\x64\x00\x00\x00\x00\x00"))
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunks.append(os.read(master, 65536))
            except OSError:  # the child closed the terminal
                break
        elif p.poll() is not None:
            break
    os.close(master)
    return p.wait(timeout=120), b"".join(chunks).decode("utf-8", "backslashreplace")


def terminal_case(who, args, env, needle):
    rc, text = on_terminal(who, args, env)
    if "Traceback" in text:
        return rc, first_error(text), False
    lines = [l for l in text.splitlines() if l.strip()]
    note = f"{len(text)} characters printed, {len(lines)} lines" + ("" if needle in text else f"; no '{needle}'")
    return rc, note, rc == 0 and needle in text


def demand_case(who, respell):
    """`replan --demand-log` of 3 h of traffic (2 req/s) whose cells are written by ``respell``."""
    import time

    d = ROOT / who / ("demand-" + str(abs(hash(respell.__doc__)) % 10**6)); d.mkdir(parents=True)
    run(who, ["plan", str(REPO / "services/chat.yaml"), "--out", "S", *PLAN], d)
    t0 = time.time() - 3 * 3600
    rows = "".join(respell(f"{t0 + i * 0.5:.0f},chat-8b,200,90,\n") for i in range(3 * 3600 * 2))
    (d / "log.csv").write_text("timestamp,model,input_tokens,output_tokens,region\n" + rows)
    rc, out, err = run(who, ["replan", str(REPO / "services/chat.yaml"), "--state", "S", "--demand-log", "log.csv",
                             "--min-history-h", "0.5", "--no-refresh"], d)
    return rc, first_error(err) if rc == 2 else out.strip()[:110], rc == 2 and "log.csv:2" in err


def underscored(row):
    """input_tokens written 2_00"""
    return row.replace(",200,", ",2_00,")


def arabic_digits(row):
    """input_tokens written in Arabic-Indic digits"""
    return row.replace(",200,", ",\u0662\u0660\u0660,")


def eight_case(who, name):
    make, args, env, handled = EIGHT[name]
    d = ROOT / who / ("eight-" + str(abs(hash(name)) % 10**6)); d.mkdir(parents=True)
    make(who, d)
    if "HETINFRA_CACHE_DIR" in env:  # run() sets it to the case's folder: these cases set it (or unset it) themselves
        return _unset_run(who, args, d, env, handled)
    rc, out, err = run(who, args, d, env=env, timeout=120)
    note = first_error(err) if rc != 0 else (out.strip().splitlines() or [""])[-1][:110]
    if (d / "shared" / "p.csv").exists():  # the linked profile: what became of the link and of its file
        note = (f"exit {rc}; p.csv {'still a link' if (d / 'p.csv').is_symlink() else 'now a file'}, the shared "
                f"file {'has the row' if 'm,L4' in (d / 'shared' / 'p.csv').read_text() else 'unchanged'}")
    return rc, note, handled(rc, err, d)


def _unset_run(who, args, d, env, handled):
    """``hetinfra ARGS`` under ``env`` as given (a variable given as "" is unset), HETINFRA_CACHE_DIR included."""
    e = {k: v for k, v in os.environ.items() if k not in ("HETINFRA_CACHE_DIR", "XDG_CACHE_HOME")}
    e.update({k: v for k, v in env.items() if v})
    p = subprocess.run([BINS[who], *args], cwd=d, capture_output=True, text=True, errors="backslashreplace",
                       timeout=120, env=e)
    note = first_error(p.stderr) if p.returncode else (p.stdout.strip().splitlines() or [""])[-1][:110]
    return p.returncode, note, handled(p.returncode, p.stderr, d)


def main():
    cases = [(n, lambda w, n=n: eight_case(w, n)) for n in EIGHT]
    cases += [(f"demand log: {fn.__doc__}", lambda w, f=fn: demand_case(w, f)) for fn in (underscored, arabic_digits)]
    prices = ["prices", "--gpu", "H100", "--limit", "1"]
    cases += [(name, lambda w, a=args, e=env, n=needle: terminal_case(w, a, e, n)) for name, args, env, needle in (
        ("COLUMNS=0: prices on a terminal", prices, {"COLUMNS": "0"}, "p5.48xlarge"),
        ("COLUMNS=3: prices on a terminal", prices, {"COLUMNS": "3"}, "p5.48xlarge"),
        ("COLUMNS=\u00b2 (a superscript two): prices on a terminal", prices, {"COLUMNS": "\u00b2"}, "p5.48xlarge"),
        ("LINES=\u00b2: plan chat.yaml on a terminal", ["plan", str(REPO / "services/chat.yaml"), *PLAN],
         {"LINES": "\u00b2"}, "chat-8b"))]
    run_table("round eight", cases)


if __name__ == "__main__":
    main()
