"""hetinfra.plan.feeds.load_caps: a caps file's spot rows are read but not applied (caps count every
purchase option together), and the plan says so."""

from __future__ import annotations

from hetinfra.plan.feeds import load_caps
from hetinfra.price_feeds.offers import load_embedded_snapshot


def test_a_caps_files_spot_rows_are_named_as_not_applied(tmp_path, capsys):
    caps = tmp_path / "caps.csv"
    caps.write_text("cloud,region,gpu,max_gpus,purchase\naws,us-east-1,L40S,8,on-demand\naws,us-east-1,L40S,0,spot\n")
    got, warnings = load_caps(str(caps), False, load_embedded_snapshot())
    assert got == {("aws", "us-east-1", "L40S"): 8}  # the spot row binds nothing
    assert len(warnings) == 1 and warnings[0].startswith(f"1 spot cap(s) not applied ({caps}:3)")
    assert "warning: 1 spot cap(s)" in capsys.readouterr().err


def test_on_demand_rows_alone_warn_nothing(tmp_path):
    caps = tmp_path / "caps.csv"
    caps.write_text("cloud,region,gpu,max_gpus\naws,us-east-1,L40S,8\n")
    assert load_caps(str(caps), False, load_embedded_snapshot()) == ({("aws", "us-east-1", "L40S"): 8}, [])
