"""CLI flags and paths: numbers of any kind in the float flags, --out paths that clash, sit under a
file or hold odd names. Properties: a documented exit code with a short error, strict --json,
nothing written outside --out, and the out dir either unchanged or complete."""

from __future__ import annotations

import hashlib
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.conftest import assert_clean_exit, budget

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "services" / "chat.yaml"
NUMBERS = st.one_of(st.sampled_from(["nan", "inf", "-inf", "1e999", "-1", "0", "1e-300", "1e300", "abc", "", "5"]),
                    st.floats(allow_nan=True, allow_infinity=True).map(repr))


def tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` with a digest of its bytes ('dir' for folders)."""
    if not root.exists():
        return {}
    out = {}
    for p in sorted(root.rglob("*")):
        out[str(p.relative_to(root))] = "dir" if p.is_dir() else hashlib.sha1(p.read_bytes()).hexdigest()
    return out


@budget(20)
@given(flag=st.sampled_from([("simulate", "--load"), ("simulate", "--burst-cv"), ("estimate", "--ttft-ms"),
                              ("prices", "--max-age-h"), ("replan", "--max-cut-pct"), ("replan", "--min-history-h"),
                              ("plan", "--max-age-h")]), value=NUMBERS)
def test_float_flags_take_finite_numbers_only(tmp_path_factory, run_cli, flag, value):
    command, option = flag
    d = tmp_path_factory.mktemp("flags")
    args = {"simulate": [str(d / "missing-out")], "estimate": ["--model", "llama-3.1-8b", "--gpu", "L4"],
            "prices": ["--json"], "replan": [str(SPEC), "--state", str(d / "out"), "--json"],
            "plan": [str(SPEC), "--json", "--no-verify", "--no-baselines"]}[command]
    code, out, err = run_cli(command, *args, f"{option}={value}")
    assert_clean_exit(code, out, err, as_json="--json" in args)


CLASHES = st.sampled_from(["none", "out-is-file", "under-a-file", "router-is-file", "skypilot-file-inside",
                           "pulumi-aws-is-file", "odd-name", "plan-json-is-dir"])


@budget(8)
@given(clash=CLASHES, again=st.booleans())
def test_out_dirs_are_written_whole_or_not_at_all(tmp_path_factory, run_cli, clash, again):
    base = tmp_path_factory.mktemp("outs")
    out = base / ("we ird ü;$x" if clash == "odd-name" else "out")
    if again:  # an earlier complete plan is there: a failure must leave it as it was
        assert run_cli("plan", str(SPEC), "--out", str(out), "--no-verify", "--no-baselines")[0] == 0
    if clash == "out-is-file":
        out.write_text("x") if not out.exists() else None
    elif clash == "under-a-file":
        (base / "file").write_text("x")
        out = base / "file" / "out"
    elif clash in ("router-is-file", "skypilot-file-inside", "pulumi-aws-is-file", "plan-json-is-dir"):
        out.mkdir(exist_ok=True)
        target = {"router-is-file": out / "router", "skypilot-file-inside": out / "skypilot" / "old.yaml",
                  "pulumi-aws-is-file": out / "pulumi" / "aws", "plan-json-is-dir": out / "plan.json"}[clash]
        if target.is_dir():
            import shutil
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.mkdir() if clash == "plan-json-is-dir" else target.write_text("clash")
    before_base = {k: v for k, v in tree(base).items() if not k.startswith(out.name)}
    before_out = tree(out) if out.is_dir() else None
    code, stdout, err = run_cli("plan", str(SPEC), "--out", str(out), "--no-verify", "--no-baselines", "--json")
    assert_clean_exit(code, stdout, err, as_json=True)
    after_base = {k: v for k, v in tree(base).items() if not k.startswith(out.name)}
    assert after_base == before_base or clash == "under-a-file", "written outside --out"
    if code == 0:
        assert (out / "plan.json").is_file() and (out / "router" / "weights.json").is_file()
        assert (out / "skypilot").is_dir() and any((out / "pulumi").iterdir())
    elif before_out is not None:
        assert tree(out) == before_out, "a failed plan changed the out dir"
