"""Every ``vllm serve`` command line hetinfra writes uses only options the pinned vLLM accepts
(deploy.vllm_version), checked offline against the long options read from that version's wheel
(tools/vllm_serve_flags.py -> vllm_serve_flags_<version>.txt): colocated engines of every layout,
both roles of a prefill/decode bundle, LoRA engines."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

import yaml
from hypothesis import given, settings, strategies as st
from pydantic import ValidationError

from hetinfra.compile.artifacts import sky_units
from hetinfra.compile.bundle import engines
from hetinfra.compile.engine import vllm_serve_command
from hetinfra.compile.unit import Adapter
from hetinfra.document import Plan
from hetinfra.spec.deploy import DEFAULT_VLLM_VERSION
from hetinfra.spec.models import ServiceSpec
from tests.compile.split_plan import split_plan
from tests.compile.test_skypilot import ALL_UNITS

REPO = Path(__file__).resolve().parents[2]
FLAGS = Path(__file__).with_name(f"vllm_serve_flags_{DEFAULT_VLLM_VERSION}.txt")


def _accepted() -> set[str]:
    return {line for line in FLAGS.read_text().splitlines() if line.startswith("--")}


def unknown_options(command: str, accepted: set[str]) -> list[str]:
    """The long options of ``command`` that ``vllm serve`` does not accept (``--opt=value`` as ``--opt``)."""
    argv = shlex.split(command)
    assert argv[:2] == ["vllm", "serve"], command
    return [a for a in argv[2:] if a.startswith("--") and a.split("=", 1)[0] not in accepted]


def _commands() -> list[str]:
    units = list(ALL_UNITS)
    units.append(replace(ALL_UNITS[0], adapters=(Adapter("a", "org/a", 16), Adapter("b", "org/b", 64)), max_loras=1))
    bundle = sky_units(Plan.parse(split_plan("2P1D")))[0]
    return [vllm_serve_command(u) for u in units] + [e.command for e in engines(bundle)]


def test_the_list_is_the_pinned_versions():
    assert FLAGS.exists(), f"no option list for the pinned vLLM {DEFAULT_VLLM_VERSION}: run tools/vllm_serve_flags.py"
    assert len(_accepted()) > 150 and "--kv-transfer-config" in _accepted()


def test_every_generated_command_line_is_valid_for_the_pinned_vllm():
    accepted = _accepted()
    commands = _commands()
    assert sum("--kv-transfer-config" in c for c in commands) == 3 and any("--lora-modules" in c for c in commands)
    assert {c: unknown_options(c, accepted) for c in commands if unknown_options(c, accepted)} == {}


def test_an_option_vllm_lacks_is_caught():
    assert unknown_options("vllm serve m --kv-transfer-cfg '{}' --port=8000", _accepted()) == ["--kv-transfer-cfg"]


def _served_name_read(command: str) -> list[str] | None:
    """What a parser of vLLM's kind (argparse; --served-model-name takes one or more values) reads as the
    served names of ``command``, or None where it refuses the line."""
    import argparse

    parser = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    parser.add_argument("--served-model-name", nargs="+")
    try:
        return parser.parse_known_args(shlex.split(command)[3:])[0].served_model_name
    except (argparse.ArgumentError, SystemExit):
        return None


@settings(max_examples=40, derandomize=True, deadline=None)
@given(st.text(alphabet="ab9-._:=,@+%/", min_size=1, max_size=10).map(lambda t: t if t[0] == "-" else "-" + t[1:])
       | st.text(alphabet="ab9-._:", min_size=1, max_size=10))
def test_property_a_model_name_the_spec_accepts_is_the_served_name_vllm_reads(name):
    """A model name reaches `vllm serve --served-model-name NAME`: one starting with '-' was accepted,
    and vLLM read it as an option ('-x-chat': "expected at least one argument"; '--help' printed the
    help), so every replica of the deployed unit failed to start. hetinfra.spec.base.word_problem,
    the rule of the spec's and plan.json's command-line words, refuses it."""
    spec = yaml.safe_load((REPO / "services" / "chat.yaml").read_text())
    spec["models"][0]["name"] = name
    try:
        ServiceSpec.model_validate(spec)
    except ValidationError:
        return
    unit = replace(ALL_UNITS[0], service_model=name)
    assert _served_name_read(vllm_serve_command(unit)) == [name]
