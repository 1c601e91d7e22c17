"""The feed settings read from the environment (price_feeds.config.FeedConfig.from_env): any text in
a number or mode variable gives a usable setting or exit 2 naming the variable, before any feed is
asked (a deadline of -1 was exit 4 blaming every feed, nan no deadline at all, a retry count of -5
taken as 0, HETINFRA_AWS_SPOT=maybe as 'on')."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from hetinfra.errors import InvalidInputError
from hetinfra.price_feeds.config import AWS_SPOT_MODES, MAX_DEADLINE_S, MAX_RETRIES, FeedConfig

numberish = st.one_of(st.text(max_size=8).filter(lambda t: "\x00" not in t), st.integers(-10**6, 10**6).map(str),
                      st.floats(allow_nan=True, allow_infinity=True).map(repr),
                      st.sampled_from(["nan", "inf", "-inf", "1e400", "-0", "0", " 3 ", "1_0", "0x10", "1.0"]))


def _from_env(var: str, text: str) -> FeedConfig:
    with pytest.MonkeyPatch.context() as mp:  # one example's variable only
        mp.setenv(var, text)
        return FeedConfig.from_env()


@settings(max_examples=200)
@given(var=st.sampled_from(["HETINFRA_FEEDS_RETRIES", "HETINFRA_FEEDS_DEADLINE_S"]), text=numberish)
def test_a_number_variable_is_in_range_or_refused_naming_it(var, text):
    try:
        cfg = _from_env(var, text)
    except InvalidInputError as exc:
        assert exc.message.startswith(f"{var}=") and exc.exit_code == 2
        return
    if text.strip():
        assert isinstance(cfg.retries, int) and 0 <= cfg.retries <= MAX_RETRIES
        assert math.isfinite(cfg.deadline_s) and 0 < cfg.deadline_s <= MAX_DEADLINE_S
        cfg.http()  # the client takes what was accepted


@settings(max_examples=100)
@given(text=st.text(min_size=1, max_size=10).filter(lambda t: "\x00" not in t))
def test_aws_spot_is_one_of_its_modes_or_refused(text):
    try:
        cfg = _from_env("HETINFRA_AWS_SPOT", text)
    except InvalidInputError as exc:
        assert exc.message.startswith("HETINFRA_AWS_SPOT=")
        return
    assert cfg.aws_spot in AWS_SPOT_MODES


@pytest.mark.parametrize("var", ["HETINFRA_AWS_PRICING_URL", "HETINFRA_AZURE_PRICES_URL", "HETINFRA_GCP_BILLING_URL"])
def test_an_api_url_is_http(monkeypatch, var):
    monkeypatch.setenv(var, "file:///etc/passwd")
    with pytest.raises(InvalidInputError, match=f"{var}='file:///etc/passwd': not an http"):
        FeedConfig.from_env()
    monkeypatch.setenv(var, "https://example.test")
    FeedConfig.from_env()


def _aws_regions() -> list[str]:
    from pathlib import Path

    import hetinfra.price_feeds as pf
    from hetinfra.csvtext import csv_records

    text = (Path(pf.__path__[0]) / "data" / "region_locations.csv").read_text()
    _, rows = csv_records(text, "region_locations.csv")
    return sorted({r["region"] for _, r in rows if r["cloud"] == "aws"})


region_text = st.one_of(st.text(max_size=16), st.sampled_from(_aws_regions()),
                        st.sampled_from(_aws_regions()).map(str.upper),
                        st.sampled_from(_aws_regions()).map(lambda r: r + "?x=1"),
                        st.sampled_from(["../x", "us east 1", "us-east-1/../..", "us-east-1#", "eu-west-1%2F"]))


@settings(max_examples=200, derandomize=True)
@given(regions=st.lists(region_text, min_size=1, max_size=3))
def test_each_aws_region_of_the_variable_is_a_region_name_or_refused_naming_it(regions):
    """HETINFRA_AWS_REGIONS: each entry is a folder of the price list's URL. '../x' fetched another path of the
    pricing host, 'us-east-1?x=1' sent a query, 'US-EAST-1' or a space was exit 4 as if the feed were down."""
    import re

    text = ",".join(r for r in regions if "\x00" not in r)
    try:
        cfg = _from_env("HETINFRA_AWS_REGIONS", text)
    except InvalidInputError as exc:
        assert exc.message.startswith(("HETINFRA_AWS_REGIONS entry ", "HETINFRA_AWS_REGIONS=")) and exc.exit_code == 2
        return
    for region in cfg.aws_regions:
        assert re.fullmatch(r"[a-z0-9-]+", region) and ".." not in region, region


def test_every_aws_region_of_the_embedded_data_is_taken():
    regions = _aws_regions()
    assert len(regions) > 10
    assert _from_env("HETINFRA_AWS_REGIONS", ",".join(regions)).aws_regions == tuple(regions)


@settings(max_examples=40, deadline=None)
@given(var=st.sampled_from(["HETINFRA_FEEDS_RETRIES", "HETINFRA_FEEDS_DEADLINE_S"]),
       text=st.sampled_from(["1_0", "٣", "１２", "²", "3_0.5", "١.٥", "0x10"]))
def test_a_number_variable_written_otherwise_than_a_csv_cell_is_refused(var, text):
    """int() and float() read '1_0' as 10 and Unicode digits as numbers: HETINFRA_FEEDS_RETRIES=1_0 was ten
    retries. A number variable is written as a CSV cell writes one (ASCII digits), as the number flags are."""
    with pytest.raises(InvalidInputError, match=f"^{var}="):
        _from_env(var, text)
