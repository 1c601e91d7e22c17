"""The round trips docs/regions.md quotes from the network table are the table's (it said 70.7 ms for
us-east-1 to eu-west-1 after the table's positions moved it to 71.1)."""

from __future__ import annotations

import re

from hetinfra.price_feeds.network import round_trip_ms
from tests.docs.pages import REPO


def test_quoted_round_trips_are_the_tables():
    page = " ".join((REPO / "docs" / "regions.md").read_text().split())
    quoted = re.findall(r"\(([a-z]+-[a-z]+\d?-?\d*)\)[^()]*?\(([a-z]+-[a-z]+\d?-?\d*)\) comes out at ([\d.]+) ms", page)
    quoted += re.findall(r"([a-z]+-[a-z]+\d+) to ([a-z]+-[a-z]+-\d+) at ([\d.]+) ms", page)
    assert len(quoted) == 2, quoted
    wrong = [(a, b, ms, round_trip_ms(a, b)) for a, b, ms in quoted if float(ms) != round_trip_ms(a, b)]
    assert not wrong, f"docs/regions.md quotes (origin, region, ms, the table's ms): {wrong}"
