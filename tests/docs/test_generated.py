"""The generated reference pages (docs/reference/cli.md, exit-codes.md) are what tools/gen_docs.py
writes from the code today."""

from __future__ import annotations

import importlib.util

import click

from tests.docs.pages import REPO


def load_tool():
    spec = importlib.util.spec_from_file_location("gen_docs", REPO / "tools" / "gen_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_reference_pages_are_current():
    tool = load_tool()
    stale = [str(path.relative_to(REPO)) for path, text in tool.pages().items()
             if not path.exists() or path.read_text() != text]
    assert not stale, f"stale: {stale}; run: .venv/bin/python tools/gen_docs.py"


def test_every_command_has_a_section():
    from hetinfra.cli import cli

    page = (REPO / "docs" / "reference" / "cli.md").read_text()
    assert all(f"\n## hetinfra {name}\n" in page for name in cli.commands)


def test_every_option_says_what_it_does():
    """The reference is --help: an option with no help is a published flag nobody documented
    (gateway's --connect-timeout-s and --log-level printed only their defaults)."""
    from hetinfra.cli import cli

    tool = load_tool()
    bare = [f"{ctx.command_path} {'/'.join(p.opts)}" for ctx in tool.walk(cli, "hetinfra")
            for p in ctx.command.params if isinstance(p, click.Option) and not p.hidden and not p.help]
    assert not bare, f"options without help: {bare}"


def test_check_mode_fails_on_a_stale_page(tmp_path, monkeypatch):
    tool = load_tool()
    stale = tmp_path / "cli.md"
    stale.write_text("old\n")
    monkeypatch.setattr(tool, "pages", lambda: {stale: "new\n"})
    monkeypatch.setattr(tool, "REPO", tmp_path)
    assert tool.main(["--check"]) == 1
    assert tool.main([]) == 0 and stale.read_text() == "new\n"
    assert tool.main(["--check"]) == 0
