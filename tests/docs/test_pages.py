"""The reading rules of tests/docs/pages.py: which fenced lines are commands, their documented exit
codes, links outside code, and GitHub's heading anchors."""

from __future__ import annotations

import pytest

from tests.docs.pages import REPO, commands, doc_pages, fenced_blocks, heading_anchors, links


def page(tmp_path, text: str):
    path = tmp_path / "page.md"
    path.write_text(text)
    return path


def test_prompts_in_console_and_bash_blocks_are_commands(tmp_path):
    found = commands(page(tmp_path, "intro\n\n```console\n$ hetinfra plan a.yaml \\\n    --out out/a\nprinted\n"
                                     "$ hetinfra apply out/a --yes   # exit 4\nerror: ...\n```\n\n"
                                     "```bash\n$ hetinfra status out/a  # what runs\n```\n\n"
                                     "```text\n$ pulumi destroy\n```\n"))
    assert [(c.line, c.text, c.exit_code) for c in found] == [
        (4, "hetinfra plan a.yaml --out out/a", 0),
        (7, "hetinfra apply out/a --yes", 4),
        (12, "hetinfra status out/a  # what runs", 0),
    ]
    assert found[0].output == ["printed"] and found[1].output == ["error: ..."]


def test_a_shell_block_without_a_prompt_is_refused(tmp_path):
    with pytest.raises(AssertionError, match="no `\\$ ` command"):
        commands(page(tmp_path, "```bash\nhetinfra plan a.yaml\n```\n"))


def test_an_unclosed_block_is_refused(tmp_path):
    with pytest.raises(AssertionError, match="never closed"):
        commands(page(tmp_path, "```console\n$ hetinfra --help\n"))


def test_a_fence_with_text_after_it_is_refused(tmp_path):
    """offers-and-profiles.md closed a block with "``` A cloud other than ...": GitHub showed the prose
    and the Committed prices heading after it as code, up to the next fence."""
    with pytest.raises(AssertionError, match="does not close"):
        fenced_blocks(page(tmp_path, "```text\nwarning: ...\n``` A cloud other than aws\n\n## Next\n```text\nx\n```\n"))


@pytest.mark.parametrize("doc", [p for p in doc_pages() if p.exists()], ids=lambda p: str(p.relative_to(REPO)))
def test_every_block_closes_where_it_seems_to(doc):
    fenced_blocks(doc)


def test_links_in_code_are_not_links(tmp_path):
    text = "[a](x.md) and `[b](y.md)`\n\n```text\n[c](z.md)\n```\n[d](w.md#part)\n"
    assert links(page(tmp_path, text)) == [(1, "x.md"), (6, "w.md#part")]


def test_heading_anchors_follow_github(tmp_path):
    text = "# plan.json reference (`plan_version: 1`)\n## Deploy: SkyPilot & Pulumi\n## Deploy: SkyPilot & Pulumi\n" \
           "```text\n# not a heading\n```\n"
    assert heading_anchors(page(tmp_path, text)) == {
        "planjson-reference-plan_version-1", "deploy-skypilot--pulumi", "deploy-skypilot--pulumi-1"}
