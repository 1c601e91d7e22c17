"""plan.json `inputs.spec_path` names the spec `simulate` (and every command that finds the plan's
spec) reads: whatever text it holds, the spec is found and read, or the error is exit 2 naming
plan.json or the spec (`""` was an IndexError in simulate's search for it, a name over 255 bytes an
OSError from Path.is_file)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st

from hetinfra.errors import InvalidInputError
from hetinfra.sim.plan_load import read_inputs

CHAT = Path(__file__).resolve().parents[2] / "services" / "chat.yaml"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stored=st.text(max_size=12) | st.sampled_from(["", ".", "..", "/", "/dev/zero", "/dev/null", "a\x00b",
                                                          "../chat.yaml", "chat.yaml", "y" * 300,
                                                          "/" + "y/" * 3000]))
def test_any_spec_path_finds_the_spec_or_is_refused(shared_plan, tmp_path_factory, stored):
    out = tmp_path_factory.mktemp("plan") / "out"
    shutil.copytree(shared_plan(CHAT, "--no-baselines", "--no-verify"), out)
    shutil.copy(CHAT, out.parent / "chat.yaml")
    doc = json.loads((out / "plan.json").read_text())
    doc["inputs"]["spec_path"] = stored
    (out / "plan.json").write_text(json.dumps(doc))
    try:
        _, spec, path, _, _ = read_inputs(out)
    except InvalidInputError as exc:
        assert "\n" not in exc.message
        return
    assert spec.name == "chat" and path.is_file()
