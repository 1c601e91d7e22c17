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
