"""Every link between the pages (README.md, CHANGELOG.md, docs/) and into the repository resolves:
the file or folder exists, and a #anchor names a heading of its page."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.docs.pages import REPO, doc_pages, heading_anchors, links, open_links


def resolve(page: Path, target: str) -> tuple[Path, str]:
    path, _, anchor = target.partition("#")
    return (page if not path else (page.parent / path)), anchor


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_internal_links_resolve(page):
    if not page.exists():
        pytest.fail(f"{page.relative_to(REPO)} is missing")
    broken = []
    for line, target in links(page):
        if "://" in target or target.startswith("mailto:"):
            continue
        path, anchor = resolve(page, target)
        name = os.path.relpath(path.resolve(), REPO)
        if not path.exists():
            broken.append(f"{page.relative_to(REPO)}:{line}: {target}: no such file")
        elif anchor and (path.suffix != ".md" or anchor not in heading_anchors(path)):
            broken.append(f"{page.relative_to(REPO)}:{line}: {target}: no heading with anchor #{anchor} in {name}")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_link_is_left_open(page):
    """A link whose ``(`` is never closed is no link: its target goes unchecked (commands.md's
    "[what each is](../guides/pulumi.md" ran into the next sentence)."""
    unclosed = [f"{page.relative_to(REPO)}:{line}: {text.strip()[:120]}" for line, text in open_links(page)]
    assert not unclosed, "\n".join(unclosed)


def test_open_links_are_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("See [the guide](guide.md) and [the\nother](other.md#a) and [this](x.md and more.\n")
    assert links(page) == [(1, "guide.md"), (2, "other.md#a")]
    assert [line for line, _ in open_links(page)] == [2]


def test_links_stay_inside_the_repository():
    """Relative links only (they must work on GitHub and in a checkout), never out of the repository."""
    outside = [f"{p.relative_to(REPO)}:{line}: {t}" for p in doc_pages() for line, t in links(p)
               if "://" not in t and not str(resolve(p, t)[0].resolve()).startswith(str(REPO))]
    assert not outside, "\n".join(outside)


def test_anchor_rule_matches_github():
    from tests.docs.pages import heading_anchors as anchors

    page = REPO / "docs" / "reference" / "plan-json.md"
    assert "planjson-reference-plan_version-1" in anchors(page)


def test_every_page_is_on_the_map():
    """docs/index.md links every page under docs/, so none is found only by accident."""
    index = REPO / "docs" / "index.md"
    linked = {resolve(index, target)[0].resolve() for _, target in links(index) if "://" not in target}
    pages = {page.resolve() for page in (REPO / "docs").rglob("*.md")} - {index.resolve()}
    missing = sorted(str(page.relative_to(REPO)) for page in pages - linked)
    assert not missing, f"not linked from docs/index.md: {missing}"
