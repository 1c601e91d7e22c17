"""Images pinned by id across applies (hetinfra.deploy.images) against the recording stand-in: the
first apply records the newest, later applies pin it whatever is released, `--update-images` moves
to the newest; Azure's 'latest' is resolved to a concrete version through the ARM API (loopback)."""

from __future__ import annotations

import json
import re

import pytest

from hetinfra.deploy import images
from hetinfra.document import Plan
from hetinfra.document.state import State
from tests.conftest import QuietHandler, loopback_server
from tests.plan.golden_plans import filled_golden


def _image_configs(calls, cloud):
    """The hetinfra:images values set in ``cloud``'s project, in order."""
    return [json.loads(c["argv"][-1]) for c in calls if c["cwd"].endswith(f"/pulumi/{cloud}")
            and [a for a in c["argv"] if a != "--non-interactive"][:3] == ["config", "set", "hetinfra:images"]]


def test_images_are_pinned_after_the_first_apply_until_update_images(fake_pulumi, cloud_env, planned_out, run_cli,
                                                                      monkeypatch):
    assert run_cli("apply", str(planned_out), "--yes")[0] == 0
    assert _image_configs(fake_pulumi(), "aws") == [{}, {}]  # preview and up: nothing pinned yet, up takes the newest
    state = json.loads((planned_out / "state.json").read_text())
    assert state["images"] == {"aws": {"us-east-1": {"gpu": "aws-image-1"}, "us-west-2": {"gpu": "aws-image-1"}},
                               "gcp": {"us-east4": {"gpu": "gcp-image-1"}}}

    monkeypatch.setenv("FAKE_CLOUD_NEWEST_IMAGE", "image-2")  # a new image release
    code, stdout, err = run_cli("apply", str(planned_out), "--yes")
    assert code == 0, err
    assert _image_configs(fake_pulumi(), "aws")[-1] == state["images"]["aws"]  # the recorded ids, pinned
    assert json.loads((planned_out / "state.json").read_text())["images"] == state["images"]
    assert "a newer gpu image exists for aws/us-east-1: image-2 (running aws-image-1)" in stdout
    assert "--update-images" in stdout

    code, stdout, err = run_cli("apply", str(planned_out), "--yes", "--update-images")
    assert code == 0, err
    assert "--update-images: aws/us-east-1 gpu image aws-image-1 -> the newest at `up`" in stdout
    # Pulumi's preview shows what the new image does: GCP's immutable instance templates are replaced,
    # AWS's launch templates get a new version in place
    assert "!! REPLACE GPU template" in stdout and "(because disks changed)" in stdout
    aws = re.search(r"  aws \(stack prod\): 0 to create, (\d+) to update, 0 to replace", stdout)
    assert aws and int(aws.group(1)) >= 3  # at least the three units' launch templates
    assert _image_configs(fake_pulumi(), "gcp")[-1] == {}
    after = json.loads((planned_out / "state.json").read_text())["images"]
    assert after["aws"]["us-east-1"] == {"gpu": "image-2"} and after["gcp"]["us-east4"] == {"gpu": "image-2"}


@pytest.fixture
def arm_server():
    """A loopback ARM API listing an image's versions (bearer token required)."""
    seen: list[str] = []

    class Handler(QuietHandler):
        def do_GET(self):  # noqa: N802
            seen.append(self.path)
            ok = self.headers.get("Authorization") == "Bearer arm-token"
            body = json.dumps([{"name": v, "location": "eastus"} for v in
                               ("22.04.2024101001", "22.04.2025010101", "22.04.2024123101")]).encode()
            self.send_response(200 if ok else 401)
            self.end_headers()
            self.wfile.write(body if ok else b"{}")

    with loopback_server(Handler) as (_, url):
        yield url, seen


def test_azure_latest_is_resolved_to_the_newest_concrete_version(arm_server):
    url, seen = arm_server
    plan = filled_golden("chat")  # a whole plan.json (pins_for_up reads its model) with one Azure unit in eastus
    plan["allocations"] = [dict(plan["allocations"][0], cloud="azure", region="eastus")]
    plan["deploy"] = {}
    plan = Plan.parse(plan)
    env = {"AZURE_ACCESS_TOKEN": "arm-token", "AZURE_SUBSCRIPTION_ID": "sub-1", "PATH": "/nonexistent"}
    notes: list[str] = []
    none = State.model_validate({"state_version": 1})  # pins_for_up reads state.json's model
    pins = images.pins_for_up(none, plan, "azure", update=False, env=env, notes=notes, azure_url=url)
    assert pins == {"eastus": {"gpu": "22.04.2025010101"}} and notes == []
    assert seen == ["/subscriptions/sub-1/providers/Microsoft.Compute/locations/eastus/publishers/microsoft-dsvm/"
                    "artifacttypes/vmimage/offers/ubuntu-hpc/skus/2204/versions?api-version=2024-07-01"]
    # a pinned version is kept (no lookup); without credentials the VMs get 'latest' and apply says so
    recorded = State.model_validate({"state_version": 1, "images": {"azure": {"eastus": {"gpu": "22.04.2024101001"}}}})
    assert images.pins_for_up(recorded, plan, "azure", update=False, env=env, notes=notes, azure_url=url) == \
        recorded.images["azure"] and len(seen) == 1
    pins = images.pins_for_up(none, plan, "azure", update=False, env={"PATH": "/nonexistent"}, notes=notes,
                              azure_url=url)
    assert pins == {} and "azure/eastus gpu image not pinned: no Azure token" in notes[0]
