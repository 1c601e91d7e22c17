"""Every ``vllm serve`` command line hetinfra writes uses only options the pinned vLLM accepts
(deploy.vllm_version), checked offline against the long options read from that version's wheel
(tools/vllm_serve_flags.py -> vllm_serve_flags_<version>.txt): colocated engines of every layout,
both roles of a prefill/decode bundle, LoRA engines."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

from hetinfra.compile.artifacts import sky_units
from hetinfra.compile.bundle import engines
from hetinfra.compile.engine import vllm_serve_command
from hetinfra.compile.unit import Adapter
from hetinfra.document import Plan
from hetinfra.spec.deploy import DEFAULT_VLLM_VERSION
from tests.compile.split_plan import split_plan
from tests.compile.test_skypilot import ALL_UNITS

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
