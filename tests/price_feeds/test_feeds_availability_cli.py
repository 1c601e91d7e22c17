"""Availability caps (user CSV, AWS via botocore Stubber, stubs) and the prices/feeds commands."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from hetinfra.errors import InvalidInputError
from hetinfra.price_feeds.availability import load_availability
from hetinfra.price_feeds.caps import AvailabilityCap, caps_dict, load_caps_csv, parse_caps_csv
from hetinfra.price_feeds.offers import Offer


# --- availability ----------------------------------------------------------------------------

def test_caps_csv_and_dict(tmp_path):
    p = tmp_path / "caps.csv"
    p.write_text("cloud,region,gpu,max_gpus,purchase\nAWS,us-east-1,L4,16,\n"
                 "gcp,us-central1,H100,0,spot\n")
    caps = load_caps_csv(p)
    assert caps[0] == AvailabilityCap("aws", "us-east-1", "L4", 16, "on-demand", str(p))
    caps.insert(1, AvailabilityCap("aws", "us-east-1", "L4", 8, "on-demand", "aws-quotas"))  # a cloud's quota
    assert caps_dict(caps) == {("aws", "us-east-1", "L4"): 8}  # across sources, the tightest cap
    assert caps_dict(caps).skipped == [caps[2]]  # what the planner warns it does not apply
    assert caps_dict(caps, purchase="spot") == {("gcp", "us-central1", "H100"): 0}
    assert caps_dict(caps, purchase="spot").skipped == caps[:2]


@pytest.mark.parametrize("text,match", [
    ("cloud,region,gpu\naws,r,L4\n", "lacks column"),
    ("cloud,region,gpu,max_gpus\naws,r,L4,-1\n", "whole number in \\[0, "),
    ("cloud,region,gpu,max_gpus\naws,r,L4,lots\n", "not a number"),
    ("cloud,region,gpu,max_gpus\naws,,L4,3\n", "'region' is empty"),
    ("cloud,region,gpu,max_gpus,purchase\naws,r,L4,3,reserved\n", "purchase must be"),
    ("cloud,region,gpu,max_gpus\nAWS,r,L4,16\naws,r,L6,1\naws,r,L4,8\n",  # one file's two caps on a key: both lines
     "caps.csv:4: cap aws/r/L4 \\(on-demand\\) is 8 GPUs, caps.csv:2 gives 16"),
])
def test_caps_csv_is_strict(text, match):
    with pytest.raises(InvalidInputError, match=match) as e:
        parse_caps_csv(text, name="caps.csv")
    assert e.value.exit_code == 2


def test_a_caps_row_repeated_as_it_stands_is_harmless():
    text = "cloud,region,gpu,max_gpus,purchase\naws,r,L4,8,\naws,r,L4,8,on-demand\naws,r,L4,2,spot\n"
    assert [(c.max_gpus, c.purchase) for c in parse_caps_csv(text, name="caps.csv")] == [
        (8, "on-demand"), (8, "on-demand"), (2, "spot")]


def aws_offers():
    def o(itype, gpu, n, vcpus, region="us-east-1"):
        return Offer("aws", region, itype, gpu, n, 24, vcpus, 16, 1.0, None, "t", "s")

    return [o("g6.xlarge", "L4", 1, 4), o("g6.12xlarge", "L4", 4, 48), o("g6.48xlarge", "L4", 8, 192),
            o("p5.48xlarge", "H100", 8, 192), o("p4d.24xlarge", "A100", 8, 96)]


def test_aws_caps_from_quotas_and_offerings():
    boto3 = pytest.importorskip("boto3")
    from botocore.stub import Stubber

    kw = dict(region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    sq, ec2 = boto3.client("service-quotas", **kw), boto3.client("ec2", **kw)
    sq_stub, ec2_stub = Stubber(sq), Stubber(ec2)
    sq_stub.add_response("get_service_quota", {"Quota": {"QuotaCode": "L-DB2E81BA", "Value": 96.0}},
                         {"ServiceCode": "ec2", "QuotaCode": "L-DB2E81BA"})
    sq_stub.add_client_error("get_service_quota", "NoSuchResourceException", "no applied quota",
                             expected_params={"ServiceCode": "ec2", "QuotaCode": "L-417A185B"})
    sq_stub.add_response("get_aws_default_service_quota", {"Quota": {"QuotaCode": "L-417A185B", "Value": 192.0}},
                         {"ServiceCode": "ec2", "QuotaCode": "L-417A185B"})
    ec2_stub.add_response("describe_instance_type_offerings", {
        "InstanceTypeOfferings": [{"InstanceType": t, "LocationType": "region", "Location": "us-east-1"}
                                  for t in ("g6.xlarge", "g6.12xlarge", "p5.48xlarge")]},
        {"LocationType": "region", "Filters": [{"Name": "instance-type", "Values": [
            "g6.12xlarge", "g6.48xlarge", "g6.xlarge", "p4d.24xlarge", "p5.48xlarge"]}]})
    sq_stub.activate()
    ec2_stub.activate()
    clients = {"service-quotas": sq, "ec2": ec2}
    caps, warnings = load_availability(clouds=["aws"], offers=aws_offers(), aws_factory=lambda s, r: clients[s])
    assert warnings == []
    # L4: max(96 // 4 * 1, 96 // 48 * 4) = 24 (g6.48xlarge is not offered); H100: 192 // 192 * 8 = 8;
    # A100: p4d not offered in the region -> 0
    assert caps_dict(caps) == {("aws", "us-east-1", "L4"): 24, ("aws", "us-east-1", "H100"): 8,
                               ("aws", "us-east-1", "A100"): 0}
    sq_stub.assert_no_pending_responses()
    ec2_stub.assert_no_pending_responses()


def test_availability_without_boto3_or_credentials_is_a_warning(monkeypatch):
    # GCP and Azure have no offers here, so they are not asked at all (tests/price_feeds/
    # test_feeds_cloud_quotas.py covers their credential warnings).
    caps, warnings = load_availability(clouds=["aws", "gcp", "azure"], offers=aws_offers())
    assert caps == []
    assert len(warnings) == 1
    assert "aws availability skipped" in warnings[0] and ("no AWS credentials" in warnings[0] or "boto3" in warnings[0])
    monkeypatch.setitem(sys.modules, "boto3", None)
    caps, warnings = load_availability(clouds=["aws"], offers=aws_offers())
    assert caps == [] and "boto3 is not installed" in warnings[0]


# --- CLI -------------------------------------------------------------------------------------

def invoke(cmd, *args):
    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2
        runner = CliRunner()
    res = runner.invoke(cmd, list(args), catch_exceptions=False)
    return res.exit_code, res.stdout, res.stderr


def test_prices_json_filters_and_per_gpu_price():
    from hetinfra.cli.feeds import prices_command

    code, out, err = invoke(prices_command, "--gpu", "l4", "--cloud", "gcp", "--region", "us-central1", "--json")
    assert code == 0, err
    doc = json.loads(out)
    rows = {r["instance_type"]: r for r in doc["offers"]}
    assert rows["g2-standard-4"]["price_per_gpu_hour"] == 0.70683
    assert rows["g2-standard-24"]["price_per_gpu_hour"] == round(rows["g2-standard-24"]["price_per_hour"] / 2, 6)
    assert all(r["gpu"] == "L4" and r["cloud"] == "gcp" for r in doc["offers"])
    per_gpu = [r["price_per_gpu_hour"] for r in doc["offers"]]
    assert per_gpu == sorted(per_gpu)
    assert doc["sources"][0]["name"] == "embedded-snapshot" and doc["warnings"] == []
    assert all(r["source"] and r["as_of"] for r in doc["offers"])


def test_prices_spot_table_and_unknown_gpu():
    from hetinfra.cli.feeds import prices_command

    code, out, err = invoke(prices_command, "--gpu", "H100", "--spot", "--limit", "3")
    assert code == 0 and "with spot" in out and "$/GPU-h" in out and "(25 more; raise --limit)" in out  # 28 H100 offers with spot, world-wide
    code, out, err = invoke(prices_command, "--gpu", "L5")
    assert code == 2 and "error: --gpu L5: no offer has gpu 'L5'; did you mean 'L4'?" in err


def test_prices_live_offline_warns_and_strict_fails(monkeypatch, closed_port):
    from hetinfra.cli.feeds import prices_command

    url = f"http://127.0.0.1:{closed_port}"
    for var in ("HETINFRA_AWS_PRICING_URL", "HETINFRA_AZURE_PRICES_URL", "HETINFRA_GCP_BILLING_URL"):
        monkeypatch.setenv(var, url)
    monkeypatch.setenv("HETINFRA_AWS_SPOT", "off")
    code, out, err = invoke(prices_command, "--feeds", "live", "--gpu", "T4", "--timeout", "1")
    assert code == 0 and "T4" in out
    assert err.count("warning: ") == 3 and "warning: gcp: live fetch failed" in err
    code, out, err = invoke(prices_command, "--feeds", "live", "--strict-feeds", "--timeout", "1")
    assert code == 4 and "error: live feed aws failed" in err and "hint:" in err


def test_prices_bad_feeds_path():
    from hetinfra.cli.feeds import prices_command

    code, out, err = invoke(prices_command, "--feeds", "/nonexistent/offers.csv")
    assert code == 2 and "no such file or directory" in err


def test_feeds_refresh_and_list(monkeypatch, shared_catalog, tmp_path, closed_port):
    from hetinfra.cli.feeds import feeds_group

    monkeypatch.setenv("HETINFRA_SKYPILOT_CATALOG", str(shared_catalog))
    code, out, err = invoke(feeds_group, "refresh", "--source", "skypilot", "--json")
    assert code == 0, err
    doc = json.loads(out)
    entry = doc["sources"][0]
    assert (entry["source"], entry["ok"]) == ("skypilot", True) and entry["rows"] > 200
    assert entry["path"].startswith(str(tmp_path / "cache" / "skypilot"))
    code, out, err = invoke(feeds_group, "list", "--json")
    assert code == 0 and [s["source"] for s in json.loads(out)["snapshots"]] == ["skypilot"]
    # table output with the Rich progress bar; a failing source makes the command exit 4
    monkeypatch.setenv("HETINFRA_AWS_PRICING_URL", f"http://127.0.0.1:{closed_port}")
    code, out, err = invoke(feeds_group, "refresh", "--source", "skypilot,aws")
    assert code == 4
    assert "skypilot" in out and "failed" in out
    assert "error: 1 of 2 feed(s) failed: aws: cannot reach" in err


def test_commands_module_imports_only_click():
    code = ("import sys, hetinfra.cli.feeds as f; "
            "bad = [m for m in sys.modules if m.startswith(('rich', 'hetinfra.price_feeds', 'boto3', 'urllib.request'))]; "
            "print(bad); assert callable(f.prices_command) and f.feeds_group.name == 'feeds'")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("args, says", [(["--gpu", ""], "--gpu names no gpu"), (["--cloud", " , "], "--cloud ',': item 1 of 2 is empty"),
                                        (["--feeds", "/dev/zero"], "is neither a file nor a directory")])
def test_prices_refuses_an_empty_filter_and_a_feed_that_is_no_file(args, says):
    """`prices --gpu ''` printed "no offer matches" with exit 0 (an unknown GPU is exit 2); `--feeds
    /dev/zero` was "no such file or directory" although the path exists."""
    from hetinfra.cli import cli

    res = CliRunner().invoke(cli, ["prices", *args])
    assert res.exit_code == 2 and says in res.output, res.output
