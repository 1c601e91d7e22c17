"""Every field of every example spec mutated by type, range, size and encoding: the loader either
accepts the spec (every number finite) or refuses it with a short located error; `hetinfra plan`
ends with a documented exit code, no traceback and strict --json."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import yaml
from hypothesis import given
from hypothesis import strategies as st

from hetinfra.errors import HetinfraError
from hetinfra.spec.load import load_spec, parse_spec_text
from tests.fuzz.conftest import MAX_ERROR_LINES, assert_clean_exit, budget

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = {p.name: yaml.safe_load(p.read_text()) for p in sorted((REPO / "services").glob("*.yaml"))}

SPECIAL = ["", " ", "3s", "1e999", "-1", ".nan", "$(touch /tmp/x)", "a\nb: c", "-rf", "ünïcödé", "\ufeff",
           "a" * 300, "x; rm -rf /", "`id`", "10.0.0.0/8", "s3://bucket/model", "0x10", "true"]
JUNK = st.one_of(
    st.booleans(), st.none(),
    st.integers(min_value=-(10 ** 30), max_value=10 ** 30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e-300, 1e300, -0.0, 5e-324, 1e12, 1e6 + 1, 0.001]),
    st.text(max_size=40), st.sampled_from(SPECIAL),
    st.lists(st.integers(-5, 10 ** 7), max_size=4),
    st.dictionaries(st.text(max_size=8), st.integers(), max_size=2),
)


def leaf_paths(doc, path=()) -> list[tuple]:
    """Every key path of ``doc`` (mappings and lists), leaves and inner nodes alike."""
    out = [path] if path else []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        out += leaf_paths(v, path + (k,))
    return out


def mutate(doc, path: tuple, value):
    doc = copy.deepcopy(doc)
    cur = doc
    for k in path[:-1]:
        cur = cur[k]
    cur[path[-1]] = value
    return doc


@st.composite
def mutated_specs(draw, examples=tuple(EXAMPLES)):
    name = draw(st.sampled_from(examples))
    doc = EXAMPLES[name]
    for _ in range(draw(st.integers(1, 2))):
        path = draw(st.sampled_from(leaf_paths(doc)))
        value = draw(st.one_of(JUNK, st.just("__duplicate__"), st.just("__grow__")))
        if value == "__grow__":  # size: a long list where one value was
            value = [copy.deepcopy(_at(doc, path))] * draw(st.sampled_from([100, 5000]))
        elif value == "__duplicate__":
            value = _at(doc, path)
        doc = mutate(doc, path, value)
    return name, doc


def _at(doc, path):
    for k in path:
        doc = doc[k]
    return doc


def _finite(doc) -> bool:
    if isinstance(doc, float):
        return math.isfinite(doc)
    items = doc.values() if isinstance(doc, dict) else doc if isinstance(doc, (list, tuple)) else ()
    return all(_finite(v) for v in items)


@budget(80)
@given(mutated_specs())
def test_the_loader_accepts_or_refuses_with_a_short_located_error(case):
    name, doc = case
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    try:
        spec = parse_spec_text(text, name)
    except HetinfraError as exc:
        assert exc.exit_code == 2 and 0 < len(str(exc).splitlines()) <= MAX_ERROR_LINES, str(exc)
        assert name in str(exc)
        return
    assert _finite(spec.model_dump())


ENCODINGS = st.sampled_from([b"\xef\xbb\xbf", b"\xff\xfe", b"\x00", b"\xc3\x28", b"\r\n", b"\t", b"\xe2\x80\xa8"])


@budget(40)
@given(st.sampled_from(sorted(EXAMPLES)), ENCODINGS, st.integers(0, 400))
def test_bytes_of_any_encoding_are_read_or_refused(tmp_path_factory, name, junk, at):
    raw = (REPO / "services" / name).read_bytes()
    path = tmp_path_factory.mktemp("enc") / name
    path.write_bytes(raw[:at] + junk + raw[at:])
    try:
        load_spec(path)
    except HetinfraError as exc:
        assert exc.exit_code == 2 and len(str(exc).splitlines()) <= MAX_ERROR_LINES


@budget(6)
@given(mutated_specs(examples=("chat.yaml",)))
def test_plan_on_a_mutated_spec_ends_cleanly(tmp_path_factory, run_cli, case):
    _, doc = case
    d = tmp_path_factory.mktemp("plan")
    path = d / "service.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    code, out, err = run_cli("plan", str(path), "--json", "--no-verify", "--no-baselines")
    assert_clean_exit(code, out, err, as_json=True)
