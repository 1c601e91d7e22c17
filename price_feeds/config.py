"""Feed settings: base URLs (tests point them at loopback), regions, keys, limits, cache dir.

Every field has an environment variable, read by :meth:`FeedConfig.from_env`:

=========================== ======================================================= =====================
variable                    meaning                                                 default
=========================== ======================================================= =====================
HETINFRA_CACHE_DIR          snapshot store                                          ~/.cache/hetinfra/feeds
HETINFRA_FEEDS_SOURCES      sources of ``--feeds live`` (comma list)                aws,azure,gcp
HETINFRA_AWS_PRICING_URL    AWS price list bulk endpoint                            https://pricing.us-east-1.amazonaws.com
HETINFRA_AWS_REGIONS        AWS regions to fetch (one bulk CSV each)                us-east-1,us-east-2,us-west-2
HETINFRA_AWS_SPOT           spot prices via boto3: auto (when credentials), on, off auto
HETINFRA_AZURE_PRICES_URL   Azure Retail Prices API                                 https://prices.azure.com
HETINFRA_GCP_BILLING_URL    GCP Cloud Billing Catalog API                           https://cloudbilling.googleapis.com
HETINFRA_GCP_API_KEY        GCP API key (required for the gcp source)               (none)
HETINFRA_SKYPILOT_CATALOG   SkyPilot v8 catalog: a directory or an http(s) URL      ~/.sky/catalogs/v8
HETINFRA_FEEDS_RETRIES      retries per request                                     3
HETINFRA_FEEDS_DEADLINE_S   total seconds per source (all requests and retries)    300
=========================== ======================================================= =====================
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

ALL_SOURCES = ("aws", "azure", "gcp", "skypilot")
DEFAULT_LIVE_SOURCES = ("aws", "azure", "gcp")
SKYPILOT_CATALOG_URL = "https://raw.githubusercontent.com/skypilot-org/skypilot-catalog/master/catalogs/v8"


def default_cache_dir() -> Path:
    """$HETINFRA_CACHE_DIR, else ~/.cache/hetinfra/feeds (each checked: hetinfra.envpaths). A value that
    switches the template cache off (``off``) names no folder: the store keeps its default (it was a
    folder ``off`` in whatever directory a command ran from)."""
    from hetinfra.envpaths import cache_dir_var, home_dir

    return cache_dir_var() or home_dir() / ".cache" / "hetinfra" / "feeds"


def default_skypilot_catalog() -> str:
    from hetinfra.envpaths import env_path, home_dir

    base = env_path("SKY_RUNTIME_DIR") or home_dir()  # SkyPilot 0.14 replaces ~ by it when set
    return str(base / ".sky" / "catalogs" / "v8")


def _split(value: str | None, var: str) -> tuple[str, ...]:
    from hetinfra.csvtext import comma_items  # an empty item is exit 2 naming the variable

    return comma_items(value, var)


#: FeedConfig field -> the environment variable of its text
_TEXT_VARS = {"aws_pricing_url": "HETINFRA_AWS_PRICING_URL", "azure_prices_url": "HETINFRA_AZURE_PRICES_URL",
              "gcp_billing_url": "HETINFRA_GCP_BILLING_URL", "gcp_api_key": "HETINFRA_GCP_API_KEY",
              "skypilot_catalog": "HETINFRA_SKYPILOT_CATALOG", "aws_spot": "HETINFRA_AWS_SPOT"}
#: the most retries per request and seconds per source the environment may ask for
MAX_RETRIES = 100
MAX_DEADLINE_S = 86400.0
AWS_SPOT_MODES = ("auto", "on", "off")
#: an AWS region's name (us-east-1, ap-southeast-3, us-gov-west-1): each is a folder of the price list's
#: URL, so '../x' fetched another path of the pricing host, 'us-east-1?x=1' sent a query, and 'US-EAST-1'
#: or a space was a 404 or an InvalidURL reported as the feed being down (exit 4)
AWS_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]{1,2}\Z")


def _env_number(var: str, text: str, *, whole: bool, most: float) -> float:
    """An environment variable's number: whole where a count is meant, finite, in its range; else
    exit 2 naming the variable. A deadline of -1 was exit 4 blaming every feed ('malformed feed
    data'), nan meant no deadline at all and a retry count of -5 was taken as 0, silently."""
    from hetinfra.csvtext import is_plain_number, whole_number
    from hetinfra.errors import InvalidInputError

    least = 0 if whole else 1e-3
    written = text.strip()  # as a CSV cell writes a number (int() and float() read '1_0' as 10, and '٣')
    value = whole_number(written) if whole else float(written) if is_plain_number(written) else None
    if value is None or not math.isfinite(value) or not least <= value <= most:
        kind = "a whole number" if whole else "a number of seconds"
        raise InvalidInputError(f"{var}={text.strip()[:40]!r} is not {kind} from {least:g} to {most:g}",
                                hint=f"set {var} to such a value, or unset it for the default")
    return value


def _check_words(kw: dict) -> None:
    """The URL, region and mode variables: an API URL is http(s) (urllib would open a file:// path too),
    each of HETINFRA_AWS_REGIONS an AWS region's name (:data:`AWS_REGION`), and HETINFRA_AWS_SPOT one
    of its modes (any other word was taken as 'on')."""
    from hetinfra.errors import InvalidInputError

    from hetinfra.httpget import checked_url

    for name in ("aws_pricing_url", "azure_prices_url", "gcp_billing_url"):
        if name in kw:
            checked_url(kw[name], f"{_TEXT_VARS[name]}=", hint=f"unset {_TEXT_VARS[name]} for the cloud's own endpoint")
    catalog = kw.get("skypilot_catalog", "")
    if catalog.lower().startswith(("http://", "https://")):
        checked_url(catalog, f"{_TEXT_VARS['skypilot_catalog']}=", hint="a v8 catalog's URL or folder")
    elif catalog:
        from hetinfra.envpaths import env_path

        env_path(_TEXT_VARS["skypilot_catalog"], {_TEXT_VARS["skypilot_catalog"]: catalog})  # a folder: checked
    for k, region in enumerate(kw.get("aws_regions", ())):
        if not AWS_REGION.match(region):
            raise InvalidInputError(f"HETINFRA_AWS_REGIONS entry {k + 1} {region[:40]!r} is not an AWS region name",
                                    hint="AWS regions as AWS spells them, comma-separated, e.g. us-east-1,eu-west-1 "
                                         "(or unset it for us-east-1,us-east-2,us-west-2)")
    if kw.get("aws_spot", "auto") not in AWS_SPOT_MODES:
        raise InvalidInputError(f"HETINFRA_AWS_SPOT={kw['aws_spot'][:40]!r} is none of {', '.join(AWS_SPOT_MODES)}",
                                hint="auto: spot prices when AWS credentials are found; on; off")


@dataclass(frozen=True)
class FeedConfig:
    cache_dir: Path = field(default_factory=default_cache_dir)
    sources: tuple[str, ...] = DEFAULT_LIVE_SOURCES
    aws_pricing_url: str = "https://pricing.us-east-1.amazonaws.com"
    aws_regions: tuple[str, ...] = ("us-east-1", "us-east-2", "us-west-2")
    aws_spot: str = "auto"  # auto | on | off
    azure_prices_url: str = "https://prices.azure.com"
    gcp_billing_url: str = "https://cloudbilling.googleapis.com"
    gcp_api_key: str | None = None
    skypilot_catalog: str = field(default_factory=default_skypilot_catalog)
    timeout_s: float = 20.0
    retries: int = 3
    backoff_s: float = 0.5
    deadline_s: float = 300.0
    keep_snapshots: int = 50  # per source in the store

    @classmethod
    def from_env(cls, **overrides) -> "FeedConfig":
        env = os.environ
        kw: dict = {}
        if env.get("HETINFRA_FEEDS_SOURCES"):
            kw["sources"] = _split(env["HETINFRA_FEEDS_SOURCES"], "HETINFRA_FEEDS_SOURCES")
        for name, var in _TEXT_VARS.items():
            if env.get(var):
                kw[name] = env[var]
        if env.get("HETINFRA_AWS_REGIONS"):
            kw["aws_regions"] = _split(env["HETINFRA_AWS_REGIONS"], "HETINFRA_AWS_REGIONS")
        for name, var, whole, most in (("retries", "HETINFRA_FEEDS_RETRIES", True, MAX_RETRIES),
                                       ("deadline_s", "HETINFRA_FEEDS_DEADLINE_S", False, MAX_DEADLINE_S)):
            if env.get(var):
                kw[name] = _env_number(var, env[var], whole=whole, most=most)
        kw.update({k: v for k, v in overrides.items() if v is not None})
        _check_words(kw)
        return cls(**kw)

    def with_(self, **changes) -> "FeedConfig":
        return replace(self, **changes)

    def http(self, *, timeout_s: float | None = None):
        """A fresh :class:`~hetinfra.price_feeds.http.HttpClient` (its deadline starts now)."""
        from hetinfra.price_feeds.http import HttpClient

        return HttpClient(timeout_s=timeout_s or self.timeout_s, retries=self.retries, backoff_s=self.backoff_s,
                          deadline_s=self.deadline_s)
