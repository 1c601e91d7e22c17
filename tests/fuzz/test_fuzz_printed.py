"""What a command prints on stdout is printable (round fifteen; hetinfra.cli.common.printable_stdout):
a path or name the user or a variable gave that holds ESC, BEL, a carriage return or a bidi override
is written as its escape, on every line of stdout whatever printed it. `plan --out $'O\\e]0;x\\a'` set
the terminal's title with its "wrote O..." line, as did `simulate`, `status`, `replan` and `feeds list`
(HETINFRA_CACHE_DIR's folder); errors and warnings on stderr went through hetinfra.errors.shown already.
One process per case: the real stdout is the one wrapped (a test runner's capture is left alone)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.conftest import DOCUMENTED_EXITS, budget

REPO = Path(__file__).resolve().parents[2]
#: what a terminal acts on (ESC, BEL, CR, backspace, C1's CSI, bidi overrides, zero-width) among letters
NAME = st.text(st.sampled_from("ab-_.\x1b\x07\r\x08\x9b\u202e\u200b[]0;"), min_size=1, max_size=14).filter(
    lambda n: n not in (".", "..") and n.strip() and not n.startswith("-"))


def _run(args: list[str], cwd: Path, env: dict | None = None) -> tuple[int, str, str]:
    p = subprocess.run([sys.executable, "-m", "hetinfra.cli", *args], cwd=cwd, capture_output=True, timeout=120,
                       env={**os.environ, "HETINFRA_CACHE_DIR": str(cwd / "cache"), **(env or {})})
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def _printable(text: str) -> bool:
    return all(ch.isprintable() or ch == "\n" for ch in text)


@budget(6)
@given(name=NAME)
def test_a_folder_named_with_control_characters_is_printed_as_its_escape(tmp_path_factory, name):
    d = tmp_path_factory.mktemp("printed")
    (d / name).mkdir()
    for args, env in ((["status", name], None), (["feeds", "list"], {"HETINFRA_CACHE_DIR": str(d / name)})):
        code, out, err = _run(args, d, env)
        assert code in DOCUMENTED_EXITS, (args, code, err[-300:])
        assert "Traceback" not in err, err[-800:]
        assert _printable(out), f"{args} printed {out!r}"
        assert _printable(err), f"{args} wrote {err!r}"


def test_plan_and_simulate_print_an_out_folder_as_its_escape(tmp_path):
    out = "O\x1b]0;title\x07\u202e"
    code, printed, err = _run(["plan", str(REPO / "services/chat.yaml"), "--no-verify", "--no-baselines", "--out", out],
                              tmp_path)
    assert code == 0, err
    assert _printable(printed) and "\\x1b]0;title\\x07\\u202e" in printed, printed[-400:]
    code, printed, err = _run(["simulate", out, "--requests", "300"], tmp_path)
    assert code == 0, err
    assert _printable(printed) and "wrote O\\x1b" in printed, printed[-400:]
