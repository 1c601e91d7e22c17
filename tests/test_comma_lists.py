"""Comma-separated values (hetinfra.csvtext.comma_items, the one splitter): an empty item (``aws,,gcp``,
a trailing comma) in any comma-list flag or variable is exit 2 naming it; every reader dropped it
silently (``--rates 1,,4`` ran two rates, ``HETINFRA_AWS_REGIONS=us-east-1,`` one region)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from hetinfra.errors import InvalidInputError

#: reader -> (the name its error gives, items it accepts): each reader of a comma list
READERS = {
    "prices --gpu": ("--gpu", ["L4", "H100", "A10G"]),
    "prices --cloud": ("--cloud", ["aws", "gcp", "azure"]),
    "feeds list --source": ("--source", ["aws", "gcp", "azure"]),
    "prices --feeds cache:": ("--feeds", ["aws", "gcp", "azure"]),
    "profile --rates": ("--rates", ["1", "2", "4"]),
    "HETINFRA_AWS_REGIONS": ("HETINFRA_AWS_REGIONS", ["us-east-1", "us-west-2", "eu-west-1"]),
    "HETINFRA_FEEDS_SOURCES": ("HETINFRA_FEEDS_SOURCES", ["aws", "gcp", "azure"]),
}
#: each flag's command line, the list in its place (no network: the cache is an empty folder)
ARGS = {
    "prices --gpu": ["prices", "--gpu", "{}", "--limit", "1"],
    "prices --cloud": ["prices", "--cloud", "{}", "--limit", "1"],
    "feeds list --source": ["feeds", "list", "--source", "{}"],
    "prices --feeds cache:": ["prices", "--feeds", "cache:{}", "--limit", "1"],
    "profile --rates": ["profile", "--endpoint", "http://127.0.0.1:9", "--model", "m", "--gpu", "L4", "--tp", "1",
                        "--out", "p.csv", "--ttft-ms", "100", "--tpot-ms", "10", "--rates", "{}"],
}


def _read(reader: str, text: str, run_cli, cache) -> str | None:
    """The error ``reader`` gives for ``text``, or None where it takes it."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HETINFRA_CACHE_DIR", str(cache))
        if reader in ARGS:
            code, _, err = run_cli(*[a.format(text) for a in ARGS[reader]])
            return err if code == 2 and "item" in err else None
        mp.setenv(reader, text)
        try:
            from hetinfra.price_feeds.config import FeedConfig

            FeedConfig.from_env()
        except InvalidInputError as exc:
            return exc.message
    return None


def test_the_api_keys_skip_an_empty_item():
    """HETINFRA_API_KEY alone keeps its empty items for its reader to skip (csvtext.comma_items says why):
    clients keep their numbers."""
    from hetinfra.clientkeys import parse_client_keys

    assert parse_client_keys("k1,,k3,\r\n") == {"k1": "client0", "k3": "client2"}


def test_comma_items_splits_and_strips():
    from hetinfra.csvtext import comma_items

    assert comma_items(" aws , gcp ", "--source") == ("aws", "gcp")
    assert comma_items("", "--source") == () and comma_items("  ", "--source") == ()


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reader=st.sampled_from(sorted(READERS)), data=st.data())
def test_an_empty_item_is_refused_naming_the_flag(reader, data, run_cli, tmp_path):
    name, items = READERS[reader]
    picked = data.draw(st.lists(st.sampled_from(items), min_size=1, max_size=3, unique=True), label="items")
    at = data.draw(st.integers(0, len(picked)), label="empty at")
    blank = data.draw(st.sampled_from(["", " ", "\t"]), label="blank")
    text = ",".join(picked[:at] + [blank] + picked[at:])
    err = _read(reader, text, run_cli, tmp_path)
    assert err is not None, f"{reader} took {text!r}, dropping its empty item"
    assert name in err and f"item {at + 1} of {len(picked) + 1} is empty" in err and "Traceback" not in err


@pytest.mark.parametrize("reader", ["prices --gpu", "HETINFRA_AWS_REGIONS"])
def test_items_without_empties_are_read(reader, run_cli, tmp_path):
    name, items = READERS[reader]
    assert _read(reader, ",".join(items[:2]), run_cli, tmp_path) is None
