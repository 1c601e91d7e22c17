"""On-disk cache of serving-template libraries (Coral's offline stage, reused across plans).

A model's library (``templates.ModelLibrary``: layouts, pipelines, mixed placements and their
per-class rates; no prices or regions) depends only on:

* the model (architecture, precision, the names profile rows may use), its SLOs and request classes;
* the instance types on offer (cloud, type, GPU, GPUs per instance) and, with mixed pipelines, which
  instance type stands for each GPU configuration;
* the template settings (``max_nodes_per_template``, ``tp_pp_layouts``, ``allow_mixed_pipelines``,
  ``mixed_memory_ratio``, the SkyPilot-deployed clouds);
* the performance model: ``ESTIMATOR_VERSION``, the calibration constants, a hash of the source of
  every module the library's builder imports (``RATE_ROOTS`` and its import graph: the estimator,
  calibration, confidence, facts, ...), and the profile rows.

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
import re
from pathlib import Path

from hetinfra.plan.inputs import PlanInputs, PlannedModel
from hetinfra.plan.library import ClassCoverage, ModelLibrary, Template
from hetinfra.plan.tail import cache_words

CACHE_FORMAT = 4
#: where the library is built: the cache key hashes the source of this module and of every hetinfra
#: module it imports, directly or through others (the estimator, calibration, confidence, facts, ...),
#: so editing any of them invalidates the cache without a hand-kept list to fall behind
RATE_ROOTS = ("hetinfra.plan.templates",)
#: where a checkout keeps the subpackages mapped into hetinfra (setuptools' package-dir in pyproject.toml)
_MAPPED = {"solver": "solver", "price_feeds": "price_feeds", "stacks": "stacks"}
#: an import statement's first line: ``from hetinfra.x import a, (b`` or ``import hetinfra.x as y``
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(hetinfra[\w.]*)[ \t]+import[ \t]+(.*)|import[ \t]+(hetinfra[\w.]*))", re.M)


def default_dir() -> Path | None:
    """$HETINFRA_CACHE_DIR (off, 0, none or empty: no cache), else $XDG_CACHE_HOME/hetinfra or
    ~/.cache/hetinfra; each variable checked as a path (hetinfra.envpaths). A user with no home at all
    (:func:`hetinfra.envpaths.homeless`) plans without the cache: it only saves time, and `plan` stopped
    on "HOME is not set" in a container run as an arbitrary uid."""
    from hetinfra.envpaths import cache_dir_var, env_path, home_dir, homeless

    if "HETINFRA_CACHE_DIR" in os.environ:  # set, even blank: it decides (blank or an off word: no cache)
        return cache_dir_var()
    xdg = env_path("XDG_CACHE_HOME")
    if xdg is None and homeless():
        return None
    return (xdg or home_dir() / ".cache") / "hetinfra"


def module_file(module: str, package: Path) -> Path | None:
    """The source file of ``hetinfra.<...>`` in the tree whose ``hetinfra`` package is ``package``
    (a module's ``.py`` or a package's ``__init__.py``); None for a name that is not a module."""
    parts = module.split(".")[1:]
    places = [package.joinpath(*parts)]  # installed: solver/ etc. inside the package
    if parts and parts[0] in _MAPPED:  # a checkout: beside it
        places.append(package.parent.joinpath(_MAPPED[parts[0]], *parts[1:]))
    for path in places:
        if path.with_suffix(".py").is_file():
            return path.with_suffix(".py")
        if (path / "__init__.py").is_file():
            return path / "__init__.py"
    return None


def imported_modules(source: str) -> set[str]:
    """Every ``hetinfra`` module ``source`` names in an import statement, at any depth of the code
    (function-local imports too), and ``from pkg import name`` read both as ``pkg`` and ``pkg.name``.
    A line scan, not a parse: the key is computed on every plan, and a docstring line that reads as an
    import only widens the key (a spurious miss, never a stale hit)."""
    found: set[str] = set()
    for match in _IMPORT.finditer(source):
        if match.group(3):
            found.add(match.group(3))
            continue
        module, names = match.group(1), match.group(2)
        if names.lstrip().startswith("("):  # a parenthesised list may run over several lines
            names = source[match.start(2):source.index(")", match.start(2))]
        found.add(module)
        names = "\n".join(line.split("#")[0] for line in names.splitlines())  # a comment may end any line
        found.update(f"{module}.{name.split()[0]}" for name in re.split(r"[(),]", names) if name.strip())
    return found


def rate_module_files(package: Path, roots: tuple[str, ...] = RATE_ROOTS) -> dict[str, bytes]:
    """The source of ``roots`` and of every hetinfra module they import, transitively, with the
    packages' ``__init__.py`` that importing them runs; by path relative to the tree, sorted."""
    sources: dict[Path, bytes] = {}
    todo = [path for path in (module_file(root, package) for root in roots) if path is not None]
    while todo:
        path = todo.pop()
        if path in sources:
            continue
        sources[path] = path.read_bytes()
        todo += [init for init in (path.parent / "__init__.py",) if init.is_file()]
        todo += [dep for dep in (module_file(m, package) for m in imported_modules(sources[path].decode())) if dep]
    return {str(path.relative_to(package.parent)): sources[path] for path in sorted(sources)}


#: the last fingerprint per package: (the stats of each file of the graph and of the folders holding
#: them, digest); a plan re-reads the graph only when one changed (a changed import changes its file, a
#: module added changes its folder), so the key costs a few stats
_FINGERPRINTS: dict[Path, tuple[dict[Path, tuple[int, int]], str]] = {}
#: where the cache directory keeps the last fingerprint, so a fresh process also skips reading the
#: graph (11-20 ms of every `hetinfra plan`, issue 33)
FINGERPRINT_FILE = "code-fingerprint.json"


def _stats(paths) -> dict[Path, tuple[int, int]]:
    return {path: (st.st_mtime_ns, st.st_size) for path in paths for st in (path.stat(),)}


def _watched(package: Path, files) -> list[Path]:
    """The files of the graph and the folders that hold them."""
    paths = [package.parent / rel for rel in files]
    return paths + sorted({path.parent for path in paths})


def _code_fingerprint(package: Path = Path(__file__).parents[1], store: Path | None = None) -> str:
    """SHA-256 of the library builder's import graph (rate_module_files); ``store``: a directory whose
    FINGERPRINT_FILE keeps it across processes, used while no file or folder of the graph changed."""
    seen = _FINGERPRINTS.get(package) or _stored(package, store)
    try:
        if seen is not None and _stats(seen[0]) == seen[0]:
            _FINGERPRINTS[package] = seen
            return seen[1]
    except OSError:  # a file of the graph went away: read the graph again
        pass
    files = rate_module_files(package)
    h = hashlib.sha256()
    for rel, source in files.items():
        h.update(rel.encode() + b"\0" + source)
    _FINGERPRINTS[package] = (_stats(_watched(package, files)), h.hexdigest())
    _store(package, store, _FINGERPRINTS[package])
    return h.hexdigest()


def _stored(package: Path, store: Path | None) -> tuple[dict[Path, tuple[int, int]], str] | None:
    """The fingerprint ``store`` keeps for ``package``, or None (none, another package's, unreadable)."""
    from hetinfra.errors import HetinfraError
    from hetinfra.fileio import json_value, read_text

    if store is None:
        return None
    try:
        doc = json_value(read_text(store / FINGERPRINT_FILE, "template cache fingerprint", max_bytes=1 << 20))
        if doc["package"] != str(package) or not isinstance(doc["digest"], str):
            return None
        stats = {Path(p): (int(m), int(n)) for p, (m, n) in doc["stats"].items()}
    except (HetinfraError, ValueError, KeyError, TypeError, AttributeError):
        return None
    # every path is stat'ed next: one holding a NUL byte (a ValueError there) was a traceback in plan
    return (stats, doc["digest"]) if all(p.is_absolute() and "\0" not in str(p) for p in stats) else None


def _store(package: Path, store: Path | None, seen: tuple[dict[Path, tuple[int, int]], str]) -> None:
    if store is None:
        return
    doc = {"package": str(package), "digest": seen[1], "stats": {str(p): list(st) for p, st in seen[0].items()}}
    _write_if_possible(store / FINGERPRINT_FILE, json.dumps(doc) + "\n")  # else the graph is read next time


def _aiconfigurator_version() -> str | None:
    """The installed aiconfigurator-core's version (its kernel database ships in the wheel), None
    where it is not installed; read from the package metadata, without importing it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("aiconfigurator-core")
    except PackageNotFoundError:
        return None


class TemplateCache:
    """Get/put model libraries; counts hits and misses for the plan's report."""

    def __init__(self, root: Path):
        self.root = root
        self.hits: list[str] = []
        self.misses: list[str] = []
        self._code = _code_fingerprint(store=root)
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
            "best_effort": cache_words(pm),  # the classes a percentile's tail may leave (hetinfra.plan.tail)
        }
        if s.estimator != "builtin":  # the measured-kernel backend's rates follow its database's release
            doc["aiconfigurator"] = _aiconfigurator_version()
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
        """The cached library of ``pm``, or None (a miss): an entry that is missing, not a regular file
        (a FIFO never hangs the plan), too big, too deep, or not of the typed format is rebuilt."""
        from hetinfra.errors import HetinfraError
        from hetinfra.fileio import read_text

        path = self._path(inputs, pm)
        try:
            lib = _decode(read_text(path, "template cache entry", max_bytes=MAX_ENTRY_BYTES), pm.spec.name)
        except (HetinfraError, ValueError):
            self.misses.append(pm.spec.name)
            return None
        self.hits.append(pm.spec.name)
        return lib

    def put(self, inputs: PlanInputs, pm: PlannedModel, lib: ModelLibrary) -> None:
        _write_if_possible(self._path(inputs, pm), json.dumps(_encode(lib)) + "\n")  # else rebuilt next time

    def report(self) -> dict:
        return {"dir": str(self.root), "hits": sorted(self.hits), "misses": sorted(self.misses)}


def _write_if_possible(path: Path, text: str) -> None:
    """Write a cache file whole, or not at all and say nothing: the cache only saves work, so a
    read-only or full directory (OSError) or a FIFO, folder or link at the entry's path (the file
    writer refuses to replace what is not a regular file) costs the work next time, never the plan."""
    from hetinfra.errors import HetinfraError
    from hetinfra.fileio import atomic_write_text

    try:
        atomic_write_text(path, text)
    except (OSError, HetinfraError):
        pass


def _encode(lib: ModelLibrary) -> dict:
    return {"format": CACHE_FORMAT, "model": lib.model,
            "templates": [dataclasses.asdict(t) for t in lib.templates],
            "coverage": {c: dataclasses.asdict(v) for c, v in lib.coverage.items()}}


#: an entry larger than this is not one we wrote (the largest library is a few MiB)
MAX_ENTRY_BYTES = 64 << 20


def _decode(text: str, model: str) -> ModelLibrary:
    """A cache entry's library, typed (hetinfra.plan.cache_entry): anything else is a ValueError.
    No separate nesting check (``fileio.json_depth``): pydantic's own JSON parser bounds its recursion
    and answers a document nested past it with a ValidationError, and the typed entry nests a few
    levels only; the check cost 5x the parse (0.2 s CPU for a 32-model fleet's entries)."""
    from hetinfra.plan.cache_entry import CacheEntry

    entry = CacheEntry.model_validate_json(text)  # a pydantic ValidationError is a ValueError
    if entry.format != CACHE_FORMAT or entry.model != model or any(t.model != model for t in entry.templates):
        raise ValueError("another format or model")
    return ModelLibrary(entry.model, entry.templates, entry.coverage)
