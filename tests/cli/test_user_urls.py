"""Every URL a user gives (profile --endpoint, replan --demand-from, gateway --endpoint, the price
feeds' URL variables, HETINFRA_SKYPILOT_CATALOG) is checked by one rule (hetinfra.httpget.checked_url)
where it is read: exit 2 naming the flag or variable, and never printing a password. Each had
checked only its ``http://`` prefix: ``http://[::1`` was a ValueError traceback (profile, replan) or
"malformed feed data" (exit 4); a port past 65535 was taken; ``http://user:pw@host`` was read by
urllib as a host name and printed, password and all."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetinfra.cli.app import cli

pytestmark = pytest.mark.xdist_group("user_urls")

SETTINGS = settings(max_examples=12, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
HOSTS = st.sampled_from(["10.0.0.5", "gw.example.com", "[::1]", "[fd00::7]"])
SECRET = "s3cr3t-pw"
#: URLs no GET can use: an unclosed IPv6 bracket, a port past 65535 or not a number, a user and
#: password before the host, no host, whitespace
BAD = st.one_of(
    st.builds(lambda h, p: f"http://{h}:{p}/v1", HOSTS, st.integers(65536, 10**9)),
    st.builds(lambda h, p: f"https://{h}:{p}", HOSTS, st.sampled_from(["x", "8o", "-1", "80a"])),
    st.builds(lambda h: f"http://u:{SECRET}@{h}:8000", HOSTS),
    st.builds(lambda a: f"http://[{a}", st.sampled_from(["::1", "fd00::7", "::1:8000/v1"])),
    st.sampled_from(["http://", "https:///v1", "http://:8000", "http://gw .example.com", "http://gw\n.x"]),
)
#: (the command line, where the URL goes: "ARG" in it or an environment variable, the name said)
USES = [
    (["profile", "--endpoint", "ARG", "--model", "m", "--gpu", "L4", "--tp", "1", "--out", "OUT/p.csv"], None,
     "--endpoint"),
    (["replan", "services/chat.yaml", "--state", "OUT", "--demand-from", "ARG"], None, "--demand-from"),
    (["feeds", "refresh", "--source", "skypilot"], "HETINFRA_SKYPILOT_CATALOG", "HETINFRA_SKYPILOT_CATALOG="),
    (["feeds", "refresh", "--source", "aws"], "HETINFRA_AWS_PRICING_URL", "HETINFRA_AWS_PRICING_URL="),
    (["prices", "--feeds", "live:gcp"], "HETINFRA_GCP_BILLING_URL", "HETINFRA_GCP_BILLING_URL="),
]


@pytest.mark.parametrize("args, var, said", USES, ids=lambda x: x if isinstance(x, str) else None)
@SETTINGS
@given(url=BAD)
def test_a_url_no_get_can_use_is_refused_naming_where_it_came_from(tmp_path, monkeypatch, args, var, said, url):
    monkeypatch.setenv("HETINFRA_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "plan.json").write_text("{}")
    args = [url if a == "ARG" else a.replace("OUT", str(tmp_path)) for a in args]
    result = CliRunner().invoke(cli, args, env={var: url} if var else {})
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert f"error: {said}" in result.output and SECRET not in result.output


@SETTINGS
@given(host=HOSTS, port=st.one_of(st.none(), st.integers(1, 65535)), path=st.sampled_from(["", "/", "/v1", "/a/b"]))
def test_a_url_of_a_server_passes(host, port, path):
    from hetinfra.httpget import url_problem

    assert url_problem(f"http://{host}{'' if port is None else f':{port}'}{path}") is None


def test_the_gateway_refuses_an_endpoint_no_get_can_use(tmp_path):
    from hetinfra.gateway.table import base_url
    from hetinfra.errors import InvalidInputError

    with pytest.raises(InvalidInputError) as refused:
        base_url(f"http://admin:{SECRET}@10.0.0.5:8000/v1")
    assert "http://***@10.0.0.5:8000/v1" in refused.value.message and SECRET not in refused.value.message
    assert base_url("http://[::1]:8000/v1/") == "http://[::1]:8000"
