"""SkyPilot and prefill/decode bundles across nodes: SkyPilot 0.14.1 cannot run them as planned
(hetinfra.compile.skypilot.skypilot_refusal), so no task is written for them and `apply --target
skypilot` refuses them (exit 2) naming the targets that run them. The reasons are SkyPilot's own
facts, read here from its library: a release that changes one fails this test."""

from __future__ import annotations

import inspect
import re

import pytest

from hetinfra.compile.artifacts import sky_units, write_plan
from hetinfra.compile.skypilot import skypilot_refusal
from hetinfra.deploy.apply import path_of
from hetinfra.document import Plan
from hetinfra.errors import InvalidInputError
from tests.compile.split_plan import UNIT, split_plan


@pytest.mark.xdist_group("skypilot")  # it imports sky: on the worker that has (tests/xdist_groups.py)
def test_skypilot_cannot_give_a_task_the_placement_and_network_a_bundle_across_nodes_needs():
    from sky import clouds
    from sky.provision.aws import config as aws_config
    from sky.skylet import constants

    # a task may not turn on every EFA interface: aws.use_internal_ips is the user's config only
    assert ("aws", "use_internal_ips") not in constants.OVERRIDEABLE_CONFIG_KEYS_IN_TASK
    # SkyPilot defines an AWS cluster placement group but never creates one
    assert inspect.getsource(aws_config).count("_configure_placement_group(") == 1
    # Azure has no network tier at all
    on_demand = type("R", (), {"use_spot": False, "instance_type": None, "accelerators": None})()
    unsupported = clouds.Azure._unsupported_features_for_resources(on_demand)  # pylint: disable=protected-access
    assert clouds.CloudImplementationFeatures.CUSTOM_NETWORK_TIER in unsupported


@pytest.mark.parametrize("shape, why", [("across", "no cluster placement group.*one EFA interface of the 16"),
                                        ("hetero", "different instance types")])
def test_no_task_is_written_and_apply_refuses_skypilot_naming_the_targets(shape, why, tmp_path):
    plan = Plan.parse(split_plan(shape))
    a = plan.allocations[0]
    assert re.search(why, skypilot_refusal(a)) and UNIT in skypilot_refusal(a)
    assert sky_units(plan) == [] and [u.name for u in sky_units(plan, include_mixed=True)] == [UNIT]
    written = write_plan(tmp_path / "out", plan)
    assert written["skypilot"] == [] and written["pulumi"]
    with pytest.raises(InvalidInputError, match=f"{UNIT} is a prefill/decode bundle across 2 nodes") as err:
        path_of(a, "skypilot", plan)
    assert "--target pulumi" in err.value.hint and "kubernetes" in err.value.hint
    assert path_of(a, "all", plan) == "pulumi"


def test_a_one_node_bundle_still_runs_on_skypilot():
    plan = Plan.parse(split_plan())
    assert skypilot_refusal(plan.allocations[0]) is None and [u.name for u in sky_units(plan)] == [UNIT]


@pytest.mark.parametrize("cloud, why", [("gcp", "RoCE network profile"), ("azure", "one scale set")])
def test_the_pulumi_path_refuses_a_bundle_across_nodes_off_aws_and_says_re_plan(cloud, why):
    plan = Plan.parse(split_plan("across"))
    a = plan.allocations[0].model_copy(update={"cloud": cloud})
    for target in ("pulumi", "all", "skypilot"):
        with pytest.raises(InvalidInputError, match=why) as err:
            path_of(a, target, plan)
        # not "deploy.target: kubernetes": GKE and AKS refuse the same bundle (ACROSS_NODES_REFUSED)
        assert "re-plan" in err.value.hint and "aws" in err.value.hint


def test_a_type_with_one_efa_interface_is_refused_for_the_placement_group_alone():
    a = Plan.parse(split_plan("across")).allocations[0].model_copy(update={"instance_type": "g6.48xlarge"})
    why = skypilot_refusal(a)
    assert "no cluster placement group" in why and "EFA interface" not in why
