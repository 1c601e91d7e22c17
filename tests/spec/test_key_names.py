"""Every class and adapter name is one part of the planner's flow keys (``<class>~<adapter>@<origin>``:
hetinfra.spec.base.key_part): a name holding a separator is refused where it is read, so no name can be
taken for another flow (a class 'c~sql' beside adapter sql was read as sql's requests of class c, and
the plan said its availability caps were too small)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.spec.adapters import AdapterSpec
from hetinfra.spec.base import ADAPTER_KEY_SEP, ORIGIN_KEY_SEP
from hetinfra.spec.models import ClassSpec

#: printable names of the Label rule's alphabet, separators included, so both outcomes are drawn
NAMES = st.text(alphabet=st.sampled_from("abz09-_.~@ "), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(NAMES)
def test_a_class_or_adapter_name_is_accepted_iff_it_holds_no_key_separator(name):
    joins = ADAPTER_KEY_SEP in name or ORIGIN_KEY_SEP in name
    for build in (lambda: ClassSpec(name=name, input_tokens=10, output_tokens=10, share=1),
                  lambda: AdapterSpec(name="a" + name.replace(" ", "_"), base="b", source="org/x", demand={"share": 0.1})):
        try:
            build()
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            assert joins and "may not contain" in str(exc), (name, exc)
        else:
            assert not joins, name


def test_a_class_named_like_an_adapter_flow_is_exit_2_at_its_line(tmp_path, run_cli):
    spec = tmp_path / "s.yaml"
    spec.write_text("name: s\nmodels:\n  - name: m\n    model: llama-3.1-8b\n    source: meta-llama/Llama-3.1-8B\n"
                    "    slo: {ttft_ms: 2000, tpot_ms: 100}\n    demand:\n      rate_rps: 1\n"
                    "      sizes: {classes: [{name: 'c~sql', input_tokens: 500, output_tokens: 200, share: 1}]}\n"
                    "adapters:\n  - {name: sql, base: m, source: org/sql, demand: {share: 0.5}}\n")
    code, _, err = run_cli("plan", str(spec), "--no-verify", "--no-baselines")
    assert code == 2 and "s.yaml:9:" in err and "may not contain '~'" in err and "Traceback" not in err, err


@pytest.mark.parametrize("name", ["chat", "in<=500,out<=200", "a b"])
def test_ordinary_class_names_still_pass(name):
    assert ClassSpec(name=name, input_tokens=1, output_tokens=1, share=1).name == name
