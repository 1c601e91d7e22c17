"""stacks.names.fit_names, the one rule that names resources the clouds accept: for any logical name, a
resource of a limited type ends with a name within its cloud's limit (given, or Pulumi's: the logical name
and 8 characters), a name it was given is kept, and a name that fits as Pulumi makes it is not set (a
deployed stack keeps its names). tests/stacks/test_resource_names.py runs the stacks themselves."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

pulumi = pytest.importorskip("pulumi")

from hetinfra.stacks.fleet import AUTONAME_SUFFIX  # noqa: E402
from hetinfra.stacks.names import NAME_LIMITS, fit_names  # noqa: E402

LOGICAL = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=200)


def _args(typ: str, name: str, props: dict) -> pulumi.ResourceTransformationArgs:
    return pulumi.ResourceTransformationArgs(resource=None, type_=typ, name=name, props=props,
                                             opts=pulumi.ResourceOptions())


@settings(derandomize=True, max_examples=200, deadline=None)
@given(typ=st.sampled_from(sorted(NAME_LIMITS)), name=LOGICAL)
def test_every_limited_resource_ends_within_its_limit(typ, name):
    arg, limit = NAME_LIMITS[typ]
    out = fit_names(_args(typ, name, {"location": "x"}))
    if len(name) + AUTONAME_SUFFIX <= limit:
        assert out is None  # Pulumi's own name fits: left to Pulumi, as deployed stacks have it
    else:
        assert len(out.props[arg]) <= limit and out.props["location"] == "x"
        assert out.props[arg][:limit - 9].rstrip("-") == name[:limit - 9].rstrip("-")  # readable head kept


@settings(derandomize=True, max_examples=50, deadline=None)
@given(typ=st.sampled_from(sorted(NAME_LIMITS)), name=LOGICAL)
def test_a_given_name_and_other_types_are_left_alone(typ, name):
    arg, _ = NAME_LIMITS[typ]
    assert fit_names(_args(typ, name * 3, {arg: "chosen"})) is None
    assert fit_names(_args("aws:ec2/vpc:Vpc", name * 3, {})) is None
