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
