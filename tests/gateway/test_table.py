"""hetinfra.gateway.table: the routing table's endpoints, from state.json and ``--endpoint``. Each backend URL is
one replica of a unit (the balancer keeps a backend's health and in-flight count by its URL): given twice for a
unit, or for units of two models, it is refused; units of one model may share one."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.errors import InvalidInputError
from hetinfra.gateway.table import load_table, parse_endpoint_overrides
from tests.document.test_crosscheck import two_model_plan
from tests.gateway.conftest import write_out

PLAN = two_model_plan()
#: each deployment unit's two names (what --endpoint may call it) and its model
NAMES = {a["deployment_unit"]: (a["deployment_unit"], a["unit"]) for a in PLAN["allocations"]}
MODEL_OF = {a["deployment_unit"]: a["model"] for a in PLAN["allocations"]}
#: how one backend URL may be written (the gateway strips a trailing "/" and "/v1")
SPELLINGS = ("{}", "{}/", "{}/v1", "{}/v1/")


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(sorted(NAMES)), st.sampled_from(sorted(NAMES)), st.integers(0, 255),
       st.sampled_from(SPELLINGS), st.sampled_from(SPELLINGS), st.booleans(), st.booleans(), st.booleans())
def test_one_backend_url_twice_for_a_unit_or_two_models_is_refused(tmp_path_factory, first, second, host, s1, s2,
                                                                  alias1, alias2, in_state):
    """A backend URL given twice for one unit (by --endpoint, by either name of the unit, or in state.json), or for
    units of two models, is exit 2 naming where: the gateway counted it as two replicas (twice its share), or sent
    it another model's requests. For two units of one model it is one server, taken; two URLs always are."""
    out = write_out(tmp_path_factory.mktemp("out"), PLAN)
    url = f"http://10.1.2.{host}:8000"
    a, b = NAMES[first][alias1], NAMES[second][alias2]
    if in_state:
        (out / "state.json").write_text(json.dumps({"state_version": 1, "endpoints": {
            first: [s1.format(url)], **({second: [s2.format(url)]} if second != first else {})}}))
        overrides = {} if second != first else {b: [s1.format(url), s2.format(url)]}
    else:
        overrides = parse_endpoint_overrides([f"{a}={s1.format(url)}", f"{b}={s2.format(url)}"])
    if first != second and MODEL_OF[first] == MODEL_OF[second]:
        assert load_table(out, overrides).endpoints[second] == (url,)
    else:
        with pytest.raises(InvalidInputError, match=r"endpoint http://10\.1\.2\.\d+:8000 of unit .* is given "
                                                    r"(again|also for unit .* which serves model)"):
            load_table(out, overrides)
    url2 = url.replace(":8000", ":8001")
    table = load_table(out, parse_endpoint_overrides([f"{a}={s1.format(url)}", f"{b}={s2.format(url2)}"]))
    assert sorted(u for urls in table.endpoints.values() for u in urls) == [url, url2]


def test_a_unit_named_by_both_its_names_keeps_both_urls(tmp_path):
    """--endpoint by the solver's unit id and by the deployment unit name reach one unit: both URLs are kept (the
    second replaced the first, silently)."""
    out = write_out(tmp_path, PLAN)
    dep = PLAN["allocations"][0]["deployment_unit"]
    table = load_table(out, parse_endpoint_overrides([f"{NAMES[dep][0]}=http://10.0.0.1:8000/v1",
                                                      f"{NAMES[dep][1]}=http://10.0.0.2:8000/v1"]))
    assert table.endpoints[dep] == ("http://10.0.0.1:8000", "http://10.0.0.2:8000")


@settings(max_examples=80, deadline=None)
@given(host=st.from_regex(r"[a-z][a-z0-9-]{0,10}(\.[a-z]{2,5})?", fullmatch=True) | st.just("10.1.2.3"),
       scheme=st.sampled_from(["http", "https"]), port=st.sampled_from(["none", "default", "8000"]),
       upper=st.booleans(), suffix=st.sampled_from(["", "/", "/v1", "/v1/"]))
def test_one_backend_in_any_spelling_is_one_url(host, scheme, port, upper, suffix):
    """Scheme and host case and a scheme's default port do not make two backends: ``HTTP://H:80/v1`` and
    ``http://h`` were two URLs, so the same server given both ways counted as two replicas (a reviewer)."""
    from hetinfra.gateway.table import base_url

    default = {"http": 80, "https": 443}[scheme]
    plain = f"{scheme}://{host}" + (":8000" if port == "8000" else "")
    spelled = (f"{scheme.upper() if upper else scheme}://{host.upper() if upper else host}"
               + {"none": "", "default": f":{default}", "8000": ":8000"}[port] + suffix)
    assert base_url(spelled) == base_url(plain) == plain
