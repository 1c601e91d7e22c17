"""On-disk cache of serving-template libraries (Coral's offline stage, reused across plans).

A model's library (``templates.ModelLibrary``: layouts, pipelines, mixed placements and their
per-class rates; no prices or regions) depends only on:

* the model (architecture, precision, the names profile rows may use), its SLOs and request classes;
* the instance types on offer (cloud, type, GPU, GPUs per instance) and, with mixed pipelines, which
  instance type stands for each GPU configuration;
* the template settings (``max_nodes_per_template``, ``tp_pp_layouts``, ``allow_mixed_pipelines``,
  ``mixed_memory_ratio``, the SkyPilot-deployed clouds);
* the performance model: ``ESTIMATOR_VERSION``, the calibration constants, a hash of the source of
  every module that computes a rate, and the profile rows.

The key is the SHA-256 of all of that; prices and availability are not in it, so a cron re-plan
after a price change reuses the library and only re-solves the allocation. Entries are JSON files
``<dir>/templates/<model>-<key[:20]>.json`` written atomically; an unreadable entry is rebuilt.
The directory is ``$HETINFRA_CACHE_DIR``, else ``$XDG_CACHE_HOME/hetinfra``, else
``~/.cache/hetinfra``; ``HETINFRA_CACHE_DIR=off`` (or ``--no-template-cache``) disables it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

from hetinfra.plan.inputs import PlanInputs, PlannedModel
from hetinfra.plan.library import ClassCoverage, ModelLibrary, Template

CACHE_FORMAT = 4
#: modules whose code decides a template's rates; editing any of them invalidates the cache
_RATE_MODULES = ("perf/estimator.py", "perf/pipeline.py", "perf/model.py", "perf/profiles.py", "perf/calibration.py",
                 "plan/library.py", "plan/templates.py", "plan/templates_mixed.py", "plan/placement.py",
                 "catalog/gpus.py")


def default_dir() -> Path | None:
    env = os.environ.get("HETINFRA_CACHE_DIR")
    if env is not None:
        return None if env.strip().lower() in ("", "off", "0", "none") else Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "hetinfra"


def _code_fingerprint() -> str:
    root = Path(__file__).parents[1]  # the hetinfra package
    h = hashlib.sha256()
    for rel in _RATE_MODULES:
        h.update(rel.encode())
        h.update((root / rel).read_bytes())
    return h.hexdigest()


class TemplateCache:
    """Get/put model libraries; counts hits and misses for the plan's report."""

    def __init__(self, root: Path):
        self.root = root
        self.hits: list[str] = []
        self.misses: list[str] = []
        self._code = _code_fingerprint()
        self._paths: dict[int, tuple[PlannedModel, Path]] = {}  # holds pm so its id stays unique

    def key(self, inputs: PlanInputs, pm: PlannedModel) -> str:
        from hetinfra.perf.calibration import calibration_for
        from hetinfra.perf.model import ESTIMATOR_VERSION

        s = inputs.spec.planning
        doc = {
            "format": CACHE_FORMAT, "estimator": ESTIMATOR_VERSION, "code": self._code, "calibration": repr(calibration_for(pm.ctx.vllm_version)),
            "engine": pm.ctx.vllm_version,
            "model": {"name": pm.spec.name, "arch": dataclasses.asdict(pm.arch) if pm.arch else None,
                      "names": list(pm.ctx.names), "precision": pm.ctx.precision,
                      "slo": [pm.ctx.ttft_ms, pm.ctx.tpot_ms]},
            "classes": [[c.name, c.input_tokens, c.output_tokens] for c in pm.classes],
            "types": sorted({(o.cloud, o.instance_type, o.gpu, o.gpu_count) for o in inputs.offers}),
            "settings": [s.max_nodes_per_template, s.tp_pp_layouts, s.allow_mixed_pipelines, s.mixed_memory_ratio,
                         sorted(inputs.spec.deploy.skypilot_clouds), s.estimator],
            "profiles": sorted(repr(r) for r in inputs.profiles.rows),
        }
        if s.allow_mixed_pipelines:  # which instance type stands for a GPU configuration follows prices
            from hetinfra.plan.templates_mixed import gpu_configs

            clouds = sorted({o.cloud for o in inputs.offers})
            doc["mixed_types"] = {c: sorted(gpu_configs(inputs.offers, c).items()) for c in clouds}
        return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()

    def _path(self, inputs: PlanInputs, pm: PlannedModel) -> Path:
        """Where ``pm``'s entry lives; keyed once per model (``get`` then ``put`` ask twice)."""
        if id(pm) not in self._paths:
            safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in pm.spec.name)[:60]
            self._paths[id(pm)] = (pm, self.root / "templates" / f"{safe}-{self.key(inputs, pm)[:20]}.json")
        return self._paths[id(pm)][1]

    def get(self, inputs: PlanInputs, pm: PlannedModel) -> ModelLibrary | None:
        path = self._path(inputs, pm)
        try:
            lib = _decode(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            self.misses.append(pm.spec.name)
            return None
        self.hits.append(pm.spec.name)
        return lib

    def put(self, inputs: PlanInputs, pm: PlannedModel, lib: ModelLibrary) -> None:
        from hetinfra.fileio import atomic_write_text

        try:
            atomic_write_text(self._path(inputs, pm), json.dumps(_encode(lib)) + "\n")
        except OSError:
            pass  # a read-only or full cache directory only costs the rebuild next time

    def report(self) -> dict:
        return {"dir": str(self.root), "hits": sorted(self.hits), "misses": sorted(self.misses)}


def _encode(lib: ModelLibrary) -> dict:
    return {"format": CACHE_FORMAT, "model": lib.model,
            "templates": [dataclasses.asdict(t) for t in lib.templates],
            "coverage": {c: dataclasses.asdict(v) for c, v in lib.coverage.items()}}


def _tuple(v):
    return tuple(_tuple(x) for x in v) if isinstance(v, list) else v


def _decode(doc: dict) -> ModelLibrary:
    if doc["format"] != CACHE_FORMAT:
        raise ValueError("old cache format")
    templates = []
    for t in doc["templates"]:
        for k in ("layer_partition", "stages", "confidence", "interval"):
            t[k] = _tuple(t[k]) if t[k] is not None else None
        templates.append(Template(**t))
    coverage = {c: ClassCoverage(v["served"], _tuple(v["best_tpot_floor"]) if v["best_tpot_floor"] else None,
                                 _tuple(v["reasons"])) for c, v in doc["coverage"].items()}
    return ModelLibrary(doc["model"], tuple(templates), coverage)
