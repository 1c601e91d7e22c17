"""`--feeds PATH` (plan, prices, replan) is read by the rule of the path flags
(hetinfra.envpaths.word_path: ``~`` expanded as in the folder variables, then path_problem): any path
word is offers or exit 2 naming --feeds, never an OSError or RuntimeError traceback (a name over 255
bytes, ``~nobody/x.csv``) nor "no such file or directory" for a loop of links."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetinfra.errors import HetinfraError
from hetinfra.price_feeds.load import load_offers

PART = st.one_of(st.text("abcxyz.-_", min_size=1, max_size=8),
                 st.integers(200, 400).map(lambda n: "y" * n),  # a name over 255 bytes, or near it
                 st.sampled_from(["loop", "x\udcff", "\u00e9t\u00e9", "..", "."]))


@settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(PART, min_size=1, max_size=3), head=st.sampled_from(["", "~/", "~nosuchuser12/", "/"]),
       tail=st.sampled_from(["", ".csv"]))
def test_any_feeds_path_word_is_offers_or_exit_2_naming_the_flag(tmp_path, monkeypatch, parts, head, tail):
    monkeypatch.chdir(tmp_path)
    if not os.path.lexists(tmp_path / "loop"):
        os.symlink("loop2", tmp_path / "loop")
        os.symlink("loop", tmp_path / "loop2")
    word = head + "/".join(parts) + tail
    if word.split(":", 1)[0] in ("snapshot", "embedded", "live", "cache"):
        return
    try:
        load_offers(word)
    except HetinfraError as exc:
        assert exc.exit_code == 2
        if head == "" and parts[0] == "loop":  # under the loop of links made here: named as one
            assert "no such file" not in exc.message, exc.message
