#!/usr/bin/env python3
"""Print the four counts issue 34 ("Seams for what comes next") asks to be reported before and after
a change, over the installed package's modules (hetinfra/, solver/, price_feeds/, stacks/):

* document reads: string-key reads (``x["key"]``, ``x.get("key")``) of any field name of plan.json or
  state.json, keys the spec shares and everyday words included, outside the documents' own modules
  and the writers (tests/test_document_access.py: wide_reads);
* ``Plan | dict`` signatures: function parameters or returns annotated with a union of the plan
  model and a dict;
* functions over 50 lines (``def`` to the end of its body, decorators aside);
* files over 400 lines.

    .venv/bin/python tools/seam_counts.py             # the four counts
    .venv/bin/python tools/seam_counts.py --detail    # and what each count is made of
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def plan_or_dict_signatures(tree: ast.AST) -> list[str]:
    """``line: function`` of each annotation naming both the plan model and ``dict`` in one union."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        args = node.args
        annotations = [a.annotation for a in [*args.posonlyargs, *args.args, *args.kwonlyargs,
                                              *filter(None, [args.vararg, args.kwarg])]] + [node.returns]
        for annotation in filter(None, annotations):
            text = (annotation.value if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str)
                    else ast.unparse(annotation)).replace(" ", "")  # a quoted annotation too
            if "|" in text and {"Plan", "dict"} <= set(text.replace("[", "|").replace("]", "|").split("|")):
                out.append(f"{node.lineno}: {node.name}")
    return out


def long_functions(tree: ast.AST, limit: int = 50) -> list[str]:
    return [f"{node.lineno}: {node.name} ({node.end_lineno - node.lineno + 1})" for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > limit]


def counts(repo: Path = REPO) -> dict[str, dict[str, list[str]]]:
    """count name -> module -> its items."""
    sys.path.insert(0, str(REPO))  # this checkout's checks, whichever tree they count
    from tests.test_document_access import wide_reads
    from tests.test_imports import modules, parsed

    found: dict[str, dict[str, list[str]]] = {"document reads": wide_reads(repo), "Plan | dict signatures": {},
                                              "functions over 50 lines": {}, "files over 400 lines": {}}
    for name, path in modules(repo).items():
        tree = parsed(path)
        for label, items in (("Plan | dict signatures", plan_or_dict_signatures(tree)),
                             ("functions over 50 lines", long_functions(tree))):
            if items:
                found[label][name] = items
        lines = len(path.read_text().splitlines())
        if lines > 400:
            found["files over 400 lines"][name] = [f"{lines} lines"]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--detail", action="store_true", help="list what each count is made of")
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to count (default: this one)")
    args = parser.parse_args(argv)
    for label, by_module in counts(args.repo.resolve()).items():
        print(f"{label}: {sum(len(items) for items in by_module.values())}")
        if args.detail:
            for module, items in sorted(by_module.items()):
                print(f"  {module} ({len(items)}): {', '.join(items)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
