"""Tampered plan.json, state.json and router/weights.json (any node replaced by any JSON value, the
file truncated or not JSON): `status`, `apply` and the gateway's table loader end with a documented
exit code or our own error, never a traceback; `--json` stays strict JSON."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hetinfra.errors import HetinfraError
from tests.fuzz.conftest import assert_clean_exit, budget

REPO = Path(__file__).resolve().parents[2]
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-(10 ** 20), 10 ** 20), st.floats(allow_nan=False),
                   st.text(max_size=10), st.just([]), st.just({}), st.just([1, "a"]), st.just({"a": None}))


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """chat.yaml planned once (no verification), with a state.json as `apply` writes it."""
    from click.testing import CliRunner

    from hetinfra.cli import cli

    out = tmp_path_factory.mktemp("fuzzplan") / "out"
    res = CliRunner().invoke(cli, ["plan", str(REPO / "services" / "chat.yaml"), "--out", str(out), "--no-verify",
                                   "--no-baselines"])
    assert res.exit_code == 0, res.output
    plan = json.loads((out / "plan.json").read_text())
    allocs = [dict(a, path="pulumi") for a in plan["allocations"]]
    state = {"state_version": 1, "service": plan["service"], "allocations": allocs,
             "endpoints": {a["deployment_unit"]: ["http://127.0.0.1:9/v1"] for a in allocs}, "pulumi": {},
             "skypilot": {}, "operation": None, "plan_sha256": None}
    (out / "state.json").write_text(json.dumps(state))
    return out


def paths_of(doc, path=()) -> list[tuple]:
    out = [path]
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        out += paths_of(v, path + (k,))
    return out


@st.composite
def tampered(draw, planned_dir: Path):
    name = draw(st.sampled_from(["plan.json", "state.json", "router/weights.json"]))
    text = (planned_dir / name).read_text()
    how = draw(st.sampled_from(["node", "node", "node", "truncate", "garbage"]))
    if how == "truncate":
        return name, text[:draw(st.integers(0, len(text) - 1))]
    if how == "garbage":
        return name, draw(st.sampled_from(["", "null", "[]", "NaN", "{", "\x00\xff", "1e999"]))
    doc = json.loads(text)
    path = draw(st.sampled_from(paths_of(doc)[:400]))
    value = draw(VALUES)
    if not path:
        return name, json.dumps(value)
    cur = doc
    for k in path[:-1]:
        cur = cur[k]
    cur[path[-1]] = value
    return name, json.dumps(doc)


def _copy(planned: Path, tmp_path_factory, case) -> Path:
    out = tmp_path_factory.mktemp("tampered") / "out"
    shutil.copytree(planned, out)
    name, text = case
    (out / name).write_text(text, encoding="utf-8", errors="surrogatepass")
    return out


@budget(40)
@given(data=st.data())
def test_status_and_apply_on_tampered_files(planned, tmp_path_factory, run_cli, monkeypatch, data):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no pulumi: apply stops in preflight at the latest
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))
    out = _copy(planned, tmp_path_factory, data.draw(tampered(planned)))
    code, stdout, err = run_cli("status", str(out), "--json", "--no-refresh")
    assert_clean_exit(code, stdout, err, as_json=True)
    code, stdout, err = run_cli("apply", str(out), "--yes", "--json", "--target", "pulumi")
    assert_clean_exit(code, stdout, err, as_json=True)


@budget(60)
@given(data=st.data())
def test_the_gateway_table_loader_on_tampered_files(planned, tmp_path_factory, data):
    from hetinfra.gateway.table import load_table

    out = _copy(planned, tmp_path_factory, data.draw(tampered(planned)))
    try:
        table = load_table(out)
    except HetinfraError as exc:
        assert exc.exit_code == 2 and "Traceback" not in str(exc)
        return
    for routes in table.models.values():
        for c in routes.classes:
            assert all(w > 0 and w == w and w != float("inf") for _, w in c.weights)


#: each OUT file and commands that read it where it is there (state.json: what runs; plan.json: the plan)
READERS = {"state.json": [["status", "{out}", "--no-refresh"], ["destroy", "{out}", "--yes"],
                          ["replan", str(REPO / "services" / "chat.yaml"), "--state", "{out}"]],
           "plan.json": [["simulate", "{out}", "--requests", "100"],
                         ["replan", str(REPO / "services" / "chat.yaml"), "--state", "{out}"]]}


@budget(10)
@given(name=st.sampled_from(sorted(READERS)), link=st.sampled_from(["nothing", "loop"]), data=st.data())
def test_a_link_in_out_that_leads_nowhere_is_named_not_read_as_absent(planned, tmp_path_factory, run_cli, monkeypatch,
                                                                        name, link, data):
    """OUT/state.json or plan.json a symbolic link to nothing (a share not mounted) or to a loop: Path.exists()
    is False for both, so `status` said "nothing deployed" (exit 0), `destroy` "nothing was deployed from
    here" and `replan` planned as if nothing ran. fileio.present is the test of every such file: the
    reader names the link, exit 2."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    out = tmp_path_factory.mktemp("linked") / "out"
    shutil.copytree(planned, out)
    (out / name).unlink()
    (out / name).symlink_to(out / name if link == "loop" else out.parent / "unmounted" / name)
    args = [a.format(out=out) for a in data.draw(st.sampled_from(READERS[name]))]
    code, stdout, err = run_cli(*args)
    assert code == 2 and "nothing deployed" not in stdout + err, (args, stdout, err)
    assert ("symbolic link to nothing" if link == "nothing" else "Too many levels of symbolic links") in err, err


@pytest.mark.parametrize("name, where, command", [
    ("plan.json", ("models", 0, "name"), ["simulate", "{out}", "--requests", "100", "--json"]),
    ("state.json", ("service",), ["status", "{out}", "--no-refresh", "--json"])])
def test_a_lone_surrogate_escape_in_an_out_file_is_exit_2(planned, tmp_path_factory, run_cli, name, where, command):
    """'\\ud800' alone in plan.json's model name was a UnicodeEncodeError traceback (pydantic); now exit 2."""
    doc = json.loads((planned / name).read_text())
    node = doc
    for k in where[:-1]:
        node = node[k]
    node[where[-1]] = "a\ud800b"
    out = _copy(planned, tmp_path_factory, (name, json.dumps(doc)))
    code, stdout, err = run_cli(*(a.format(out=out) for a in command))
    assert_clean_exit(code, stdout, err, as_json=True)
    assert code == 2 and "half of a UTF-16 surrogate pair" in err, err


@pytest.mark.parametrize("name", ["plan.json", "router/weights.json", "state.json"])
@pytest.mark.parametrize("link", ["nothing", "loop"])
def test_the_gateway_names_a_link_in_out_that_leads_nowhere(planned, tmp_path_factory, name, link):
    """The gateway's reader of OUT (hetinfra.gateway.table) tested its files with Path.exists(): a plan.json
    linked to a loop was passed over (it served from router/weights.json alone), a state.json linked to
    nothing served with no endpoints (503 for every model). fileio.present, as every other reader of OUT."""
    from hetinfra.errors import InvalidInputError
    from hetinfra.gateway.table import load_table

    out = tmp_path_factory.mktemp("gw-linked") / "out"
    shutil.copytree(planned, out)
    if name == "state.json":
        (out / name).write_text("{}")
    (out / name).unlink()
    (out / name).symlink_to(out / name if link == "loop" else out.parent / "unmounted" / "x.json")
    with pytest.raises(InvalidInputError) as exc:
        load_table(out)
    assert ("symbolic link to nothing" if link == "nothing" else "symbolic links") in exc.value.message, exc.value
