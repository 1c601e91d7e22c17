"""The on-disk template library cache: keyed by what decides a template, not by prices."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from hetinfra.plan.inputs import resolve
from hetinfra.perf.model import PerformanceModel
from hetinfra.spec.load import load_spec
from hetinfra.plan.template_cache import FINGERPRINT_FILE, _FINGERPRINTS, TemplateCache, _decode, _encode
from hetinfra.plan.templates import build_library
from tests.solver.test_mixed_pipelines import _spec


def _write(tmp_path: Path, spec: dict) -> Path:
    path = tmp_path / "service.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _plan(run_cli, path: Path) -> dict:
    code, out, err = run_cli("plan", str(path), "--json", "--no-baselines", "--no-verify")
    assert code == 0, err
    return json.loads(out)


def test_second_plan_reuses_the_library_and_gives_the_same_plan(tmp_path, run_cli):
    path = _write(tmp_path, _spec(tmp_path, mixed=True))
    first = _plan(run_cli, path)
    assert first["inputs"]["template_cache"]["misses"] == ["big-70b"]
    files = list(Path(os.environ["HETINFRA_CACHE_DIR"]).glob("templates/big-70b-*.json"))
    assert len(files) == 1
    second = _plan(run_cli, path)
    assert second["inputs"]["template_cache"]["hits"] == ["big-70b"]
    assert second["allocations"] == first["allocations"] and second["templates"] == first["templates"]


def test_prices_do_not_invalidate_but_slos_do(tmp_path, run_cli):
    spec = _spec(tmp_path, mixed=True)
    path = _write(tmp_path, spec)
    _plan(run_cli, path)
    offers = tmp_path / "offers.csv"
    offers.write_text(offers.read_text().replace(",4.0", ",3.0"))  # H100 cheaper: same templates
    cheaper = _plan(run_cli, path)
    assert cheaper["inputs"]["template_cache"]["hits"] == ["big-70b"]
    assert cheaper["cost_usd_per_hour"] == 6.0  # H100 x 2 now: the new prices are used
    spec["models"][0]["slo"]["tpot_ms"] = 150
    assert _plan(run_cli, _write(tmp_path, spec))["inputs"]["template_cache"]["misses"] == ["big-70b"]


def test_a_corrupt_entry_is_rebuilt(tmp_path, run_cli):
    path = _write(tmp_path, _spec(tmp_path, mixed=True))
    first = _plan(run_cli, path)
    [entry] = Path(os.environ["HETINFRA_CACHE_DIR"]).glob("templates/*.json")
    entry.write_text("{not json")
    again = _plan(run_cli, path)
    assert again["inputs"]["template_cache"]["misses"] == ["big-70b"]
    assert again["allocations"] == first["allocations"]
    assert json.loads(entry.read_text())["model"] == "big-70b"  # rewritten whole


@pytest.mark.parametrize("kind", ["fifo", "folder", "link"])
def test_an_entry_that_is_not_a_regular_file_costs_the_rebuild_not_the_plan(tmp_path, run_cli, kind):
    """docs/trust.md: the cache only saves work. An entry path holding a FIFO or a folder (the file
    writer never replaces one), or a fingerprint that is a FIFO, was exit 2 in every later plan; the
    library is rebuilt and the plan is the same."""
    path = _write(tmp_path, _spec(tmp_path, mixed=True))
    _FINGERPRINTS.clear()  # as a fresh process, which computes the fingerprint and stores it
    first = _plan(run_cli, path)
    cache = Path(os.environ["HETINFRA_CACHE_DIR"])
    [entry] = cache.glob("templates/*.json")
    entry.unlink()
    {"fifo": os.mkfifo, "folder": os.mkdir, "link": lambda p: os.symlink(tmp_path / "elsewhere", p)}[kind](entry)
    fingerprint = cache / FINGERPRINT_FILE
    fingerprint.unlink()
    os.mkfifo(fingerprint)
    _FINGERPRINTS.clear()
    again = _plan(run_cli, path)
    assert again["inputs"]["template_cache"]["misses"] == ["big-70b"]
    assert again["allocations"] == first["allocations"]
    # a FIFO or folder is left as it is; a link is replaced by the entry (nothing written where it pointed)
    assert entry.is_file() == (kind == "link") and not entry.is_symlink()
    assert not (tmp_path / "elsewhere").exists() and fingerprint.is_fifo()


def test_round_trip_keeps_every_field(tmp_path):
    path = _write(tmp_path, _spec(tmp_path, mixed=True))
    spec, text, locate = load_spec(path)
    inputs = resolve(spec, path, text, None, locate)
    lib = build_library(inputs, inputs.models[0], PerformanceModel(inputs.profiles))
    assert any(t.mixed for t in lib.templates)
    assert _decode(json.dumps(_encode(lib)), lib.model) == lib
    cache = TemplateCache(tmp_path / "c")
    assert cache.get(inputs, inputs.models[0]) is None
    cache.put(inputs, inputs.models[0], lib)
    assert cache.get(inputs, inputs.models[0]) == lib and cache.report()["hits"] == ["big-70b"]


def test_cache_off(tmp_path, run_cli, monkeypatch):
    monkeypatch.setenv("HETINFRA_CACHE_DIR", "off")
    assert _plan(run_cli, _write(tmp_path, _spec(tmp_path, mixed=True)))["inputs"]["template_cache"] is None
    monkeypatch.delenv("HETINFRA_CACHE_DIR")
    code, out, _ = run_cli("plan", str(tmp_path / "service.yaml"), "--json", "--no-template-cache", "--no-baselines",
                           "--no-verify")
    assert code == 0 and json.loads(out)["inputs"]["template_cache"] is None


def test_an_entry_nested_past_any_bound_is_a_value_error_not_a_recursion_error():
    """_decode leaves the nesting bound to pydantic's JSON parser: a deep entry is a miss, never a crash."""
    import pytest

    for depth in (65, 1_000, 200_000):
        deep = '{"format": 4, "model": "m", "templates": ' + "[" * depth + "]" * depth + ', "coverage": {}}'
        with pytest.raises(ValueError):
            _decode(deep, "m")
