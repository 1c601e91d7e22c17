"""deploy.target kubernetes and deploy.kubernetes: additive, so plan.json of the other targets keeps
its bytes; bad cluster keys are clear errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from hetinfra.spec.deploy import DeploySpec

NEW_KEYS = {"target", "kubernetes"}


@settings(max_examples=40, deadline=None)
@given(port=st.integers(1024, 65535), autoscale=st.booleans(), runtime=st.sampled_from(["container", "virtualenv"]),
       gateway=st.booleans())
def test_the_vm_target_dumps_as_before(port, autoscale, runtime, gateway):
    d = DeploySpec(port=port, autoscale=autoscale, runtime=runtime, gateway={"enabled": gateway})
    dump = d.model_dump()
    assert not NEW_KEYS & set(dump) and "kind" not in dump["gateway"]
    assert DeploySpec.model_validate(dump) == d  # the dump reads back to the same spec


def test_the_kubernetes_target_dumps_its_settings():
    d = DeploySpec(target="kubernetes", gateway={"kind": "inference-extension"},
                   kubernetes={"clusters": {"gcp/us-central1": {"context": "gke-1"}}, "scaler": "keda"})
    dump = d.model_dump()
    assert dump["target"] == "kubernetes" and dump["gateway"]["kind"] == "inference-extension"
    assert dump["kubernetes"]["clusters"]["gcp/us-central1"] == {"context": "gke-1", "namespace": "hetinfra",
                                                                 "cluster_name": None, "node_role": None}
    assert DeploySpec.model_validate(dump) == d


@pytest.mark.parametrize("clusters, match", [
    ({"aws-us-east-1": {"context": "x"}}, "must be cloud/region"),
    ({"aws/us-east-1": {"context": ""}}, "at least 1 character"),
    ({"aws/us-east-1": {"context": "x", "namespace": "Bad_NS"}}, "namespace 'Bad_NS' must be lowercase"),
    ({"aws/us-east-1": {"contxt": "x"}}, "contxt"),
])
def test_bad_cluster_settings_are_clear(clusters, match):
    with pytest.raises(ValidationError, match=match):
        DeploySpec(target="kubernetes", kubernetes={"clusters": clusters})


def test_a_bad_cluster_key_exits_2_naming_the_field(tmp_path, run_cli):
    import yaml

    from tests.conftest import REPO

    spec = yaml.safe_load((REPO / "services" / "chat.yaml").read_text())
    spec["deploy"] = {"target": "kubernetes", "kubernetes": {"clusters": {"aws-us-east-1": {"context": "x"}}}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    code, out, err = run_cli("plan", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "out"))
    assert code == 2
    assert "kubernetes.clusters" in err and "cloud/region" in err and "Traceback" not in err
