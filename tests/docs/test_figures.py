"""Figures that README.md and docs/ quote from an example's plan are today's (tests/docs/figures.py;
docs/writing-docs.md), and the examples' comments quote none.

The shown outputs were compared with runs, the prose around them was not: the README's "95% bounds
485 ms and 114 ms" under a block printing 501 and 119, spec.md's mixed pipeline of three H100s and an
L40S split 25/25/25/5 where the plan is H100+H100+L4+H100 split 26/26/2/26, the multi-region guide's
chat TTFT of 247 ms where the plan says 254 (issue 53)."""

from __future__ import annotations

import re

import pytest

from tests.docs.figures import check, figures, filled, resolve, unmarked, untied
from tests.docs.pages import REPO, doc_pages, shown

MARKED = [page for page in doc_pages() if page.exists() and ("<!--=" in page.read_text()
                                                             or "<!-- figures:" in page.read_text())]


def plans_of(example_plans):
    return lambda name: example_plans[name][1]


def spec_of(example_plans):
    return lambda name: example_plans[name][3].read_text()


def test_pages_mark_their_figures():
    assert {"README.md", "reading-a-plan.md", "mixed-pipelines.md", "spec.md"} <= {p.name for p in MARKED}


@pytest.mark.parametrize("page", MARKED, ids=lambda p: str(p.relative_to(REPO)))
def test_quoted_figures_are_todays(page, example_plans):
    text = page.read_text()
    wrong = [f"{shown(page)}:{f.line}: {message}" for f in figures(text)
             if (message := check(f, plans_of(example_plans)))]
    assert not wrong, "\n".join(wrong) + "\nrefresh them: .venv/bin/python tools/gen_docs.py --outputs"
    loose = unmarked(text, spec_of(example_plans))
    assert not loose, "\n".join(f"{shown(page)}:{line}: {figure} quoted from {example}'s plan without a marker "
                                f"(<!--=PATH-->{figure}, docs/writing-docs.md)" for line, example, figure in loose)


def test_a_moved_figure_fails_and_is_refreshed(example_plans):
    """spec.md's stale mixed pipeline planted back (three H100s and an L40S, 25/25/25/5, 18%): the
    check names each figure and its key, the refresh writes today's at the page's precision."""
    plans = plans_of(example_plans)
    page = (REPO / "docs" / "reference" / "spec.md").read_text()
    key = "<!--=mixed-pipeline:allocations[0]."
    today = {f.path: f.written for f in figures(page) if f.plan == "mixed-pipeline"}
    planted = page.replace(key + "gpu-->" + today["allocations[0].gpu"], key + "gpu-->H100+H100+H100+L40S")
    planted = planted.replace(key + "layer_partition|/-->" + today["allocations[0].layer_partition|/"],
                              key + "layer_partition|/-->25/25/25/5")
    planted = planted.replace("savings_pct-->" + today["baselines[gpu=A100-80GB].savings_pct"], "savings_pct-->18")
    wrong = sorted(message for f in figures(planted) if (message := check(f, plans)))
    assert wrong == sorted([
        f"mixed-pipeline:allocations[0].gpu is {today['allocations[0].gpu']}, the page says H100+H100+H100+L40S",
        f"mixed-pipeline:allocations[0].layer_partition|/ is {today['allocations[0].layer_partition|/']}, the page "
        "says 25/25/25/5",
        f"mixed-pipeline:baselines[gpu=A100-80GB].savings_pct is "
        f"{round(float(today['baselines[gpu=A100-80GB].savings_pct'])):d}, the page says 18"])
    assert filled(planted, plans).replace("savings_pct-->22", "savings_pct-->" + today[
        "baselines[gpu=A100-80GB].savings_pct"]) == page


def test_an_unmarked_result_fails(example_plans):
    text = "# a\n\n<!-- figures: mixed-pipeline -->\nIt costs $21.44/h at TPOT 100 ms.\n"
    assert unmarked(text, spec_of(example_plans)) == [(3, "mixed-pipeline", "$21.44")]  # 100 ms is the spec's
    record = text.replace("figures: mixed-pipeline", "figures: record")
    assert unmarked(record, spec_of(example_plans)) == []
    heading = text.replace("It costs", "## b\nIt costs")
    assert unmarked(heading, spec_of(example_plans)) == []  # a heading ends the section


def example_spec(name: str) -> str | None:
    path = REPO / "services" / f"{name}.yaml"
    return path.read_text() if path.is_file() else None


@pytest.mark.parametrize("page", [p for p in doc_pages() if p.exists() and p.name != "CHANGELOG.md"],
                         ids=lambda p: str(p.relative_to(REPO)))
def test_no_paragraph_quotes_an_example_untied(page):
    """A paragraph that names an example (services/NAME.yaml) and quotes a $, % or ms figure that is
    no input of it binds itself: to the example, whose plan its markers then read, or to `record` (a
    dated run) or `none` (rules and constants). CHANGELOG.md is a record throughout."""
    loose = untied(page.read_text(), example_spec)
    assert not loose, "\n".join(f"{shown(page)}:{line}: names services/{name}.yaml and quotes {quoted} untied "
                                "(docs/writing-docs.md, Figures from a plan)" for line, name, quoted in loose)


def test_a_record_binds_its_paragraph_only():
    text = ("<!-- figures: record -->See services/chat.yaml: $9.99/h.\n\n"
            "Today services/chat.yaml plans for $1.23/h.\n")
    assert untied(text, example_spec) == [(3, "chat", ["$1.23"])]


def test_paths_walk_plan_json():
    doc = {"a": [{"gpu": "H100", "x": 0.219, "layers": 26}, {"gpu": "L4", "x": 1.0, "layers": 2}],
           "b": {"aws/us-east-1": {"c.d": 4.5965}}}
    assert resolve(doc, "a[gpu=L4].x") == 1.0
    assert resolve(doc, "a[0].x*100") == pytest.approx(21.9)
    assert resolve(doc, "a[*].gpu|+") == "H100+L4"
    assert resolve(doc, "a[*].layers|/") == "26/2"
    assert resolve(doc, "a|len") == 2
    assert resolve(doc, "b.aws/us-east-1[c.d]") == 4.5965
    text = "<!--=demo:a[0].x*100-->21.90% and <!--=demo:b.aws/us-east-1[c.d]-->$4.60/h, <!--=demo:a[*].gpu|+-->H100+L40S."
    found = figures(text)
    assert [(f.written, check(f, lambda _: doc)) for f in found] == [
        ("21.90", None), ("$4.60", None), ("H100+L40S", "demo:a[*].gpu|+ is H100+L4, the page says H100+L40S")]
    assert filled(text, lambda _: doc).endswith("-->H100+L4.")


def yaml_comments(path):
    """The comment text of a YAML file (whole-line and trailing comments)."""
    out = []
    for line in path.read_text().splitlines():
        hash_at = line.find("#")
        if hash_at >= 0 and (hash_at == 0 or line[hash_at - 1].isspace()):
            out.append(line[hash_at + 1:])
    return "\n".join(out)


@pytest.mark.parametrize("spec", sorted((REPO / "services").rglob("*.yaml")), ids=lambda p: p.name)
def test_example_comments_state_no_plan_results(spec):
    """An example's comments say what it asks and why, never what its plan comes to: the mixed
    pipeline's promised "three H100 stages plus an L40S" outlived the plan it described. A $, % or ms
    figure in a comment must be one of the file's own values."""
    values = re.sub(r"#.*", "", spec.read_text())
    inputs = {float(n) for n in re.findall(r"\d+(?:\.\d+)?", values)}
    results = [m.group(0) for m in re.finditer(r"\$\d+(?:\.\d+)?|\d+(?:\.\d+)?\s?(?:%|ms\b)", yaml_comments(spec))
               if float(re.sub(r"[^\d.]", "", m.group(0))) not in inputs]
    assert not results, f"{spec.relative_to(REPO)}: comments quote {results}, which no value of the file states"
