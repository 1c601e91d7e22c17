"""`hetinfra apply`'s preflight: a bad plan.json field, a missing cloud setting, another service's
out dir, a disk too small or a quota below the plan each stop apply before anything is asked or
changed, with the documented exit code; every example passes with the settings docs/guides/pulumi.md (Preflight) gives."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml
from hetinfra.document import Plan  # apply_plan takes the typed plan

from tests.deploy.conftest import REPO, at_the_middle

SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHetinfraTestKeyOnly me@host"


def _tree(out: Path) -> dict[str, str]:
    """Every file under OUT and a hash of its bytes: 'nothing changed' is this, unchanged."""
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.rglob("*")) if p.is_file()}


def _edit(out: Path, fn) -> None:
    plan = json.loads((out / "plan.json").read_text())
    fn(plan)
    (out / "plan.json").write_text(json.dumps(plan))


def _set_alloc(key, value, i=0):
    return lambda p: p["allocations"][i].__setitem__(key, value)


BAD_FIELDS = [
    ("count -3", _set_alloc("count", -3), "allocations[0].count"),
    ("count as text", _set_alloc("count", "2"), "allocations[0].count"),
    ("injected instance type", _set_alloc("instance_type", "p4de.24xlarge; rm -rf /"), "allocations[0].instance_type"),
    ("unknown instance type", _set_alloc("instance_type", "g9z.mega"), "not a aws instance type in the offer catalog"),
    ("region the type is not sold in", _set_alloc("region", "us-east-7"), "is not sold in region 'us-east-7'"),
    ("plan_version 7", lambda p: p.__setitem__("plan_version", 7), "plan_version"),
    ("instances != count x nodes", _set_alloc("instances", 99), "allocations[0].instances"),
    ("task path outside skypilot/", _set_alloc("skypilot_task", "../../etc/passwd"), "allocations[0].skypilot_task"),
    ("model source with $()", lambda p: p["models"][0].__setitem__("source", "x/$(curl evil)"), "models[0].source"),
    ("region with backticks", _set_alloc("region", "us-east-1`id`"), "allocations[0].region"),
    ("deploy cidr", lambda p: p["deploy"].__setitem__("ingress_cidrs", ["10.0.0.0/8; reboot"]), "deploy.ingress_cidrs"),
    ("vllm version", lambda p: p["deploy"].__setitem__("vllm_version", "0.11.0 && curl x"), "deploy.vllm_version"),
    ("service name", lambda p: p.__setitem__("service", "Chat Service"), "service"),
    ("negative price", _set_alloc("cost_usd_per_hour", -1.0), "allocations[0].cost_usd_per_hour"),
]


@pytest.mark.parametrize("label,edit,where", BAD_FIELDS, ids=[b[0] for b in BAD_FIELDS])
def test_bad_plan_fields_exit_2_and_change_nothing(label, edit, where, fake_pulumi, cloud_env, planned_out, run_cli):
    _edit(planned_out, edit)
    before = _tree(planned_out)
    code, stdout, err = run_cli("apply", str(planned_out), "--yes")
    assert code == 2, (label, err)
    assert where in err and "plan.json" in err
    assert fake_pulumi() == []  # not even `pulumi version`: the plan is checked first
    assert _tree(planned_out) == before and not (planned_out / "state.json").exists()
    assert "Proceed" not in stdout and "instance(s) to add" not in stdout


def test_missing_gcp_project_exits_2_before_anything(fake_pulumi, cloud_env, planned_out, run_cli, monkeypatch):
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT")
    before = _tree(planned_out)
    code, _, err = run_cli("apply", str(planned_out), "--yes")
    assert code == 2 and "gcp stack needs a GCP project" in err and "deploy.gcp_project" in err
    assert [c for c in fake_pulumi() if c["argv"][:1] != ["version"]] == []
    assert _tree(planned_out) == before
    # the project from the environment lands in the stack config (so plain `pulumi destroy` works too)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "proj-from-env")
    assert run_cli("apply", str(planned_out), "--yes")[0] == 0
    cfg = yaml.safe_load((planned_out / "pulumi" / "gcp" / "Pulumi.prod.yaml").read_text())
    assert cfg["config"]["gcp:project"] == "proj-from-env"


def _plan_example(run_cli, tmp_path: Path, name: str, **deploy) -> Path:
    spec = yaml.safe_load((REPO / "services" / f"{name}.yaml").read_text())
    spec.setdefault("deploy", {}).update(deploy)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    out = tmp_path / f"out-{name}"
    code, _, err = run_cli("plan", str(path), "--out", str(out), "--no-baselines", "--no-verify")
    assert code == 0, err
    return out


def test_azure_without_ssh_key_exits_2(fake_pulumi, cloud_env, run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("ARM_CLIENT_ID", "fake")
    out = _plan_example(run_cli, tmp_path, "batch")  # as shipped: Azure in the plan, no ssh_public_key
    assert any(a["cloud"] == "azure" for a in json.loads((out / "plan.json").read_text())["allocations"])
    before = _tree(out)
    code, _, err = run_cli("apply", str(out), "--yes")
    assert code == 2 and "deploy.ssh_public_key is not set" in err
    assert _tree(out) == before and [c for c in fake_pulumi() if c["argv"][:1] != ["version"]] == []


@pytest.mark.parametrize("name", sorted(p.stem for p in (REPO / "services").glob("*.yaml")))
def test_every_example_passes_preflight_with_the_readme_settings(name, fake_pulumi, cloud_env, run_cli, tmp_path,
                                                                 monkeypatch):
    # docs/guides/pulumi.md (Preflight): GOOGLE_CLOUD_PROJECT (or deploy.gcp_project) for GCP, deploy.ssh_public_key for Azure
    monkeypatch.setenv("ARM_CLIENT_ID", "fake")
    out = _plan_example(run_cli, tmp_path, name, ssh_public_key=SSH_KEY)
    code, stdout, err = run_cli("apply", str(out), "--yes")
    assert code == 0, err
    state = json.loads((out / "state.json").read_text())
    plan = json.loads((out / "plan.json").read_text())
    assert state["service"] == plan["service"] and state["service_id"] == plan["service_id"]


def test_another_services_out_dir_is_refused_without_force(fake_pulumi, cloud_env, planned_out, run_cli, tmp_path):
    assert run_cli("apply", str(planned_out), "--yes")[0] == 0
    running = json.loads((planned_out / "state.json").read_text())
    # chat's plan written into multi-region's out dir: --yes must not replace the running service
    code, _, err = run_cli("plan", str(at_the_middle(tmp_path, "chat")), "--out", str(planned_out),
                           "--no-baselines", "--no-verify")
    assert code == 0, err
    calls = len(fake_pulumi())
    code, _, err = run_cli("apply", str(planned_out), "--yes")
    assert code == 2 and "runs service 'assistants'" in err and "plan.json is for service 'chat'" in err
    assert "--force" in err
    assert len(fake_pulumi()) == calls
    assert json.loads((planned_out / "state.json").read_text()) == running
    code, _, err = run_cli("apply", str(planned_out), "--yes", "--force")
    assert code == 0, err
    assert json.loads((planned_out / "state.json").read_text())["service"] == "chat"


def test_same_name_from_another_spec_is_refused(fake_pulumi, cloud_env, planned_out, run_cli, tmp_path):
    assert run_cli("apply", str(planned_out), "--yes")[0] == 0
    other = tmp_path / "elsewhere" / "multi-region.yaml"
    other.parent.mkdir()
    other.write_text((REPO / "services" / "multi-region.yaml").read_text())
    assert run_cli("plan", str(other), "--out", str(planned_out), "--no-baselines", "--no-verify")[0] == 0
    code, _, err = run_cli("apply", str(planned_out), "--yes")
    assert code == 2 and "planned from another spec" in err


def test_explicit_disk_too_small_for_the_weights_exits_2(fake_pulumi, cloud_env, planned_out, run_cli):
    _edit(planned_out, lambda p: p["deploy"].__setitem__("disk_gb", 200))
    before = _tree(planned_out)
    code, _, err = run_cli("apply", str(planned_out), "--yes")
    # the first 70B unit (AWS p3.8xlarge) downloads 141 GB of bf16 weights + 25 GB image + 75 GB AWS image,
    # +10% = 265 GB, rounded up to 270 (the GCP unit's 50 GB image gives 240)
    assert code == 2 and "deploy.disk_gb is 200 GB" in err and "code-70b-aws" in err and "needs 270 GB" in err
    assert _tree(planned_out) == before


def test_unset_disk_is_sized_per_unit(planned_out):
    from hetinfra.compile.disk import disk_gb
    from hetinfra.document import Allocation, Plan

    def disk(plan: dict, alloc: dict) -> int:  # disk_gb takes the models
        return disk_gb(Plan.parse(plan), Allocation.model_validate(alloc))

    plan = json.loads((planned_out / "plan.json").read_text())
    assert plan["deploy"]["disk_gb"] is None
    sizes = {a["model"]: disk(plan, a) for a in plan["allocations"]}
    assert sizes["code-70b"] == 240 and sizes["chat-8b"] in (110, 130)
    assert all(m["params"] > 1e9 for m in plan["models"])
    big = dict(plan, models=[dict(plan["models"][0], model="custom-405b", params=405e9), *plan["models"][1:]])
    alloc = dict(plan["allocations"][0], model=plan["models"][0]["name"])
    assert disk(big, alloc) > 810  # a 405B model's 810 GB of weights fit


def test_quota_below_the_plan_exits_4_and_changes_nothing(fake_pulumi, cloud_env, planned_out):
    from hetinfra.deploy.apply import apply_plan
    from hetinfra.errors import ProviderError
    from hetinfra.price_feeds.caps import AvailabilityCap

    plan = json.loads((planned_out / "plan.json").read_text())
    a = next(x for x in plan["allocations"] if x["cloud"] == "gcp")
    purchase = "spot" if a["spot"] else "on-demand"
    caps = lambda allocs: [AvailabilityCap("gcp", a["region"], a["gpu"], 0, purchase)]  # noqa: E731
    before = _tree(planned_out)
    with pytest.raises(ProviderError) as exc:
        apply_plan(planned_out, Plan.parse(plan), yes=True, echo=lambda s: None, quota_caps=caps)
    assert exc.value.exit_code == 4 and "the quota allows 0" in str(exc.value) and a["gpu"] in str(exc.value)
    assert _tree(planned_out) == before
    assert [c for c in fake_pulumi() if c["argv"][:1] != ["version"]] == []


def _fails(exc):
    def check():
        raise exc
    return check


@pytest.mark.parametrize("order", [0, 1])
def test_several_missing_exit_by_the_documented_rule_whatever_their_order(order):
    """gather's exit code of several missing items: 2 when any is configuration, else 4, whichever
    check ran first; each listed line names its class (docs/reference/exit-codes.md)."""
    from hetinfra.deploy.preflight import gather
    from hetinfra.errors import InvalidInputError, ProviderError

    provider = [("binaries", _fails(ProviderError("no tool"))), ("credentials", _fails(ProviderError("no login")))]
    config = [("settings", _fails(InvalidInputError("no key", hint="set it")))]
    with pytest.raises(ProviderError) as only_provider:
        gather(provider[::-1] if order else provider)
    assert only_provider.value.exit_code == 4
    assert "(2 provider: exit 4" in only_provider.value.message
    checks = config + provider if order else provider + config
    with pytest.raises(InvalidInputError) as mixed:
        gather(checks)
    lines = mixed.value.message.splitlines()
    assert mixed.value.exit_code == 2 and "(1 configuration, 2 provider: exit 2" in lines[0]
    assert lines[1:] == ["  1. [binaries] (provider, exit 4) no tool", "  2. [settings] (configuration, exit 2) no key "
                         "(fix: set it)", "  3. [credentials] (provider, exit 4) no login"]
