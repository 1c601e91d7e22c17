"""Fixtures for apply/destroy: a recording stand-in for the `pulumi` CLI on PATH, a planned OUT
directory, and an environment with (fake) credentials in a private HOME."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import install_stand_in

pytest.importorskip("pulumi")

REPO = Path(__file__).resolve().parents[2]
FAKE = Path(__file__).with_name("fake_pulumi.py")


@pytest.fixture
def fake_pulumi(tmp_path, monkeypatch):
    """Put the stand-in on PATH; returns a function that reads its call log."""
    exe, calls = install_stand_in(tmp_path, monkeypatch, "pulumi", FAKE.read_text(), "FAKE_PULUMI_LOG")
    home = tmp_path / "fake-pulumi-home"
    home.mkdir()
    monkeypatch.setenv("PATH", f"{exe.parent}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_PULUMI_HOME", str(home))
    monkeypatch.delenv("FAKE_PULUMI_FAIL", raising=False)
    return calls


@pytest.fixture
def pulumi_stacks(tmp_path):
    """What the stand-in holds per project folder name: {cloud: {stack: {config, outputs, resources}}}."""
    def read() -> dict:
        db = tmp_path / "fake-pulumi-home" / "db.json"
        return {Path(k).name: v for k, v in json.loads(db.read_text()).items()} if db.exists() else {}

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
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "demo-project-1")  # the README's setting for the gcp stack
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "test-passphrase")
    monkeypatch.setenv("VLLM_API_KEY", "sk-test-key")
    return home


@pytest.fixture
def planned_out(tmp_path, run_cli):
    """`hetinfra plan services/multi-region.yaml --out OUT` (AWS and GCP units)."""
    out = tmp_path / "out"
    code, stdout, stderr = run_cli("plan", str(REPO / "services" / "multi-region.yaml"), "--out", str(out),
                                   "--no-baselines", "--no-verify")
    assert code == 0, stderr
    return out
