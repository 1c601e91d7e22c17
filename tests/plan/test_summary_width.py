"""The plan summary at 80 columns (issue 36): the allocation table stacks place, instance, GPUs and
layout in one cell and the objectives table wraps its words, so model, count and $/h never vanish
or shrink to "…". Property over every golden plan and widths 80..200: each allocation's model, count
and $/h appear whole on its row, each objective row names its model, and no cell is cut."""

from __future__ import annotations

import pytest
from rich.console import Console

from hetinfra.document import Plan
from hetinfra.plan.summary import render_summary
from tests.plan.golden_plans import GOLDEN, filled_golden

NAMES = sorted(p.stem for p in GOLDEN.glob("*.json"))


def _render(name: str, width: int) -> tuple[Plan, str]:
    plan = Plan.parse(filled_golden(name))
    console = Console(width=width, record=True, color_system=None)
    render_summary(plan, console)
    return plan, console.export_text()


def _rows(text: str, title: str) -> list[str]:
    """The body lines of the table titled ``title`` (between its header rule and its bottom rule)."""
    lines = text.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith(title))
    body = lines[start:]
    top = next(i for i, x in enumerate(body) if x.startswith("┡"))
    end = next(i for i, x in enumerate(body) if x.startswith("└"))
    return body[top + 1:end]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("width", [80, 100, 200])
def test_model_count_and_price_never_vanish(name, width):
    plan, text = _render(name, width)
    assert max(len(x) for x in text.splitlines()) <= width
    tables = _rows(text, "Allocations") + (_rows(text, "Latency objectives") if "Latency objectives" in text else [])
    assert not any("…" in r for r in tables), text
    rows = [r for r in _rows(text, "Allocations") if r.split("│")[1].strip()]  # a row's first line names its model
    assert len(rows) == len(plan.allocations), text
    for a, row in zip(plan.allocations, rows):
        cells = [c.strip() for c in row.split("│")[1:-1]]
        assert a.model in cells[0].replace(" ", "") or cells[0] in a.model, (cells, a.model)
        assert str(a.count) in cells and f"{a.cost_usd_per_hour:.2f}" in cells, (cells, text)
        assert not any(c.startswith("1.…") for c in cells)
    if "Latency objectives" in text:
        models = [r.split("│")[1].strip() for r in _rows(text, "Latency objectives") if r.split("│")[1].strip()]
        assert models == [m["model"][:len(models[i])] for i, m in enumerate(
            plan.fidelity.model_dump(mode="json")["models"])], text


def test_a_wide_terminal_keeps_one_column_per_field():
    _, text = _render("chat", 160)
    header = next(x for x in text.splitlines() if "cloud/region" in x)
    assert all(col in header for col in ("instance", "GPUs", "vLLM", "n", "$/h", "util"))
