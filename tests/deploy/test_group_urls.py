"""HETINFRA_GCP_COMPUTE_URL and HETINFRA_AZURE_ARM_URL (where `status`, `replan` and `apply` read the
self-healing groups and images) are read by the rule of every URL a user gives
(hetinfra.httpget.checked_url), as the price feeds' URL variables are: exit 2 naming the variable,
never a ValueError traceback ('not a url'), a local file read with the bearer token (file://) or a
password printed in an error."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.deploy import groups
from hetinfra.errors import InvalidInputError
from hetinfra.httpget import url_problem

READERS = {"HETINFRA_GCP_COMPUTE_URL": groups.gcp_url, "HETINFRA_AZURE_ARM_URL": groups.arm_url}

HOSTILE = st.one_of(
    st.text(max_size=40),
    st.builds(lambda scheme, rest: f"{scheme}://{rest}", st.sampled_from(["file", "ftp", "gopher", "http", "https", "HTTP"]),
              st.text(max_size=30)),
    st.builds(lambda n, host, port: f"http://alice:s3cr3tPW{n}@{host}:{port}", st.integers(0, 9),
              st.sampled_from(["127.0.0.1", "h", "example.com"]), st.integers(-5, 100_000)),
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(var=st.sampled_from(sorted(READERS)), value=HOSTILE)
def test_a_group_api_url_is_a_checked_url_or_exit_2_naming_the_variable(var, value):
    if not value:
        assert READERS[var]({var: value}) in (groups.GCP_URL, groups.ARM_URL)  # unset: the cloud's own
        return
    if url_problem(value) is None:
        assert READERS[var]({var: value}) == value.rstrip("/")
        return
    with pytest.raises(InvalidInputError) as err:
        READERS[var]({var: value})
    assert err.value.message.startswith(f"{var}=") and err.value.exit_code == 2
    assert "s3cr3tPW" not in err.value.message  # a password is never printed


def test_the_clouds_own_endpoints_by_default():
    assert groups.gcp_url({}) == "https://compute.googleapis.com"
    assert groups.arm_url({"HETINFRA_AZURE_ARM_URL": "http://127.0.0.1:8080/"}) == "http://127.0.0.1:8080"
