"""Figures that prose quotes from an example's plan, tied to the plan.json key they come from, so a
figure that moves fails the suite (tests/docs/test_figures.py) and tools/gen_docs.py --outputs
rewrites it (docs/writing-docs.md says it for writers).

Shown output is compared with a run (tests/docs/outputs.py), but prose is not: the README said "95%
bounds 485 ms" under a block printing "bound 501 ms", and the multi-region guide quoted a figure that
was still in its plan.json, only under another key (the confirmation's estimate, 247 ms, where the
page meant the decision's, 254 ms). So a quoted figure names its key, in a comment GitHub does not
render, right before it::

    <!-- figures: multi-region -->                  (binds the section, up to the next heading)
    ... the first solution (<!--=fidelity.history[round=1].cost_usd_per_hour-->$16.98/h) missed ...
    ... one pipeline of <!--=mixed-pipeline:allocations[0].stages[*].gpu|+-->H100+H100+L4+H100 ...

A marker is ``<!--=[EXAMPLE:]PATH-->`` followed at once by the figure. EXAMPLE is an example's name
(``chat`` for services/chat.yaml; default: the section's); its plan is the one the README's command
``hetinfra plan services/EXAMPLE.yaml --out out/EXAMPLE`` writes. PATH walks plan.json:

* ``a.b`` keys; ``[key]`` a key with dots in it; ``[2]`` a list's item; ``[gpu=H100]`` the list's item
  whose ``gpu`` is ``H100``; ``[*]`` every item;
* a suffix ``*100`` scales a number (a fraction shown as a percentage); ``|/`` or ``|+`` joins a list
  (``26/26/2/26``, ``H100+H100+L4+H100``); ``|len`` counts it.

A number is compared at the precision it is written with (``$18.54`` two decimals, ``1,108`` none,
with the thousands comma), text as written.

What must be marked: in a paragraph bound to an example, every ``$``, ``%`` and ``ms`` figure that is
no input (a number of the example's spec file; a statistic's level, "95% bound", is none); and any
paragraph that names an example (``services/chat.yaml``, ``chat.yaml``, "the chat example") and
quotes such a figure must be bound. So a new quote cannot slip in untied. A paragraph whose figures
are not today's plan's starts with ``<!-- figures: record -->`` (a dated record of a run: a
benchmark, a stop's before and after) or ``<!-- figures: none -->`` (rules and constants); that
binding is its paragraph's only. ``<!-- figures: end -->`` ends an example's binding before the next
heading.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from tests.docs.pages import outside_fences

SECTION = re.compile(r"<!--\s*figures:\s*([\w./-]+)\s*-->")
MARKER = re.compile(r"<!--=(?:([\w./-]+):)?(\S+?)-->")
NUMBER = re.compile(r"(\$?)(-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)")
TEXT = re.compile(r"[\w+/-]+(?:\.[\w+/-]+)*")
#: a result's figure: a price, a percentage, a latency (after a marker's comment is removed); a
#: statistic's level ("95% bound", "99% prediction") is no result
RESULT = re.compile(r"(?<![\w.])(?:\$\d[\d,]*(?:\.\d+)?|\d[\d,]*(?:\.\d+)?\s?(?:%(?!\s*(?:bound|prediction|confidence))"
                    r"|ms\b))")
#: bindings to no plan: ``record`` (a dated record of a run: a benchmark, a stop's before and after)
#: and ``none`` (the figures are rules or constants, not results)
UNTIED = ("record", "none")
#: an example named in prose (services/chat.yaml, chat.yaml, the chat example): figures there speak of its plan
EXAMPLE = re.compile(r"(?<![\w/-])(?:services/)?([\w/-]+)\.yaml\b|\b([\w-]+) example\b")


@dataclass
class Figure:
    line: int  # 1-based
    start: int  # where the figure starts in the line (after its marker)
    end: int
    plan: str
    path: str
    written: str


class PathError(ValueError):
    pass


def _segments(path: str) -> list[str]:
    """``a.b[x.y][2]`` -> ``["a", "b", "[x.y]", "[2]"]`` (dots inside brackets kept)."""
    out, depth, current = [], 0, ""
    for ch in path:
        if ch == "[" and depth == 0:
            if current:
                out.append(current)
            current, depth = "[", 1
        elif ch == "]" and depth == 1:
            out.append(current + "]")
            current, depth = "", 0
        elif ch == "." and depth == 0:
            if current:
                out.append(current)
            current = ""
        else:
            current += ch
    if current:
        out.append(current)
    return out


def _step(value, segment: str):
    if not segment.startswith("["):
        if not isinstance(value, dict) or segment not in value:
            raise PathError(f"no key {segment!r} (keys: {sorted(value)[:12] if isinstance(value, dict) else type(value).__name__})")
        return value[segment]
    inner = segment[1:-1]
    if isinstance(value, dict):
        if inner not in value:
            raise PathError(f"no key {inner!r} (keys: {sorted(value)[:12]})")
        return value[inner]
    if not isinstance(value, list):
        raise PathError(f"{segment} on a {type(value).__name__}")
    if inner == "*":
        return value
    if re.fullmatch(r"-?\d+", inner):
        return value[int(inner)]
    key, _, wanted = inner.partition("=")
    found = [item for item in value if isinstance(item, dict) and str(item.get(key)) == wanted]
    if len(found) != 1:
        raise PathError(f"{len(found)} item(s) with {key} = {wanted!r} (there are: "
                        f"{[item.get(key) for item in value if isinstance(item, dict)][:12]})")
    return found[0]


def resolve(doc: dict, path: str):
    """The value PATH names in ``doc`` (the grammar is in the module docstring)."""
    suffix = re.search(r"(?:\*(\d+(?:\.\d+)?))?(?:\|([^|\]]*))?$", path)  # not a '|' or '*' inside brackets
    scale, join = suffix.group(1), suffix.group(2)
    path = path[:suffix.start()]
    values, spread = [doc], False
    for segment in _segments(path):
        if segment == "[*]":
            spread = True
            values = [item for value in values for item in (value if isinstance(value, list) else [value])]
            continue
        values = [_step(value, segment) for value in values]
    value = values if spread else values[0]
    if scale:
        value = [v * float(scale) for v in value] if spread else value * float(scale)
    if join == "len":
        return len(value)
    if join:
        return join.join(str(v) for v in value)
    return value


def figures(text: str) -> list[Figure]:
    """Every marked figure of a page, in page order (fenced blocks are not read)."""
    found, bound = [], None
    for number, line in enumerate(outside_fences(text), 1):
        if line.startswith("#"):
            bound = None
        for match in SECTION.finditer(line):
            if match.group(1) not in UNTIED:  # a record's or none's binding is its paragraph's only
                bound = None if match.group(1) == "end" else match.group(1)
        for match in MARKER.finditer(line):
            figure = _figure_after(line[match.end():])
            plan = match.group(1) or bound
            found.append(Figure(number, match.end(), match.end() + (figure.end() if figure else 0),
                                plan or "", match.group(2), figure.group(0) if figure else ""))
    return found


def expected(figure: Figure, value) -> str:
    """``value`` written as ``figure.written`` is: its precision, thousands comma and ``$``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    match = NUMBER.fullmatch(figure.written)
    if not match:
        return str(value)
    sign, digits = match.groups()
    decimals = len(digits.partition(".")[2])
    return sign + format(value, f"{',' if ',' in digits else ''}.{decimals}f")


Plans = Callable[[str], dict]


def check(figure: Figure, plans: Plans) -> str | None:
    """None when the figure is what its key holds today, else what is wrong."""
    if not figure.plan or figure.plan in UNTIED:
        return f"{figure.path}: no example names the plan (write <!--=EXAMPLE:PATH--> or bind the section)"
    if not figure.written:
        return f"{figure.plan}:{figure.path}: no figure right after the marker"
    try:
        want = expected(figure, resolve(plans(figure.plan), figure.path))
    except (PathError, IndexError, TypeError, ValueError) as exc:
        return f"{figure.plan}:{figure.path}: {exc}"
    return None if want == figure.written else f"{figure.plan}:{figure.path} is {want}, the page says {figure.written}"


def filled(text: str, plans: Plans) -> str:
    """``text`` with every marked figure whose key resolves written as today's value."""
    lines = text.split("\n")
    for figure in reversed(figures(text)):
        if check(figure, plans) is None or not figure.written:
            continue
        try:
            want = expected(figure, resolve(plans(figure.plan), figure.path))
        except (PathError, IndexError, TypeError, ValueError):
            continue
        line = lines[figure.line - 1]
        lines[figure.line - 1] = line[:figure.start] + want + line[figure.end:]
    return "\n".join(lines)


def unmarked(text: str, spec_text: Callable[[str], str]) -> list[tuple[int, str, str]]:
    """(line, example, figure) of each ``$``/``%``/``ms`` figure in a paragraph bound to an example that
    has no marker and is no input of the example's spec (``spec_text(example)``)."""
    found = []
    for line, bound, paragraph in paragraphs(text):
        if not bound or bound in UNTIED:
            continue
        inputs = _numbers(spec_text(bound))
        found += [(line, bound, figure) for figure in _quoted(paragraph) if _number(figure) not in inputs]
    return found


def _quoted(paragraph: str) -> list[str]:
    """The result-like figures of a paragraph that no marker ties (link targets left out)."""
    plain = re.sub(r"\]\([^)]*\)", "]", MARKER.sub("", _without_marked(paragraph)))
    return [match.group(0) for match in RESULT.finditer(plain)]


def paragraphs(text: str):
    """(first line, binding or None, text) of each paragraph outside fences: lines up to a blank line,
    a list item, a table row or a heading; a binding lasts from its comment to the next heading."""
    para, found = [], []
    bound = own = None  # the section's binding; a record's or none's, for its one paragraph

    def flush():
        nonlocal own
        if para:
            found.append((para[0][0], own or bound, " ".join(line for _, line in para)))
        para.clear()
        own = None

    for number, line in enumerate(outside_fences(text), 1):
        stripped = line.strip()
        if line.startswith("#"):
            flush()
            bound = None
            continue
        section = SECTION.search(line)
        if not stripped or stripped.startswith(("- ", "* ", "|")) or section:
            flush()
        if section and section.group(1) in UNTIED:
            own = section.group(1)
        elif section:
            bound = None if section.group(1) == "end" else section.group(1)
        if stripped:
            para.append((number, line))
    flush()
    return found


def untied(text: str, examples: Callable[[str], str | None]) -> list[tuple[int, str, list[str]]]:
    """(line, example, figures) of each paragraph outside a binding that names an example
    (``EXAMPLE``; ``examples(NAME)`` its spec's text, None: no such example) and quotes
    ``$``/``%``/``ms`` figures that are neither marked nor inputs of its spec: a claim about a plan
    that no test reads. Bind it (to the example, or to ``record``/``none``) and mark its figures."""
    found = []
    for line, bound, paragraph in paragraphs(text):
        specs = [(name, examples(name)) for pair in EXAMPLE.findall(paragraph) for name in pair if name]
        specs = [(name, spec) for name, spec in specs if spec is not None]
        if bound or not specs:
            continue
        inputs = set().union(*(_numbers(spec) for _, spec in specs))
        quoted = [figure for figure in _quoted(paragraph) if _number(figure) not in inputs]
        if quoted:
            found.append((line, specs[0][0], quoted))
    return found


def _without_marked(line: str) -> str:
    """``line`` with each marked figure (the marker and the figure after it) taken out."""
    out, at = "", 0
    for match in MARKER.finditer(line):
        figure = _figure_after(line[match.end():])
        out += line[at:match.start()]
        at = match.end() + (figure.end() if figure else 0)
    return out + line[at:]


def _figure_after(rest: str) -> re.Match | None:
    """The figure a marker is followed by: a number (``$18.54``, ``1,108``), or text (``26/26/2/26``)."""
    if re.match(r"\d+[/+]\w", rest):
        return TEXT.match(rest)
    return NUMBER.match(rest) or TEXT.match(rest)


def _number(text: str) -> float:
    return float(re.sub(r"[^\d.]", "", text.replace(",", "")) or "nan")


def _numbers(text: str) -> set[float]:
    return {float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*(?:\.\d+)?", text)}
