"""hetinfra.plan.inputs.resolve: the spec checked against offers and catalogs. A caps file's rows
(--caps FILE) are checked against the offers as the spec's own availability entries are: a cap under
a mistyped name would bind nothing, silently. The caps hetinfra names itself (--availability from the
clouds' APIs, replan's caps on a stalled unit) are taken as they are."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.errors import InvalidInputError
from hetinfra.plan.inputs import resolve
from hetinfra.price_feeds.caps import Caps
from hetinfra.price_feeds.offers import load_embedded_snapshot
from hetinfra.spec.load import load_spec

CHAT = Path(__file__).resolve().parents[2] / "services" / "chat.yaml"
#: (cloud, region, GPU) of every embedded offer: caps that bind
OFFERED = sorted({(o.cloud, o.region, o.gpu) for o in load_embedded_snapshot().offers})


def _resolve(caps: dict):
    spec = load_spec(CHAT)[0]
    return resolve(spec, CHAT, CHAT.read_text(), extra_caps=caps)


def _written(caps: dict) -> Caps:
    """``caps`` as a caps CSV's rows give them (price_feeds.caps.caps_dict)."""
    return Caps(caps, written={key: f"caps.csv:{i + 2}" for i, key in enumerate(caps)})


def _mistyped_region(region: str, cut: int) -> str:
    """``region`` with one of its characters dropped (us-east-1 -> us-east1, useast-1, ...)."""
    return region[:cut % len(region)] + region[cut % len(region) + 1:]


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(OFFERED), st.integers(0, 40), st.integers(0, 64))
def test_a_cap_whose_region_or_gpu_is_mistyped_is_refused_and_an_offered_one_binds(key, cut, n):
    cloud, region, gpu = key
    assert _resolve(_written({key: n})).caps[key] == n
    wrong = _mistyped_region(region, cut)
    if not any(o[:2] == (cloud, wrong) for o in OFFERED):  # dropping a character may give another real region
        with pytest.raises(InvalidInputError, match=rf"caps.csv:2: cap {cloud}/{wrong}/{gpu}: no {cloud} offer in region"):
            _resolve(_written({(cloud, wrong, gpu): n}))
    if gpu.swapcase() != gpu:
        with pytest.raises(InvalidInputError, match=rf"unknown GPU '{gpu.swapcase()}'; did you mean '{gpu}'"):
            _resolve(_written({(cloud, region, gpu.swapcase()): n}))


def test_a_clouds_cap_on_a_gpu_nothing_offers_caps_nothing():
    """GCP's API reports a P100 quota; no offer or catalog GPU is a P100, so the cap binds nothing
    and is no error (--availability must not fail on a quota hetinfra cannot use)."""
    region = next(r for c, r, _ in OFFERED if c == "gcp")
    assert _resolve({("gcp", region, "P100"): 4}).caps[("gcp", region, "P100")] == 4


def test_replans_cap_on_a_stalled_unit_in_a_region_no_offer_is_in_today_refuses_nothing():
    """replan caps the GPU of a stalled unit where it stalled (hetinfra.replan.run._live), in the
    running plan's region; today's offers (a live feed, an edited offers CSV) may have none there.
    That cap binds nothing; refusing it (exit 2) would block the replan that moves the unit away."""
    caps = _written({("aws", "us-east-1", "L4"): 8})
    caps[("aws", "us-gone-1", "H100")] = 0  # as _propose merges the live caps into the loaded ones
    assert _resolve(caps).caps[("aws", "us-east-1", "L4")] == 8


CUSTOM = CHAT.parents[0] / "custom-gpu" / "service.yaml"


def _from_file(tmp_path, spec: Path, row: str):
    """resolve with the caps a caps CSV holding ``row`` gives, as `plan --caps FILE` loads them."""
    from hetinfra.plan.feeds import load_caps

    path = tmp_path / "caps.csv"
    path.write_text(f"cloud,region,gpu,max_gpus\n{row}\n")
    caps, _ = load_caps(path, False, load_embedded_snapshot())
    return resolve(load_spec(spec)[0], spec, spec.read_text(), extra_caps=caps)


@pytest.mark.parametrize("gpu, near", [("H100-SXM", "H100-"), ("A100-80G", "A100-80GB"), ("l40s", "L40S")])
def test_a_caps_file_rows_gpu_is_checked_as_the_specs_are_at_its_line(tmp_path, gpu, near):
    """A caps CSV is the user's file: a GPU it names that no offer or catalog knows capped nothing,
    silently, unless it differed from one in case alone; it is refused at its line as a spec's
    availability entry is. The same key from a cloud's API (a plain dict here) caps nothing."""
    with pytest.raises(InvalidInputError, match=rf"caps\.csv:2: cap aws/us-east-1/{gpu}: unknown GPU '{gpu}'; "
                                                rf"did you mean '{near}"):
        _from_file(tmp_path, CHAT, f"aws,us-east-1,{gpu},0")
    if gpu.lower() != near.lower():
        assert _resolve({("aws", "us-east-1", gpu): 0}).caps[("aws", "us-east-1", gpu)] == 0


def test_a_caps_file_may_cap_a_custom_cloud_and_gpu_that_only_the_specs_offers_declare(tmp_path):
    assert _from_file(tmp_path, CUSTOM, "neocloud,dc-1,T1,2").caps[("neocloud", "dc-1", "T1")] == 2
    with pytest.raises(InvalidInputError, match=r"caps\.csv:2: .*no neocloud offer in region 'dc1'; did you mean 'dc-1'"):
        _from_file(tmp_path, CUSTOM, "neocloud,dc1,T1,2")


def _with_availability(tmp_path: Path, entries: list[dict]) -> Path:
    import yaml

    doc = yaml.safe_load(CHAT.read_text())
    doc["infrastructure"]["availability"] = entries
    path = tmp_path / "service.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_two_availability_entries_capping_one_gpu_differently_are_refused_with_both_lines(tmp_path):
    h100 = {"cloud": "aws", "region": "us-east-1", "gpu": "H100"}
    path = _with_availability(tmp_path, [{**h100, "max_gpus": 8}, {**h100, "cloud": "AWS", "max_gpus": 8},
                                         {**h100, "max_gpus": 4}])
    spec, _, locate = load_spec(path)
    with pytest.raises(InvalidInputError) as refused:
        resolve(spec, path, path.read_text(), locate=locate)
    message = refused.value.message
    assert "infrastructure.availability[2] caps aws/us-east-1/H100 at 4 GPUs, availability[0]" in message
    assert message.startswith(f"{path}:") and message.count(f"{path}:") == 2  # both lines
    repeated = _with_availability(tmp_path, [{**h100, "max_gpus": 8}, {**h100, "max_gpus": 8}])
    spec, _, locate = load_spec(repeated)
    assert resolve(spec, repeated, repeated.read_text(), locate=locate).caps[("aws", "us-east-1", "H100")] == 8


#: every (cloud, region) an embedded offer is in
PLACES = sorted({(c, r) for c, r, _ in OFFERED})


def _places_spec(tmp_path: Path, region_of_adapter: str | None, network_key: str | None) -> Path:
    """chat.yaml with an adapter held only in ``region_of_adapter`` and a fleet network keyed ``network_key``."""
    import yaml

    doc = yaml.safe_load(CHAT.read_text())
    if region_of_adapter:
        doc["adapters"] = [{"name": "sql", "base": "chat-8b", "source": "acme/sql-lora", "rank": 16,
                            "demand": {"share": 0.2}, "regions": [region_of_adapter]}]
    if network_key:
        doc["deploy"] = {"network_cidrs": {network_key: "10.50.0.0/16"}}
    path = tmp_path / "places.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(PLACES), st.integers(0, 40), st.booleans())
def test_a_mistyped_region_an_adapter_or_a_fleet_network_names_is_refused_at_its_line(tmp_path_factory, place,
                                                                                        cut, adapter):
    """An adapter's residency ``regions`` and a ``deploy.network_cidrs`` key are checked against the
    offers as a cap's region is: a mistyped adapter region left the adapter no unit (exit 3, "no plan
    satisfies all constraints together"), a mistyped network key was ignored (the fleet kept its
    derived network). An offered region passes."""
    cloud, region = place
    wrong = _mistyped_region(region, cut)
    tmp_path = tmp_path_factory.mktemp("places")
    if adapter:
        field, good, bad = "adapters[0].regions", (region, None), (wrong, None)
        offered = {r for _, r in PLACES}
    else:
        field, good, bad = "deploy.network_cidrs", (None, f"{cloud}/{region}"), (None, f"{cloud}/{wrong}")
        offered = {r for c, r in PLACES if c == cloud}
    path = _places_spec(tmp_path, *good)
    spec, _, locate = load_spec(path)
    if not adapter:  # an adapter's region may have no unit of the base's GPUs; resolve does not plan
        assert resolve(spec, path, path.read_text(), locate=locate).spec.deploy.network_cidrs
    else:
        resolve(spec, path, path.read_text(), locate=locate)
    if wrong in offered or not wrong.strip("-") or not wrong.replace("-", "").isalnum():
        return  # dropping a character may give another real region, or a key the spec's own rule refuses
    path = _places_spec(tmp_path, *bad)
    spec, _, locate = load_spec(path)
    with pytest.raises(InvalidInputError, match=rf"^{path}:\d+:\d+: {re.escape(field)}: no .*'{wrong}'"):
        resolve(spec, path, path.read_text(), locate=locate)


def test_fleet_networks_that_overlap_are_refused_at_spec_load(tmp_path):
    """Two pinned fleet networks that overlap were refused only inside `pulumi up` (the stack's
    network plan raised a ValueError there, after `apply` had begun)."""
    import yaml

    doc = yaml.safe_load(CHAT.read_text())
    doc["deploy"] = {"network_cidrs": {"aws/us-east-1": "10.50.0.0/16", "gcp/us-central1": "10.50.16.0/20"}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(InvalidInputError, match=r"deploy\.network_cidrs: .*10\.50\.0\.0/16 and .*10\.50\.16\.0/20 overlap"):
        load_spec(path)


def test_a_fleet_network_of_a_region_this_runs_offers_lack_is_kept_not_refused(tmp_path):
    """A network key is a region of its cloud wherever this run's offers come from: under a one-region
    offers file (a negotiated price list) a pinned aws/us-west-2 network was exit 2 "no aws offer in region
    'us-west-2' ... did you mean 'us-east-1'?" (a reviewer's finding on round eight). A region no catalog
    knows is still refused."""
    import yaml

    from hetinfra.price_feeds.offers import load_offers_file

    rows = (CHAT.parents[1] / "price_feeds" / "data" / "offers_snapshot.csv").read_text().splitlines()
    one = [rows[0]] + [r for r in rows[1:] if r.startswith("aws,us-east-1,") and ",L40S,1," in r][:1]
    (tmp_path / "offers.csv").write_text("\n".join(one) + "\n")
    snapshot = load_offers_file(tmp_path / "offers.csv")  # as `plan --feeds offers.csv` reads it: these offers only
    doc = yaml.safe_load(CHAT.read_text())
    for key, ok in (("aws/us-west-2", True), ("aws/us-wset-2", False)):
        doc["deploy"] = {"network_cidrs": {"aws/us-east-1": "10.50.0.0/16", key: "10.60.0.0/16"}}
        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        spec, _, locate = load_spec(path)
        if ok:
            assert key in resolve(spec, path, path.read_text(), snapshot, locate=locate).spec.deploy.network_cidrs
        else:
            with pytest.raises(InvalidInputError, match=r"no aws offer in region 'us-wset-2'.*us-west-2"):
                resolve(spec, path, path.read_text(), snapshot, locate=locate)


def _cluster_spec(tmp_path: Path, *keys: str) -> Path:
    """chat.yaml deployed to Kubernetes, one cluster per key of ``keys``."""
    import yaml

    doc = yaml.safe_load(CHAT.read_text())
    doc["deploy"] = {"target": "kubernetes",
                     "kubernetes": {"clusters": {k: {"context": f"ctx-{i}"} for i, k in enumerate(keys)}}}
    path = tmp_path / "kube.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(PLACES), st.integers(0, 40))
def test_a_mistyped_cluster_key_beside_a_valid_one_is_refused_at_its_line(tmp_path_factory, place, cut):
    """A ``deploy.kubernetes.clusters`` key is a region of its cloud, checked as a network key is: beside a
    valid cluster, a mistyped one (``aws/us-east1``) was a warning, "no allowed offer there; unused", and
    the region it was meant for planned without it, silently. A known region the infrastructure does not
    allow stays that warning (and an offered one passes)."""
    cloud, region = place
    wrong = _mistyped_region(region, cut)
    tmp_path = tmp_path_factory.mktemp("clusters")
    path = _cluster_spec(tmp_path, "aws/us-east-1", f"{cloud}/{region}")
    spec, _, locate = load_spec(path)
    resolve(spec, path, path.read_text(), locate=locate)
    if wrong in {r for c, r in PLACES if c == cloud} or not wrong.strip("-") or not wrong.replace("-", "").isalnum():
        return  # another real region, or a key the spec's own rule refuses
    path = _cluster_spec(tmp_path, "aws/us-east-1", f"{cloud}/{wrong}")
    spec, _, locate = load_spec(path)
    with pytest.raises(InvalidInputError, match=rf"^{path}:\d+:\d+: deploy\.kubernetes\.clusters: no {cloud} offer "
                                                rf"in region '{wrong}'.*did you mean"):
        resolve(spec, path, path.read_text(), locate=locate)
