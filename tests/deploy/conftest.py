"""Fixtures for apply/destroy: a recording stand-in for the `pulumi` CLI on PATH, a planned OUT
directory, and an environment with (fake) credentials in a private HOME."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import copied_plan, install_stand_in

pytest.importorskip("pulumi")

REPO = Path(__file__).resolve().parents[2]
FAKE = Path(__file__).with_name("fake_pulumi.py")


@pytest.fixture
def fake_pulumi(fake_cloud, tmp_path, monkeypatch, request):
    """Put the stand-in on PATH; returns a function that reads its call log. Its code runs in this
    process (tests/deploy/inprocess_pulumi.py says why) unless the test is marked
    ``pulumi_subprocess``: those keep the real binary boundary (a spawned executable)."""
    exe, calls = install_stand_in(tmp_path, monkeypatch, "pulumi", FAKE.read_text(), "FAKE_PULUMI_LOG")
    monkeypatch.setenv("PATH", f"{exe.parent}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_PULUMI_REPO", str(REPO))  # it renders the cloud with tests/deploy/fake_cloud.py
    monkeypatch.delenv("FAKE_PULUMI_FAIL", raising=False)
    if request.node.get_closest_marker("pulumi_subprocess") is None:
        from tests.deploy.inprocess_pulumi import patch_in_process

        patch_in_process(monkeypatch, exe)
    return calls


@pytest.fixture
def fake_cloud(tmp_path, monkeypatch):
    """The cloud behind the stand-in (tests/deploy/fake_cloud.py), its group APIs served on loopback."""
    from tests.deploy.fake_cloud import FakeCloud

    home = tmp_path / "fake-pulumi-home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("FAKE_PULUMI_HOME", str(home))
    cloud = FakeCloud(home)
    srv, url = cloud.serve()
    for service in ("AUTO_SCALING", "ELASTIC_LOAD_BALANCING_V2"):
        monkeypatch.setenv(f"AWS_ENDPOINT_URL_{service}", url)
    monkeypatch.setenv("HETINFRA_GCP_COMPUTE_URL", url)
    monkeypatch.setenv("HETINFRA_AZURE_ARM_URL", url)
    yield cloud
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def pulumi_stacks(tmp_path):
    """What the stand-in holds per project folder name: {cloud: {stack: {config, outputs, resources, declared}}}."""
    def read() -> dict:
        db = tmp_path / "fake-pulumi-home" / "db.json"
        # "cloud" holds the stand-in cloud behind the stacks (tests/deploy/fake_cloud.py), not a project
        return {Path(k).name: v for k, v in json.loads(db.read_text()).items() if k != "cloud"} if db.exists() else {}

    return read


@pytest.fixture
def cloud_env(tmp_path, monkeypatch):
    """A private HOME with no cloud config, plus the env a deploy needs (fake values)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CREDENTIALS",
                "ARM_CLIENT_ID", "AZURE_CLIENT_ID", "HF_TOKEN", "GOOGLE_OAUTH_ACCESS_TOKEN", "AZURE_ACCESS_TOKEN",
                "CLOUDSDK_CORE_PROJECT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFAKE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(home / "sa.json"))
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "demo-project-1")  # the setting docs/guides/pulumi.md gives for the gcp stack
    # the tokens `status` reads GCP's instance groups and Azure's scale sets with (tests/deploy/fake_cloud.py);
    # no quota read with them: the clouds' quota APIs are not served here
    monkeypatch.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "gcp-token")
    monkeypatch.setenv("AZURE_ACCESS_TOKEN", "arm-token")
    monkeypatch.setenv("AZURE_SUBSCRIPTION_ID", "sub-1")
    monkeypatch.setenv("HETINFRA_PREFLIGHT_QUOTAS", "0")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "test-passphrase")
    monkeypatch.setenv("VLLM_API_KEY", "sk-test-key")
    return home


def middle_of(name: str) -> dict:
    """services/<name>.yaml with planning.confidence: expected (rates at their interval's middle): the
    fleet these tests pin. --no-verify plans apply planning.confidence too, and the default (safe)
    plans extrapolated templates at their interval's low end: a bigger fleet."""
    spec = yaml.safe_load((REPO / "services" / f"{name}.yaml").read_text())
    spec.setdefault("planning", {})["confidence"] = "expected"
    return spec


def at_the_middle(tmp_path: Path, name: str) -> Path:
    """middle_of(name) written in ``tmp_path``; returns its path."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(middle_of(name), sort_keys=False))
    return path


@pytest.fixture
def planned_out(tmp_path, shared_plan):
    """`hetinfra plan services/multi-region.yaml --out OUT` (AWS and GCP units), at the rates' middle:
    the run's one plan of it (tests/conftest.py shared_plan, exit 0 asserted there), copied into this
    test's own OUT."""
    return copied_plan(shared_plan(middle_of("multi-region"), "--no-baselines", "--no-verify"), tmp_path / "out")


class SkyCalls(list):
    """SkyPilot SDK requests made (name, args, kwargs); ``replicas`` sets what ``serve.status``
    answers: service -> replica statuses (names of sky.serve.ReplicaStatus)."""

    replicas: dict[str, list[str]]


@pytest.fixture
def sky_sdk(sky_offline, monkeypatch):
    """SkyPilot's SDK mocked at its request boundary (the request calls and stream_and_get)."""
    sky, _ = sky_offline
    from sky.client import sdk

    calls = SkyCalls()
    calls.replicas = {}
    results: dict[str, object] = {}

    def request(name, result):
        def fn(*args, **kwargs):
            rid = f"req-{len(calls)}"
            calls.append((name, args, kwargs))
            results[rid] = result(*args, **kwargs) if callable(result) else result
            return rid
        return fn

    def status(names):
        return [{"name": n, "status": sky.serve.ServiceStatus.READY,
                 "replica_info": [{"replica_id": i + 1, "status": sky.serve.ReplicaStatus[s]}
                                  for i, s in enumerate(calls.replicas[n])]}
                for n in names if n in calls.replicas]

    monkeypatch.setattr(sdk, "enabled_clouds", request("enabled_clouds", ["AWS", "GCP"]))
    monkeypatch.setattr(sky.serve, "up", request("serve.up", lambda task, name: (name, f"{name}.sky.example:30001")))
    monkeypatch.setattr(sky.serve, "update", request("serve.update", None))
    monkeypatch.setattr(sky.serve, "down", request("serve.down", None))
    monkeypatch.setattr(sky.serve, "status", request("serve.status", status))
    monkeypatch.setattr(sky, "stream_and_get", lambda rid, **kw: results[rid])
    return calls
