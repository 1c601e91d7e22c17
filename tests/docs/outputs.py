"""What a documented command shows against what it prints: the comparison tests/docs/test_commands.py
makes and the refresh tools/gen_docs.py --outputs writes (docs/writing-docs.md says it for writers).

The lines a page shows after a `$ ` command are an excerpt of what the command prints: each shown line
must be found in the real output, in the shown order, after normalisation:

* timing figures (``0.79s``, ``build 0.00s + solve 0.01s``) and the scratch folder's path are left out;
* whitespace is collapsed (Rich's padding, and where a long line wraps);
* ``...`` (or ``…``) elides: a line that is only ``...`` stands for any lines, and ``...`` inside a
  line for any text (``"message": "3 prerequisites are missing ... (fix: ...)"``).

So a page may show a few lines of a long table, but a figure it shows must be today's.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

ELISION = re.compile(r"\.\.\.|…")
#: timing figures a run measures: seconds with a fraction ("0.79s", "1.2 s"); simulated latencies
#: (milliseconds) are results and stay compared
TIMING = re.compile(r"(?<![\w.])\d+\.\d+ ?s\b")


def normalised(text: str, root: Path | str | None = None) -> str:
    """``text`` with timing figures and the scratch folder ``root`` left out, whitespace collapsed."""
    if root:
        text = text.replace(f"{root}/", "").replace(str(root), ".")
    return " ".join(TIMING.sub("Xs", text).split())


def fragments(line: str, root: Path | str | None = None) -> list[str]:
    """The parts of a shown line that must appear, in order (split at its elisions)."""
    return [part for part in (normalised(piece, root) for piece in ELISION.split(line)) if part]


@dataclass
class Drift:
    """The first shown line that a real run does not print (at the shown place)."""

    line: int  # index into the shown lines
    shown: str
    nearest: str  # the real line most like it, from where the shown lines before it were found

    def message(self, where: str, command: str) -> str:
        return (f"{where}: `{command}` no longer prints what the page shows\n  shown: {self.shown.strip()}\n"
                f"  real:  {self.nearest.strip()}\n"
                "refresh the page's output: .venv/bin/python tools/gen_docs.py --outputs")


class Printed:
    """A command's real output, normalised as one stream (whitespace collapsed across lines), with
    where each of its lines starts in that stream."""

    def __init__(self, text: str, root: Path | str | None = None):
        self.root = root
        self.lines: list[tuple[int, str, str]] = []  # (offset in the stream, line as printed, normalised)
        offset = 0
        for line in text.splitlines():
            norm = normalised(line, root)
            if norm:
                self.lines.append((offset, line.replace(f"{root}/", "") if root else line, norm))
                offset += len(norm) + 1
        self.stream = " ".join(norm for _, _, norm in self.lines)

    def find(self, shown: str, start: int) -> int | None:
        """Where the shown line ends in the stream (searched from ``start``), or None."""
        at = start
        for part in fragments(shown, self.root):
            found = self.stream.find(part, at)
            if found < 0:
                return None
            at = found + len(part)
        return at

    def nearest(self, shown: str, start: int) -> str:
        """The printed line from ``start`` on most like ``shown`` (difflib's ratio, normalised)."""
        want = normalised(shown, self.root)
        after = [(raw, norm) for offset, raw, norm in self.lines if offset + len(norm) > start] or \
            [(raw, norm) for _, raw, norm in self.lines]
        if not after:
            return ""
        return max(after, key=lambda pair: difflib.SequenceMatcher(None, want, pair[1]).ratio())[0]


def drift(shown: list[str], printed: str, root: Path | str | None = None) -> Drift | None:
    """None when every shown line is found in ``printed`` in the shown order, else the first that is not."""
    real, at = Printed(printed, root), 0
    for index, line in enumerate(shown):
        end = real.find(line, at)
        if end is None:
            return Drift(index, line, real.nearest(line, at))
        at = end
    return None


#: how alike (difflib's ratio, normalised) a shown line and a printed line must be to be the same line
#: in a refresh; a shown line with no printed line this alike is no longer printed and is dropped
SAME_LINE = 0.5


def refreshed(shown: list[str], printed: str, root: Path | str | None = None) -> list[str]:
    """``shown`` made true again: shown lines still printed (elisions included) are kept as written,
    one that changed becomes the printed line it is aligned with, one no longer printed goes. The
    alignment keeps the shown order and maximises the lines' total likeness, so an excerpt stays an
    excerpt of the same rows."""
    if drift(shown, printed, root) is None:
        return list(shown)
    real = Printed(printed, root)
    rows = [(raw, norm) for _, raw, norm in real.lines]
    kept = [index for index, line in enumerate(shown) if fragments(line, root) and not _only_elision(line)]

    def likeness(line: str, norm: str) -> float:
        if Printed(norm).find(line, 0) is not None:
            return 2.0  # printed as shown (its elisions matched): keep the shown text
        want = normalised(line, root)
        same_label = 0.5 if _label(want) and _label(want) == _label(norm) else 0.0  # a row's name outweighs its figures
        return difflib.SequenceMatcher(None, want, norm).ratio() + same_label

    score = [[likeness(shown[i], norm) for _, norm in rows] for i in kept]
    best = [[0.0] * (len(rows) + 1) for _ in range(len(kept) + 1)]
    for a in range(1, len(kept) + 1):
        for b in range(1, len(rows) + 1):
            pair = score[a - 1][b - 1]
            best[a][b] = max(best[a - 1][b], best[a][b - 1],
                             best[a - 1][b - 1] + pair if pair >= SAME_LINE else 0.0)
    aligned: dict[int, int | None] = {}
    a, b = len(kept), len(rows)
    while a > 0:
        pair = score[a - 1][b - 1] if b > 0 else 0.0
        if b > 0 and pair >= SAME_LINE and best[a][b] == best[a - 1][b - 1] + pair:
            aligned[kept[a - 1]], a, b = b - 1, a - 1, b - 1
        elif b > 0 and best[a][b] == best[a][b - 1]:
            b -= 1
        else:
            aligned[kept[a - 1]], a = None, a - 1
    out = []
    for index, line in enumerate(shown):
        if index not in aligned:
            out.append(line)  # an elision, or a blank line
        elif aligned[index] is not None:
            out.append(line if score[kept.index(index)][aligned[index]] == 2.0 else rows[aligned[index]][0].rstrip())
    return out


def _label(norm: str) -> str:
    """What names a line: a table row's first cell, else the text before a ':' (``"after_usd_per_hour":``,
    ``chat:``), else nothing."""
    cells = [cell.strip() for cell in re.split(r"[│┃]", norm) if cell.strip()]
    if norm.startswith(("│", "┃")) and cells:
        return cells[0]
    return norm.split(":")[0] if ":" in norm else ""


def _only_elision(line: str) -> bool:
    return not ELISION.sub("", line).strip()
