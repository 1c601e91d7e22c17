"""Text from files reaches Rich consoles (a plan's warnings quote CSV cells and paths, `prices` shows
each offer's source, `feeds list` the store's paths): it is printed as written, never read as Rich
markup ('[/]' was a MarkupError traceback, '[bold]o.csv' printed as 'o.csv') and never as an escape
sequence (hetinfra.errors.markup_escaped, shown)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from rich.console import Console

from hetinfra.document import Plan
from hetinfra.errors import InvalidInputError, shown
from hetinfra.plan.summary import render_summary

REPO = Path(__file__).resolve().parents[2]
CHAT = REPO / "services" / "chat.yaml"
texts = st.text(max_size=30) | st.sampled_from(["[/]", "[bold]o.csv", "[red]x[/red]", "\\[/]", "a\x1b[31mb",
                                                "[@click=quit]", "x\\", "[link=file:///etc]y[/link]"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=texts)
def test_a_warning_is_printed_as_written(shared_plan, text):
    doc = Plan.parse(json.loads((shared_plan(CHAT, "--no-baselines", "--no-verify") / "plan.json").read_text()))
    out = io.StringIO()
    render_summary(doc.model_copy(update={"warnings": [text]}), Console(file=out, width=400, color_system=None))
    def squeezed(t: str) -> str:  # Rich wraps and trims lines: compare without whitespace
        return "".join(t.split())

    assert squeezed(f"warning: {shown(text)}") in squeezed(out.getvalue())


@pytest.mark.parametrize("source", ["[/]", "[bold]feed", "x\\"])
def test_prices_shows_a_source_as_written(run_cli, tmp_path, source):
    rows = (REPO / "price_feeds" / "data" / "offers_snapshot.csv").read_text().splitlines()
    row = next(r for r in rows if r.startswith("aws,us-east-1,g6e.xlarge")).split(",")
    row[0], row[-1] = "lab", source
    (tmp_path / "o.csv").write_text(rows[0] + "\n" + ",".join(row) + "\n")
    code, stdout, stderr = run_cli("prices", "--feeds", str(tmp_path / "o.csv"), "--cloud", "lab")
    assert code == 0 and source in stdout, stderr


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(source=st.text(st.characters(min_codepoint=0xA1, max_codepoint=0x2FFF, categories=("Ll", "Lu", "Lo", "Sm")),
                      min_size=1, max_size=6),
       charset=st.sampled_from(["ascii", "latin-1", "cp1252"]))
def test_text_a_terminal_cannot_encode_is_printed_escaped(tmp_path_factory, source, charset):
    """stdout in an encoding without the text's characters (PYTHONIOENCODING=ascii, an old interpreter
    under LANG=C): `prices` of an offers source 'café' and `plan`'s summary ("Mélange") were a
    UnicodeEncodeError traceback; each character it lacks is written as its escape
    (hetinfra.cli.common.encodable_outputs)."""
    from click.testing import CliRunner

    from hetinfra.cli import cli

    rows = (REPO / "price_feeds" / "data" / "offers_snapshot.csv").read_text().splitlines()
    row = next(r for r in rows if r.startswith("aws,us-east-1,g6e.xlarge")).split(",")
    row[0], row[-1] = "lab", source
    csv = tmp_path_factory.mktemp("enc") / "o.csv"
    csv.write_text(rows[0] + "\n" + ",".join(row) + "\n")
    res = CliRunner(charset=charset).invoke(cli, ["prices", "--feeds", str(csv), "--cloud", "lab"])
    assert res.exit_code == 0, repr(res.exception)
    written = source.encode(charset, "backslashreplace").decode(charset)
    assert written in res.output, res.output


@given(name=st.tuples(st.text(max_size=5), st.sampled_from("[]"), st.text(max_size=5)).map("".join))
def test_a_class_name_with_brackets_is_refused(name):
    """simulate's tables (hetinfra.sim.report) print class names through Rich: '[/]a' was a traceback."""
    from hetinfra.spec.load import parse_spec_text
    import yaml

    spec = yaml.safe_load(CHAT.read_text())
    spec["models"][0]["demand"]["sizes"] = {"classes": [{"name": name, "input_tokens": 10, "output_tokens": 10,
                                                         "share": 1.0}]}
    with pytest.raises(InvalidInputError, match="classes\\[0\\].name"):
        parse_spec_text(yaml.safe_dump(spec), "s.yaml")


@given(text=texts | st.text())
def test_an_error_or_warning_prints_no_character_a_terminal_acts_on(text):
    """fail() and echo_warnings print through shown(): an escape sequence, a carriage return or a bidi
    override quoted from a file (a CSV cell, a state.json URL) reached the terminal as is."""
    out = shown(text)
    assert all(ch.isprintable() or ch == "\n" for ch in out)
    assert out == text or "\\" in out


def test_fail_prints_an_escape_sequence_as_written(capsys):
    from hetinfra.cli.common import fail

    with pytest.raises(SystemExit):
        fail(InvalidInputError("cell 'a\x1b[31mb'", hint="x\u202ey"), as_json=False)
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\u202e" not in err and "\\x1b[31m" in err and "\\u202e" in err
