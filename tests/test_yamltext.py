"""hetinfra.yamltext, the one YAML reader of user files: a character YAML does not allow is named with
its file:line:column on one line, wherever it sits (the spec and every other YAML file alike)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from hetinfra.errors import InvalidInputError
from hetinfra.spec.load import parse_spec_text
from hetinfra.yamltext import read_yaml_mapping

CHAT = (Path(__file__).resolve().parents[1] / "services" / "chat.yaml").read_text()
#: characters PyYAML's reader refuses in a str: C0 controls but tab and newlines, DEL, C1 controls but NEL, U+FFFE
refused = st.sampled_from([c for c in map(chr, [*range(0, 9), 11, 12, *range(14, 32), 127, *range(128, 133),
                                                 *range(134, 160), 0xFFFE])])


@given(bad=refused, line=st.integers(0, CHAT.count("\n") - 1), column=st.integers(0, 8))
def test_a_refused_character_is_named_at_its_line_and_column(bad, line, column):
    lines = CHAT.split("\n")
    column = min(column, len(lines[line]))
    lines[line] = lines[line][:column] + bad + lines[line][column:]
    with pytest.raises(InvalidInputError) as err:
        parse_spec_text("\n".join(lines), "s.yaml")
    assert err.value.message == (f"s.yaml:{line + 1}:{column + 1}: the character U+{ord(bad):04X} is not "
                                 "allowed in YAML; remove it")


def test_another_programs_yaml_file_is_a_mapping_or_refused_naming_it(tmp_path):
    path = tmp_path / "f.yaml"
    for text, expected in [("a: 1\n", {"a": 1}), ("", {})]:
        path.write_text(text)
        assert read_yaml_mapping(path, "thing", max_bytes=1 << 20, hint="h") == expected
    for text, words in [("[1]", "holds a YAML list, not a mapping"), ("a: 1\na: 2\n", "duplicate key 'a'"),
                        ("a: [", "YAML syntax error"), ("a: \x01", ":1:4: the character U+0001")]:
        path.write_text(text)
        with pytest.raises(InvalidInputError, match="thing") as err:
            read_yaml_mapping(path, "thing", max_bytes=1 << 20, hint="h")
        assert words in err.value.message and str(path) in err.value.message and "\n" not in err.value.message


def _rate(spelled: str) -> str:
    return CHAT.replace("rate_rps: 12", f"rate_rps: {spelled}")


@given(n=st.integers(0, 10**6), zeros=st.integers(1, 3))
def test_a_leading_zero_is_refused_in_a_number_field_saying_what_to_write(n, zeros):
    """YAML 1.1 reads 014 as the octal 12: a number field gets the text and says to write 14."""
    spelled = "0" * zeros + str(n)
    with pytest.raises(InvalidInputError) as err:
        parse_spec_text(_rate(spelled), "s.yaml")
    assert err.value.message.startswith("s.yaml:11:7: models[0].demand.rate_rps: ")
    assert err.value.message.endswith(f"write {n}")


@given(parts=st.lists(st.integers(0, 59), min_size=2, max_size=3).filter(lambda p: p[0] > 0))
def test_a_base_60_number_is_refused_in_a_number_field(parts):
    """YAML 1.1 reads 1:30 as 90: never taken as a number hetinfra plans."""
    spelled = ":".join([str(parts[0])] + [f"{p:02d}" for p in parts[1:]])
    with pytest.raises(InvalidInputError, match="base 60"):
        parse_spec_text(_rate(spelled), "s.yaml")


@given(spelled=st.from_regex(r"\A0[0-7]{1,4}\Z") | st.from_regex(r"\A[1-9][0-9]?(:[0-5][0-9]){1,2}\Z"))
def test_a_text_field_keeps_such_a_value_as_written(spelled):
    """`source: 0123` was the int 83 (refused as no text); it is the text 0123."""
    spec = parse_spec_text(CHAT.replace("source: meta-llama/Llama-3.1-8B-Instruct", f"source: {spelled}"), "s.yaml")
    assert spec.models[0].source == spelled


@given(value=st.integers(-10**12, 10**12) | st.floats(allow_nan=False, allow_infinity=False))
def test_numbers_yaml_writes_read_back_as_themselves(value):
    """The forms left out change no number a YAML writer (or a person writing 12, 0.5, 1.0e+3) writes."""
    import yaml

    from hetinfra.yamltext import compose_and_load

    text = yaml.safe_dump({"v": value})
    assert compose_and_load(text, "x")[1] == yaml.safe_load(text) == {"v": value}


def _spelled_int(n: int, base: int, underscores: bool) -> str:
    """A YAML 1.1 integer of about ``n`` digits in ``base`` (10, 16 or 2), with underscores between them."""
    digit = {10: "9", 16: "f", 2: "1"}[base]
    body = "1" + digit * (n - 1) if base == 10 else digit * n
    if underscores:
        body = "_".join(body[i:i + 3] for i in range(0, len(body), 3))
    return {10: "", 16: "0x", 2: "0b"}[base] + body


@given(n=st.integers(1, 6000), base=st.sampled_from([10, 16, 2]), underscores=st.booleans(),
       line=st.sampled_from(["      rate_rps: {}", "name: {}", "            - [{}, 0.25, 0.05]"]))
def test_an_integer_of_any_length_is_read_or_refused_at_its_line(n, base, underscores, line):
    """Python refuses to make an int of over 4,300 digits: a 5,000-digit `rate_rps` was a ValueError
    traceback ("use sys.set_int_max_str_digits()"), and a 5,000-digit hex one was where its error
    printed it. An integer of more than fileio.MAX_INT_DIGITS digits is refused at its line, as the JSON
    readers refuse one; another reads as the spec's reader reads it (a field's own range decides)."""
    from hetinfra.fileio import MAX_INT_DIGITS

    spelled = _spelled_int(n, base, underscores)
    lines = CHAT.split("\n")
    at = next(i for i, text in enumerate(lines) if text.startswith(line.split("{}")[0]))
    lines[at] = line.format(spelled)
    try:
        parse_spec_text("\n".join(lines), "s.yaml")
    except InvalidInputError as exc:
        assert exc.message.startswith(f"s.yaml:{at + 1}:"), exc.message
        assert (n > MAX_INT_DIGITS) == ("any number hetinfra reads has" in exc.message), exc.message
        return
    assert n <= MAX_INT_DIGITS
