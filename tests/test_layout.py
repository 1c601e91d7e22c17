"""Packaging contracts: namespace mapping and import weight of the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _py(code: str) -> str:
    # Run outside the repo so the source folders are not importable by accident.
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", check=True).stdout


def test_folders_are_installed_inside_the_hetinfra_namespace():
    out = _py("import importlib.util as u\n"
              "print([u.find_spec(n) is None for n in ('solver', 'stacks', 'price_feeds')])\n"
              "import hetinfra.solver, hetinfra.stacks, hetinfra.price_feeds; print('ok')")
    assert out.split() == ["[True,", "True,", "True]", "ok"]


def test_help_imports_no_heavy_modules():
    out = _py("import sys; from hetinfra import cli\n"
              "heavy = [m for m in ('pyomo', 'highspy', 'sky', 'pulumi', 'rich', 'pydantic', 'uvicorn', 'starlette', 'httpx', 'prometheus_client', 'kubernetes', 'pulumi_kubernetes') if m in sys.modules]\n"
              "print(heavy)")
    assert out.strip() == "[]"


def test_plan_never_imports_skypilot_or_pulumi(tmp_path):
    code = ("import sys\nfrom click.testing import CliRunner\nfrom hetinfra.cli import cli\n"
            f"r = CliRunner().invoke(cli, ['plan', '{REPO / 'services' / 'chat.yaml'}', '--out', '{tmp_path}'])\n"
            "assert r.exit_code == 0, r.output\n"
            "print([m for m in ('sky', 'pulumi') if m in sys.modules])")
    assert _py(code).strip() == "[]"  # nothing else on stdout either (hetinfra.solver.highs_quiet)


def test_every_example_service_plans(example_plans):
    for name in example_plans.names():  # planned as the README says (tests/conftest.py: exit 0 asserted there)
        plan = example_plans[name][1]
        assert plan["allocations"] and plan["cost_usd_per_hour"] > 0, name


def test_plan_json_stdout_is_json_only(tmp_path):
    """Nothing but plan.json on stdout: HiGHS >= 1.16 prints a banner on the C-level stdout when the
    first solver object is created (hetinfra.solver.highs_quiet swallows it)."""
    import json

    res = subprocess.run([sys.executable, "-m", "hetinfra.cli", "plan", str(REPO / "services" / "chat.yaml"), "--json",
                          "--no-verify"], capture_output=True, text=True, cwd="/",
                         env={**__import__("os").environ, "HETINFRA_CACHE_DIR": "off"})
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["service"] == "chat"
    assert "HiGHS" not in res.stdout
