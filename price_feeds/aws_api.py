"""Credentialed AWS APIs (optional extra ``hetinfra[aws]`` = boto3): spot prices and GPU caps.

Nothing here is required: without boto3 or without credentials every function returns empty
results and a warning string, never raises. boto3 is imported lazily. Clients use short timeouts
and botocore's standard retry mode with 2 attempts (feeds.md section 6).

- spot: ``ec2.describe_spot_price_history(ProductDescriptions=["Linux/UNIX"], StartTime=now)``,
  the minimum over the region's AZs (feeds.md section 1c; SpotPrice is a string).
- caps: Service Quotas (vCPUs per family: G/VT, P; on-demand or spot; feeds.md 1d) and
  ``describe_instance_type_offerings`` (which types a region has). A GPU's cap in a region is the
  largest number of its GPUs the family's vCPU quota allows on one offered instance type:
  max over types t of floor(quota / vcpus(t)) * gpus(t). Types not offered there give 0.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Callable, Iterable

from hetinfra.price_feeds.families import AWS_QUOTA_CODES, aws_quota_family

ClientFactory = Callable[[str, str], object]  # (service, region) -> boto3 client

MAX_PAGES = 50


def _boto_errors():
    from botocore.exceptions import BotoCoreError, ClientError

    return (BotoCoreError, ClientError)


def session_or_warning(session=None) -> tuple[object | None, str | None]:
    """A boto3 session with credentials, or (None, why not)."""
    try:
        import boto3
    except ImportError:
        return None, "boto3 is not installed (pip install 'hetinfra[aws]')"
    if session is None:
        session = boto3.Session()
    try:
        creds = session.get_credentials()
    except Exception as exc:  # noqa: BLE001 - a broken profile must not stop planning
        return None, f"AWS credentials could not be read ({type(exc).__name__}: {exc})"
    if creds is None:
        return None, "no AWS credentials found (aws configure, or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)"
    return session, None


def client_factory(session, timeout_s: float = 20.0) -> ClientFactory:
    from botocore.config import Config

    cfg = Config(connect_timeout=min(5.0, timeout_s), read_timeout=timeout_s,
                 retries={"mode": "standard", "max_attempts": 2})
    return lambda service, region: session.client(service, region_name=region, config=cfg)


def _factory(session, factory: ClientFactory | None, timeout_s: float) -> tuple[ClientFactory | None, str | None]:
    if factory is not None:
        return factory, None
    sess, why = session_or_warning(session)
    if sess is None:
        return None, why
    return client_factory(sess, timeout_s), None


def _err(exc: BaseException) -> str:
    code = getattr(exc, "response", {}).get("Error", {}).get("Code") if hasattr(exc, "response") else None
    return f"{code or type(exc).__name__}: {exc}"


def spot_prices(regions: Iterable[str], instance_types: Iterable[str], *, session=None,
                factory: ClientFactory | None = None, timeout_s: float = 20.0,
                now: datetime | None = None) -> tuple[dict[tuple[str, str], float], list[str]]:
    """{(region, instance type): min spot $/h over AZs} and warnings (never raises)."""
    factory, why = _factory(session, factory, timeout_s)
    if factory is None:
        return {}, [f"spot prices skipped: {why}"]
    errors = _boto_errors()
    types = sorted(set(instance_types))
    out: dict[tuple[str, str], float] = {}
    warnings: list[str] = []
    start = now or datetime.now(timezone.utc)
    for region in regions:
        try:
            ec2 = factory("ec2", region)
            kwargs = {"ProductDescriptions": ["Linux/UNIX"], "InstanceTypes": types, "StartTime": start}
            for _ in range(MAX_PAGES):
                page = ec2.describe_spot_price_history(**kwargs)
                for item in page.get("SpotPriceHistory", []):
                    try:
                        price = float(item["SpotPrice"])
                    except (KeyError, TypeError, ValueError):
                        continue
                    key = (region, item.get("InstanceType", ""))
                    if price > 0 and (key not in out or price < out[key]):
                        out[key] = price
                token = page.get("NextToken")
                if not token:
                    break
                kwargs["NextToken"] = token
        except errors as exc:
            warnings.append(f"spot prices for {region} unavailable ({_err(exc)})")
    return out, warnings


def _quota(sq, code: str) -> float:
    from botocore.exceptions import ClientError

    try:
        return float(sq.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"])
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "NoSuchResourceException":
            raise
        return float(sq.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"])


def offered_types(ec2, types: list[str]) -> set[str]:
    out: set[str] = set()
    kwargs = {"LocationType": "region", "Filters": [{"Name": "instance-type", "Values": types}]}
    for _ in range(MAX_PAGES):
        page = ec2.describe_instance_type_offerings(**kwargs)
        out.update(o["InstanceType"] for o in page.get("InstanceTypeOfferings", []))
        token = page.get("NextToken")
        if not token:
            break
        kwargs["NextToken"] = token
    return out


def gpu_caps(regions: Iterable[str], offers, *, spot: bool = False, session=None,
             factory: ClientFactory | None = None, timeout_s: float = 20.0):
    """AvailabilityCap rows for AWS (see the module docstring) and warnings (never raises)."""
    from hetinfra.price_feeds.caps import AvailabilityCap

    factory, why = _factory(session, factory, timeout_s)
    if factory is None:
        return [], [f"aws availability skipped: {why}"]
    errors = _boto_errors()
    purchase = "spot" if spot else "on-demand"
    caps: list[AvailabilityCap] = []
    warnings: list[str] = []
    for region in regions:
        reg = [o for o in offers if o.cloud == "aws" and o.region == region and o.vcpus > 0]
        if not reg:
            continue
        try:
            sq, ec2 = factory("service-quotas", region), factory("ec2", region)
            quotas: dict[str, float] = {}
            for fam in sorted({aws_quota_family(o.instance_type) for o in reg} - {None}):
                code = AWS_QUOTA_CODES[fam][purchase]
                try:
                    quotas[fam] = _quota(sq, code)
                except errors as exc:
                    warnings.append(f"aws {region}: quota {code} unavailable ({_err(exc)})")
            offered = offered_types(ec2, sorted({o.instance_type for o in reg}))
        except errors as exc:
            warnings.append(f"aws availability for {region} unavailable ({_err(exc)})")
            continue
        for gpu in sorted({o.gpu for o in reg}):
            best, known = 0, False
            for o in reg:
                fam = aws_quota_family(o.instance_type)
                if o.gpu != gpu or fam not in quotas:
                    continue
                known = True
                if o.instance_type in offered:
                    best = max(best, int(quotas[fam] // o.vcpus) * o.gpu_count)
            if known:
                caps.append(AvailabilityCap("aws", region, gpu, best, purchase=purchase, source="aws-service-quotas"))
    return caps, warnings
