"""Shared fixtures: paths to the shared data folder and a CLI runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def shared_path(*parts: str) -> Path:
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"shared data not found: {p}")
    return p


@pytest.fixture
def run_cli():
    """Invoke the public CLI in-process; returns (exit_code, stdout, stderr)."""
    from hetinfra.cli import cli

    def run(*args: str):
        runner = CliRunner()
        res = runner.invoke(cli, list(args), catch_exceptions=True)
        if res.exception is not None and not isinstance(res.exception, SystemExit):
            raise res.exception
        return res.exit_code, res.stdout, res.stderr

    return run


@pytest.fixture
def plan_json(run_cli):
    """Plan a spec dict written to tmp and return plan.json as a dict (asserting exit 0)."""

    def run(tmp_path: Path, spec: dict, *extra: str) -> dict:
        path = tmp_path / "service.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        code, out, err = run_cli("plan", str(path), "--json", *extra)
        assert code == 0, f"exit {code}: {err}\n{out}"
        return json.loads(out)

    return run


def write_offers(path: Path, rows: list[dict]) -> None:
    cols = ["cloud", "region", "instance_type", "gpu", "gpu_count", "gpu_memory_gb", "vcpus", "memory_gb",
            "price_per_hour", "spot_price_per_hour"]
    lines = [",".join(cols)] + [",".join(str(r.get(c, "")) for c in cols) for r in rows]
    path.write_text("\n".join(lines) + "\n")


def write_profiles(path: Path, rows: list[dict]) -> None:
    cols = ["model", "gpu", "tp", "pp", "input_tokens", "output_tokens", "ttft_slo_ms", "tpot_slo_ms", "max_rps"]
    lines = [",".join(cols)] + [",".join(str(r[c]) for c in cols) for r in rows]
    path.write_text("\n".join(lines) + "\n")
