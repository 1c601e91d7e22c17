"""The bounded HTTP client against a loopback server: retries, Retry-After, timeouts, deadline."""

from __future__ import annotations

import json
import time

import pytest

from hetinfra.errors import FeedError
from hetinfra.price_feeds.http import FetchError, HttpClient, redact, retry_after_seconds


def client(**kw) -> tuple[HttpClient, list[float]]:
    waits: list[float] = []
    args = dict(timeout_s=2.0, retries=3, backoff_s=0.5, deadline_s=30.0, sleep=waits.append)
    args.update(kw)
    return HttpClient(**args), waits


def test_json_ok(feed_server, fx):
    feed_server.route("/a", fx.Resp(200, json.dumps({"x": 1})))
    http, waits = client()
    assert http.get_json(feed_server.url + "/a") == {"x": 1}
    assert (http.requests, waits) == (1, [])


def test_429_then_200_honours_retry_after(feed_server, fx):
    feed_server.route("/a", fx.Resp(429, "slow down", {"Retry-After": "7"}), fx.Resp(200, '{"ok": true}'))
    http, waits = client()
    assert http.get_json(feed_server.url + "/a") == {"ok": True}
    assert feed_server.hits("/a") == 2
    assert waits == [7.0]  # the server's Retry-After, not the 0.5 s backoff


def test_500_then_200_backs_off(feed_server, fx):
    feed_server.route("/a", fx.Resp(500, "oops"), fx.Resp(502, "bad gateway"), fx.Resp(200, "[1, 2]"))
    http, waits = client()
    assert http.get_json(feed_server.url + "/a") == [1, 2]
    assert waits == [0.5, 1.0]  # exponential backoff
    assert feed_server.hits("/a") == 3


def test_503_forever_gives_up_after_bounded_attempts(feed_server, fx):
    feed_server.route("/a", fx.Resp(503, "down"))
    http, waits = client(retries=2)
    with pytest.raises(FetchError) as e:
        http.get_json(feed_server.url + "/a")
    assert "HTTP 503" in e.value.message and "gave up after 3 attempts" in e.value.message
    assert feed_server.hits("/a") == 3 and waits == [0.5, 1.0]
    assert isinstance(e.value, FeedError) and e.value.exit_code == 4


def test_404_is_not_retried(feed_server, fx):
    feed_server.route("/a", fx.Resp(404, "nope"))
    http, waits = client()
    with pytest.raises(FetchError) as e:
        http.get_json(feed_server.url + "/a")
    assert e.value.status == 404 and feed_server.hits("/a") == 1 and waits == []


def test_retry_after_beyond_limit_gives_up_at_once(feed_server, fx):
    feed_server.route("/a", fx.Resp(429, "", {"Retry-After": "3600"}))
    http, waits = client()
    with pytest.raises(FetchError, match="retry after 3600 s"):
        http.get_json(feed_server.url + "/a")
    assert waits == [] and feed_server.hits("/a") == 1


def test_retry_after_http_date():
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == pytest.approx(10.0)
    assert retry_after_seconds("120") == 120.0
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None


def test_timeout_when_server_is_slower_than_the_client(feed_server, fx):
    feed_server.route("/slow", fx.Resp(200, "{}", delay=1.5))
    http, waits = client(timeout_s=0.2, retries=1, backoff_s=0.01, sleep=time.sleep)
    t0 = time.monotonic()
    with pytest.raises(FetchError) as e:
        http.get_json(feed_server.url + "/slow")
    elapsed = time.monotonic() - t0
    assert "timed out" in e.value.message and "2 attempts" in e.value.message
    assert elapsed < 1.2  # two 0.2 s attempts, never the server's 1.5 s


def test_total_deadline_bounds_retries(feed_server, fx):
    feed_server.route("/a", fx.Resp(503, "down"))
    http = HttpClient(timeout_s=1.0, retries=100, backoff_s=0.1, max_backoff_s=0.1, deadline_s=0.6)
    t0 = time.monotonic()
    with pytest.raises(FetchError, match="deadline"):
        http.get_json(feed_server.url + "/a")
    assert time.monotonic() - t0 < 1.5
    assert 2 <= feed_server.hits("/a") < 100


def test_connection_refused_fails_fast_without_retries(closed_port):
    http, waits = client(retries=5)
    t0 = time.monotonic()
    with pytest.raises(FetchError, match="connection refused"):
        http.get_json(f"http://127.0.0.1:{closed_port}/a")
    assert http.requests == 1 and waits == [] and time.monotonic() - t0 < 1.0


def test_malformed_json_is_a_clear_error(feed_server, fx):
    feed_server.route("/a", fx.Resp(200, "<html>maintenance</html>"))
    http, _ = client()
    with pytest.raises(FetchError, match="malformed JSON"):
        http.get_json(feed_server.url + "/a")


def test_size_cap(feed_server, fx):
    feed_server.route("/a", fx.Resp(200, "x" * 5000))
    http, _ = client()
    with pytest.raises(FetchError, match="larger than 1000 bytes"):
        http.get_bytes(feed_server.url + "/a", max_bytes=1000)


def test_iter_lines_streams_and_reports_progress(feed_server, fx):
    body = "".join(f"line {i}\n" for i in range(10000))
    feed_server.route("/big", fx.Resp(200, body))
    http, _ = client()
    seen = []
    lines = list(http.iter_lines(feed_server.url + "/big", progress=lambda done, total: seen.append((done, total)),
                                 check_every=1000))
    assert len(lines) == 10000 and lines[0] == "line 0\n" and lines[-1] == "line 9999\n"
    assert seen[-1] == (len(body), len(body))


def test_api_key_never_in_messages(feed_server, fx):
    feed_server.route("/a", fx.Resp(403, "forbidden"))
    http, _ = client()
    with pytest.raises(FetchError) as e:
        http.get_json(feed_server.url + "/a?key=SECRET123&x=1")
    assert "SECRET123" not in str(e.value) and "key=***" in e.value.message
    assert "HETINFRA_GCP_API_KEY" in (e.value.hint or "")
    assert redact("https://h/p?pageToken=abc&key=zzz") == "https://h/p?pageToken=abc&key=***"


@pytest.mark.parametrize("cut", [0, 1, 17, 999])
def test_a_body_cut_short_of_its_content_length_is_no_body(cut):
    """http.client's read(n) returns what came before the connection closed: a price list cut short
    was stored as a snapshot with fewer offers, and JSON cut short blamed the feed's format."""
    from tests.test_httpget import OneShot

    body = b"cloud,region,instance_type\n" * 40
    srv = OneShot()
    srv.answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (len(body) + 1000 - cut) + body
    try:
        client = HttpClient(timeout_s=5, retries=1, backoff_s=0.0, sleep=lambda s: None)
        with pytest.raises(FetchError, match="ended .* short|IncompleteRead|gave up"):
            list(client.iter_lines(srv.url))
        with pytest.raises(FetchError, match="gave up after 2 attempts"):
            client.get_bytes(srv.url)
    finally:
        srv.sock.close()


# --- figures of the clouds' JSON answers (hetinfra.price_feeds.http.answer_number) -------------------------

from unittest import mock  # noqa: E402

from hypothesis import given, settings, strategies as st  # noqa: E402

from hetinfra.price_feeds import cloud_quotas  # noqa: E402
from hetinfra.price_feeds.azure import AzureRetailAdapter  # noqa: E402
from hetinfra.price_feeds.config import FeedConfig  # noqa: E402
from hetinfra.price_feeds.gcp import unit_price  # noqa: E402

#: any JSON value, and the texts and numbers that broke a reader: booleans, NaN and infinities, written as
#: numbers or as text, figures past any quota, a 400-digit integer, decimal strings
FIGURES = st.one_of(
    st.booleans(), st.none(), st.integers(), st.floats(), st.text(max_size=8),
    st.sampled_from(["inf", "-inf", "nan", "NaN", "Infinity", "1e999", "12", " 3.5 ", "1e3", "0x10", "1_0", "٣",
                     10 ** 400, 1e300, -1, True, False, [], {}, [1], {"units": 1}]))


def _figure(value, *, least: float):
    """What a reader should make of ``value``: its figure where it is one (a JSON number or a decimal string,
    finite, in range), else None. Stated apart from the reader, as the documents say it."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value.strip()) if isinstance(value, str) else float(value)
    except (ValueError, OverflowError):
        return None
    if isinstance(value, str) and not all(c in "0123456789.eE+-" for c in value.strip()):
        return None  # nan, inf, 1_0, ٣: float() reads them, JSON and the clouds do not write them
    return number if number == number and least <= number <= 1e12 else None  # a price <= 0 is dropped later, counted


def _azure_price(value):
    item = {"armSkuName": "Standard_NC4as_T4_v3", "armRegionName": "eastus", "type": "Consumption",
            "unitOfMeasure": "1 Hour", "currencyCode": "USD", "retailPrice": value,
            "productName": "Virtual Machines NCasT4_v3 Series", "skuName": "NC4as T4 v3", "meterName": "NC4as T4 v3"}
    adapter = AzureRetailAdapter(FeedConfig())
    ctx = mock.Mock(meta={}, offer=lambda **kw: kw["price"])
    with mock.patch.object(AzureRetailAdapter, "pages", lambda self, ctx: iter([[item]])):
        return next(iter(adapter.rows(ctx)), None)


def _gcp_units(value):
    sku = {"pricingInfo": [{"pricingExpression": {"usageUnit": "h", "tieredRates": [
        {"startUsageAmount": 0, "unitPrice": {"units": value, "nanos": 0}}]}}]}
    got = unit_price(sku)
    return None if got is None else got[0]


def _gcp_quota(value):
    got = cloud_quotas._gcp_quotas({"quotas": [{"metric": "NVIDIA_L4_GPUS", "limit": value, "usage": 0}]})
    return got["NVIDIA_L4_GPUS"][0] if got else None


def _azure_usage(value):
    usage = {"name": {"value": "standardNCASv3_T4Family"}, "limit": value, "currentValue": 0}
    with mock.patch.object(cloud_quotas, "azure_pages", lambda client, url, what: iter([usage])):
        got = cloud_quotas._azure_usages(None, "")
    return got[cloud_quotas._norm("standardNCASv3_T4Family")][0] if got else None


@settings(max_examples=120, derandomize=True, deadline=None)
@given(value=FIGURES, reader=st.sampled_from(["azure price", "gcp units", "gcp quota", "azure usage"]))
def test_every_figure_of_an_answer_is_read_alike(value, reader):
    """Any JSON value where the Azure Retail Prices API writes a price, the GCP billing catalog a price's
    units, GCP a quota's limit or Azure a usage's limit is read as its figure or skipped (that row, SKU or
    quota is not taken), never a traceback (`"limit": "inf"` was an OverflowError in `plan --availability`),
    never a boolean as 1 (`"retailPrice": true` priced an instance at $1.00/h)."""
    read = {"azure price": _azure_price, "gcp units": _gcp_units, "gcp quota": _gcp_quota,
            "azure usage": _azure_usage}[reader]
    want = _figure(value, least={"azure usage": -1.0, "azure price": -1e12}.get(reader, 0.0))
    if reader == "gcp units":  # whole dollars (nanos hold the rest); left out (null), none
        want = 0.0 if value is None else None if want is None or want != int(want) else want
    got = read(value)
    assert (got is None) == (want is None), (value, got)
    if want is not None:
        assert got == pytest.approx(want)
