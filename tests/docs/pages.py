"""Reading the documentation pages: which files, their fenced shell blocks, their links and headings.

The convention the tests hold the pages to (docs/writing-docs.md says it for writers):

* A fenced block whose info string is ``console`` or ``bash`` is executable documentation: every
  line that starts with ``$ `` is a command (a trailing ``\\`` continues it on the next line); the
  other lines are what it printed.
* A command is documented to exit 0 unless it ends in a ``# exit N`` comment.
* Shell shown only to be read (cron lines, a systemd unit, commands that need a real cloud account)
  goes in ``text``, ``cron``, ``ini`` ... blocks, or in a fenced block with no info string; those are
  not run. A ``console``/``bash`` block without a ``$ `` line is an error: it would look tested and
  not be.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHELL_LANGS = {"console", "bash"}
EXIT_COMMENT = re.compile(r"\s+#\s*exit\s+(\d+)\s*$")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")


def shown(page: Path) -> str:
    """The page's path as messages name it: relative to the repository when it is inside."""
    return str(page.relative_to(REPO)) if page.is_relative_to(REPO) else str(page)


def doc_pages() -> list[Path]:
    """README.md, CHANGELOG.md and every Markdown page under docs/, in a fixed order."""
    return [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").rglob("*.md"))]


@dataclass
class Command:
    page: Path
    line: int  # 1-based line of its `$ ` prompt
    text: str  # the command without the prompt and without a trailing `# exit N`
    exit_code: int
    output: list[str] = field(default_factory=list)  # the lines shown after it
    output_lines: list[int] = field(default_factory=list)  # their 1-based line numbers on the page

    def where(self) -> str:
        return f"{shown(self.page)}:{self.line}"


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    lines: list[str]


def fenced_blocks(page: Path) -> list[Block]:
    blocks, current = [], None
    for number, line in enumerate(page.read_text().splitlines(), 1):
        match = FENCE.match(line)
        if current is None and match:
            current = Block(page, number, match.group(3).lower(), [])
            fence = match.group(2)
        elif current is not None and line.strip().startswith(fence) and not line.strip().strip(fence[0]):
            blocks.append(current)
            current = None
        elif current is not None and line.strip().startswith(fence):
            # "``` text" does not close a block on GitHub: the block runs on over the prose after it
            raise AssertionError(f"{shown(page)}:{number}: a fence with text after it does not close the "
                                 f"block opened at line {current.line}: put the text on a line of its own")
        elif current is not None:
            current.lines.append(line)
    if current is not None:
        raise AssertionError(f"{shown(page)}:{current.line}: fenced block never closed")
    return blocks


def commands(page: Path) -> list[Command]:
    """The page's documented commands, in page order (see the module docstring)."""
    found: list[Command] = []
    for block in fenced_blocks(page):
        if block.lang not in SHELL_LANGS:
            continue
        lines = iter(enumerate(block.lines, block.line + 1))
        in_block: list[Command] = []
        for number, line in lines:
            if not line.startswith("$ "):
                if in_block:
                    in_block[-1].output.append(line)
                    in_block[-1].output_lines.append(number)
                continue
            text = line[2:]
            while text.endswith("\\"):
                text = text[:-1].rstrip() + " " + next(lines)[1].strip()
            wanted = EXIT_COMMENT.search(text)
            in_block.append(Command(page, number, EXIT_COMMENT.sub("", text).strip(),
                                    int(wanted.group(1)) if wanted else 0))
        if not in_block:
            raise AssertionError(f"{shown(page)}:{block.line}: a ```{block.lang} block with no `$ ` "
                                 "command; use ```text for shell that is only to be read (docs/writing-docs.md)")
        found += in_block
    return found


def outside_fences(text: str) -> list[str]:
    """The page's lines with those of fenced blocks blanked (line numbers kept)."""
    out, fence = [], None
    for line in text.splitlines():
        match = FENCE.match(line)
        if fence is None and match:
            fence = match.group(2)
            out.append("")
        elif fence is not None:
            if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence = None
            out.append("")
        else:
            out.append(line)
    return out


def without_code(text: str) -> list[str]:
    """The page's lines with fenced blocks and inline code blanked (their brackets are not links)."""
    return [re.sub(r"`[^`]*`", "``", line) for line in outside_fences(text)]


LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def links(page: Path) -> list[tuple[int, str]]:
    """(line, target) of every Markdown link outside code, also one whose text runs over two lines."""
    text = "\n".join(without_code(page.read_text()))
    return [(text.count("\n", 0, match.start(1)) + 1, match.group(1)) for match in LINK.finditer(text)]


def open_links(page: Path) -> list[tuple[int, str]]:
    """(line, text) of each ``](`` outside code that no Markdown link closes: GitHub shows it as
    text, and test_links would never see its target (a ``](x.md`` with no ``)`` before the row went on)."""
    text = LINK.sub(lambda m: "\n" * m.group(0).count("\n"), "\n".join(without_code(page.read_text())))
    return [(number, line) for number, line in enumerate(text.split("\n"), 1) if "](" in line]


def heading_anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings: lowercased, punctuation other than '-' and '_'
    dropped, spaces to '-', and '-1', '-2' ... on repeats."""
    seen: dict[str, int] = {}
    anchors = set()
    for line in outside_fences(page.read_text()):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        title = re.sub(r"<[^>]+>", "", match.group(1)).replace("`", "")
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)
        slug = "".join(c for c in title.lower() if c.isalnum() or c in " -_").replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors
