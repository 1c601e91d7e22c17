"""hetinfra.spec.deploy's readers of the values the VMs and Pulumi receive as written: firewall CIDRs, the admin
SSH key and the Pulumi backend. Each was accepted whatever it held and failed (or widened a firewall) only at
apply; now the spec (and plan.json's deploy, the same model) refuses it at its line."""

from __future__ import annotations

import base64
import ipaddress
import struct
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings, strategies as st
from pydantic import ValidationError

from hetinfra.document.sections import PlanDeploy
from hetinfra.errors import InvalidInputError
from hetinfra.spec.deploy import BACKEND_SCHEMES, DeploySpec
from hetinfra.spec.load import load_spec

REPO = Path(__file__).resolve().parents[2]


def _key(kind: str, body: bytes = bytes(range(32)), comment: str = "you@host") -> str:
    """An OpenSSH public key line whose blob is RFC 4253's: TYPE then the key's bytes, each length-prefixed."""
    blob = struct.pack(">I", len(kind)) + kind.encode() + struct.pack(">I", len(body)) + body
    return f"{kind} {base64.b64encode(blob).decode()} {comment}"


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.ip_addresses(v=4), st.integers(0, 32))
def test_property_a_cidr_is_a_network_or_refused_naming_the_network_and_the_host(address, prefix):
    """Host bits under the prefix (10.0.0.1/8) were read as the whole network: a rule meant for one host
    opened a /8. Refused, saying both what the prefix means and the host's /32."""
    c = f"{address}/{prefix}"
    net = ipaddress.ip_network(c, strict=False)
    for field in ("ingress_cidrs", "ssh_cidrs", "management_cidrs"):
        if net.network_address == address:
            assert getattr(DeploySpec.model_validate({field: [c]}), field) == [c]
            continue
        with pytest.raises(ValidationError) as exc:
            DeploySpec.model_validate({field: [c]})
        assert f"host bits set under its /{prefix}" in str(exc.value)
        assert f"write {net} for the whole network, or {address}/32 for that one host" in str(exc.value)


@settings(max_examples=150, derandomize=True, deadline=None)
@given(st.sampled_from(["ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "sk-ssh-ed25519@openssh.com"]),
       st.binary(min_size=1, max_size=64), st.sampled_from(["", "you@host"]))
def test_property_an_ssh_key_is_accepted_only_when_its_blob_names_its_type(kind, body, comment):
    """A key line whose base64 decodes to a blob that begins with its own type is accepted (plan.json's deploy
    too); one naming another type, cut short, or not base64 is refused ('ssh-ed25519 AAAA' was accepted)."""
    good = _key(kind, body, comment).strip()
    assert DeploySpec.model_validate({"ssh_public_key": good}).ssh_public_key == good
    assert PlanDeploy.model_validate({"ssh_public_key": good}).ssh_public_key == good
    other = "ssh-rsa" if kind != "ssh-rsa" else "ssh-ed25519"
    wrong_type = f"{other} {good.split()[1]}"
    cut = f"{kind} {base64.b64encode(struct.pack('>I', len(kind)) + kind.encode()).decode()}"
    for bad in (wrong_type, cut, f"{kind} AAAA", f"{kind} {good.split()[1][:-1]}"):
        with pytest.raises(ValidationError, match="one line of an OpenSSH public key"):
            DeploySpec.model_validate({"ssh_public_key": bad})


@pytest.mark.parametrize("url, ok", [*((f"{s}://x/state", True) for s in BACKEND_SCHEMES),
                                     ("S3://bucket", True), ("ftp://x", False), ("./state", False),
                                     ("bucket/state", False), ("mailto://a", False)])
def test_a_backend_url_is_one_pulumi_logs_in_to(url, ok):
    if ok:
        assert DeploySpec.model_validate({"backend_url": url}).backend_url == url
        return
    with pytest.raises(ValidationError, match="is not a Pulumi backend: use one of file://, s3://"):
        DeploySpec.model_validate({"backend_url": url})


@pytest.mark.parametrize("deploy, says", [
    ({"ingress_cidrs": ["10.0.0.1/8"]}, "'10.0.0.1/8' has host bits set under its /8"),
    ({"ssh_public_key": "ssh-ed25519 AAAA you@host"}, "ssh_public_key must be one line of an OpenSSH public key"),
    ({"backend_url": "ftp://x"}, "backend_url 'ftp://x' is not a Pulumi backend"),
])
def test_the_spec_refuses_each_at_its_line(tmp_path, deploy, says):
    doc = yaml.safe_load((REPO / "services" / "chat.yaml").read_text())
    doc["deploy"] = deploy
    p = tmp_path / "service.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(InvalidInputError, match=r"service.yaml:\d+:\d+: ") as exc:
        load_spec(p)
    assert says in exc.value.message


#: real VM types of each cloud's gateway field (hetinfra.spec.deploy.VM_TYPE_SHAPES)
REAL_VM_TYPES = {
    "aws_instance_type": ["c7i.large", "t3.micro", "t4g.nano", "m7i-flex.large", "c7gd.metal", "u-6tb1.metal",
                          "i7ie.metal-24xl", "p6-b200.48xlarge", "m5.24xlarge", "r7iz.medium", "t3a.small"],
    "gcp_machine_type": ["e2-standard-2", "e2-micro", "f1-micro", "n2-custom-4-8192", "n2d-highcpu-8",
                         "c3-standard-4-lssd", "a2-highgpu-1g", "t2a-standard-1"],
    "azure_vm_size": ["Standard_D2s_v5", "Standard_B2s", "Basic_A1", "Standard_NC24ads_A100_v4", "Standard_F2s_v2",
                      "Standard_D2as_v5", "Standard_E4-2s_v4", "Standard_M128-64ms"],
}


def _respelled(name: str, how: int) -> str:
    """``name`` as a hand may mistype it: its separators swapped for another's, upper case, or a prefix lost."""
    return [name.replace(".", "-"), name.replace("-", "."), name.replace("_", "-"), name.upper(),
            name.split("_", 1)[-1], name.replace(".", ""), name.replace("-", "_")][how]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(REAL_VM_TYPES)), st.sampled_from(sorted(REAL_VM_TYPES)), st.data())
def test_property_a_gateway_vm_type_has_its_clouds_shape(field, source, data):
    """A gateway VM type is checked at the spec for its cloud's shape: a real type of the cloud passes, another
    cloud's, or one of its own respelled (``c7i-large``, ``e2.standard.2``, ``D2s_v5``), is refused naming the field;
    Pulumi handed it to the cloud as written and `pulumi up` failed, after `apply` had begun."""
    name = data.draw(st.sampled_from(REAL_VM_TYPES[source]))
    how = data.draw(st.integers(0, 6))
    wrong = _respelled(name, how)
    if source == field:
        assert DeploySpec.model_validate({"gateway": {field: name}}).gateway
    candidates = [wrong] if source == field else [name]  # another cloud's real type, as it is
    for value in candidates:
        if value in REAL_VM_TYPES[field]:
            continue  # respelled into a real type of this cloud
        if source == field and (value == name or (field == "azure_vm_size" and how in (3, 6))):
            continue  # unchanged by the respelling, Azure's sizes in another case (Azure reads them so), or its
            # constrained size's hyphen as an underscore (Standard_E4_2s_v4: a size's shape, whether Azure has it or not)
        with pytest.raises(ValidationError, match=rf"{field}\n.*is not a VM type of its cloud"):
            DeploySpec.model_validate({"gateway": {field: value}})
