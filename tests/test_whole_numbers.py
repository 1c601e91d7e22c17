"""Whole numbers and digits in text another program or a user wrote are ASCII digits, read one way:
``hetinfra.csvtext.whole_number``. ``str.isdigit()`` is true of '²' (a superscript), which int() refuses
(a ValueError traceback where a Pulumi state's group size, an Azure image version or a folder beside OUT
held one), and of '٣', which int() reads as 3; a pattern's ``\\d`` matches '٣' too (`deploy.vllm_version:
"٠.١٢.٠"` was planned and written into the SkyPilot YAML as the image tag ``v٠.١٢.٠``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from hetinfra.csvtext import whole_number
from hetinfra.errors import InvalidInputError, ProviderError

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [*(ROOT / "hetinfra").rglob("*.py"), *(ROOT / "price_feeds").rglob("*.py")]

#: digits Unicode calls digits that are no ASCII digit: superscripts (isdigit, not int), Arabic-Indic,
#: Devanagari and full-width digits (isdigit and int)
OTHER_DIGITS = "²³¹٠١٢٣٤٥٦٧٨٩०१२३४५६७८९０１２３４５６７８９"
texts = st.one_of(st.text(max_size=8), st.text(alphabet="0123456789" + OTHER_DIGITS + " _+-", max_size=6))


@settings(max_examples=300, deadline=None)
@given(texts)
def test_property_a_whole_number_is_ascii_digits_and_nothing_else(text):
    n = whole_number(text)
    if text and all(c in "0123456789" for c in text):
        assert n == int(text)
    else:
        assert n is None


def _group_size(value):
    from hetinfra.deploy.drift import GROUPS, _size

    typ = next(iter(GROUPS))
    outputs = node = {}
    *path, last = GROUPS[typ][0]
    for key in path:
        node[key] = {}
        node = node[key]
    node[last] = value
    return _size({"outputs": outputs}, typ, 3)


@settings(max_examples=60, deadline=None)
@given(texts)
def test_property_a_pulumi_group_size_is_a_whole_number_or_exit_4(text):
    """`status` and `replan` read a group's size from Pulumi's refreshed state: any text is a size or a
    ProviderError naming it, never a ValueError ('²' was one)."""
    try:
        size = _group_size(text)
    except ProviderError as exc:
        assert "not a whole number" in exc.message
    else:
        assert size == int(text) and text.isascii()


@settings(max_examples=60, deadline=None)
@given(st.lists(texts, min_size=1, max_size=4))
def test_property_an_azure_image_version_orders_without_raising(parts):
    """`apply` pins the newest version the ARM API lists: a part that is no ASCII number sorts lowest."""
    from hetinfra.deploy.images import _version_key

    key = _version_key(".".join(parts))
    assert all(k == -1 or (isinstance(k, int) and k >= 0) for k in key)


@settings(max_examples=30, deadline=None)
@given(st.text(alphabet="0123456789" + OTHER_DIGITS + "x.", min_size=1, max_size=5))
def test_property_a_folder_of_any_name_beside_out_is_no_traceback(tmp_path_factory, pid):
    """Every out dir swap removes the copies killed runs left beside OUT (``.OUT.new.<pid>.*``): a folder
    ``.o.new.²`` there was a ValueError traceback in `plan --out o`; one whose pid is not a number is kept."""
    from hetinfra.outdir import staged_dir

    base = tmp_path_factory.mktemp("beside")
    (base / "o").mkdir()
    other = base / f".o.new.{pid}"
    other.mkdir()
    with staged_dir(base / "o") as stage:
        (stage / "plan.json").write_text("{}")
    assert (base / "o" / "plan.json").exists()
    assert other.exists() or whole_number(pid.split(".")[0]) is not None


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["{d}.12.0", "0.{d}.0", "0.12.{d}", "{d}{d}.1"]), st.sampled_from(OTHER_DIGITS))
def test_property_a_vllm_version_or_statistic_of_other_digits_is_refused(shape, digit):
    """The one vLLM version pattern (the spec's deploy.vllm_version, profile rows, --vllm-version) and the
    one statistic pattern take ASCII digits only."""
    from hetinfra.perf.profiles import STATISTIC, check_vllm_version

    with pytest.raises(InvalidInputError, match="is not a version"):
        check_vllm_version(shape.format(d=digit), "vllm_version")
    assert not STATISTIC.match(f"p{digit}") and not STATISTIC.match(f"p9{digit}")


def _digit_tests(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("isdigit", "isdecimal", "isnumeric"):
            found.append(f"{node.lineno}: .{node.attr}()")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "\\d" in node.value:
            found.append(f"{node.lineno}: \\d in {node.value[:40]!r}")
    return found


def test_no_module_tests_digits_the_unicode_way():
    """Every digit test goes through whole_number or a pattern's [0-9]."""
    found = {str(p.relative_to(ROOT)): f for p in SOURCES if (f := _digit_tests(ast.parse(p.read_text())))}
    assert not found, found


def test_a_planted_digit_test_is_found():
    assert _digit_tests(ast.parse("x.isdigit()\nre.match(r'\\d+', y)\n")) == ["1: .isdigit()", "2: \\d in '\\\\d+'"]
