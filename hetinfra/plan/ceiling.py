"""Ceilings that measurement and physics set on a unit's load, whatever a simulation says
(docs/verification.md, "Ceilings").

Per replica and class, a unit's template can serve at most:

* a class whose rate is **measured** (a profile row, ``templates[].sources`` "profile:..."): the top
  of its measured interval, the profiled rate x the measured level's high end (1.05,
  ``hetinfra.perf.confidence.INTERVALS``). A profile says what the GPUs did; running them past it is
  a queue that grows without end, which a finite simulation can miss (Mélange V1 at 32 req/s was
  "verified" at 222% of its measured capacity);
* any other class: its **roofline** (``hetinfra.perf.roofline``), the rate physics allows at the
  class's mean request size (its size distribution's, as the simulator draws it).

A unit is over its ceiling when its offered load at the verification load L, sum over classes of
L x its rate of the class / the class's ceiling, exceeds its replicas: then it misses (ratio = that
load / replicas), in every decision of verification and in the final plan. A mixed-GPU pipeline or a
GPU outside the catalog has no roofline (its rates come from a profile, which its ceiling bounds)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from hetinfra.document.sections import demand_multiple

__all__ = ["Ceilings", "ClassCeiling", "unit_loads"]


@dataclass(frozen=True)
class ClassCeiling:
    rps: float  # req/s one replica (count unit: all its engines) serves at most
    basis: str  # "measured interval" or "roofline (<the binding resource>)"


class Ceilings:
    """Each template's ceilings per class (remembered per template id: its estimate and sizes do not
    change between rounds) for plans of ``spec`` (its models' architectures and size distributions)."""

    def __init__(self, spec, spec_path):
        self.spec, self.base = spec, Path(spec_path).parent if spec_path else None
        self._by_template: dict[str, dict[str, ClassCeiling]] = {}
        self._sizes: dict[str, dict[str, tuple[float, float]]] = {}
        #: rooflines by what they depend on (model, variant, GPU, tp, pp, class sizes): a fleet's
        #: templates repeat one (GPU, tp, pp) in every region and many node counts
        self._rooflines: dict[tuple, tuple[float, str] | None] = {}
        self._archs: dict[tuple, object] = {}

    def of_template(self, t: dict, model: dict) -> dict[str, ClassCeiling]:
        """The ceilings of plan.json template ``t`` of plan model ``model``, per class."""
        found = self._by_template.get(t["id"])
        if found is None:
            found = self._by_template[t["id"]] = self._ceilings(t, model)
        return found

    def _ceilings(self, t: dict, model: dict) -> dict[str, ClassCeiling]:
        from hetinfra.perf.confidence import interval

        top = interval("measured")[2]
        derate = float(t.get("derate") or 1.0)
        sizes = self._class_sizes(model)
        out = {}
        for w, rate in t["capacity_rps"].items():
            if str(t["sources"].get(w, "")).startswith("profile"):
                out[w] = ClassCeiling(float(rate) / derate * top, "measured interval")
            else:
                out[w] = self._roofline(t, model, *sizes.get(w, (0.0, 1.0)))
        return out

    def _roofline(self, t: dict, model: dict, input_tokens: float, output_tokens: float) -> ClassCeiling:
        from hetinfra.catalog.gpus import get_gpu
        from hetinfra.perf.roofline import roofline

        arch = self._arch(model, t.get("variant"))
        # by architecture, not model name: a fleet's models share a few architectures and class sizes
        key = (arch, _precision(model, t.get("variant")), t["gpu"], int(t["tp"]), int(t["pp"]), input_tokens,
               output_tokens)
        if key not in self._rooflines:
            gpu = get_gpu(t["gpu"])
            r = None if gpu is None or arch is None else roofline(
                arch, gpu, int(t["tp"]), int(t["pp"]), _precision(model, t.get("variant")), input_tokens, output_tokens)
            self._rooflines[key] = None if r is None else (r.rate, r.bound)
        found = self._rooflines[key]
        if found is None:  # a mixed pipeline or a custom GPU: its profile's ceiling bounds it
            return ClassCeiling(math.inf, "no roofline (GPU outside the catalog)")
        return ClassCeiling(found[0] * int(t.get("engines_per_instance") or 1), f"roofline ({found[1]})")

    def _arch(self, model: dict, variant: str | None):
        """The architecture of ``model``'s ``variant`` (remembered: the spec does not change)."""
        from hetinfra.perf.model import model_arch

        key = (model["name"], variant)
        if key not in self._archs:
            m = next((x for x in self.spec.models if x.name == model["name"]), None)
            self._archs[key] = None if m is None else model_arch(m.variant_spec(variant) if variant else m,
                                                                f"models[{model['name']}]", self.base)
        return self._archs[key]

    def _class_sizes(self, model: dict) -> dict[str, tuple[float, float]]:
        """Each class's mean (input, output) tokens as the simulator draws them (hetinfra.sim.workload)."""
        name = model["name"]
        if name not in self._sizes:
            from types import SimpleNamespace

            from hetinfra.sim.workload import class_sizes

            m = next(x for x in self.spec.models if x.name == name)
            classes = [SimpleNamespace(**c) for c in model["classes"]]
            rules = class_sizes(m, self.base, classes)
            self._sizes[name] = {c.name: _means(r) for c, r in zip(classes, rules)}
        return self._sizes[name]

    def credit_limit(self, t: dict, model: dict | None) -> float:
        """The largest factor on template ``t``'s estimated rates (its ``capacity_rps`` at derate 1)
        that keeps it within its ceilings at its model's class mix: sum of demand / estimate over
        sum of demand / ceiling, over the classes it serves (inf: no ceiling known)."""
        if model is None:
            return math.inf
        ceilings = self.of_template(t, model)
        est = den = 0.0
        for c in model["classes"]:
            rate, ceiling = t["capacity_rps"].get(c["name"]), ceilings.get(c["name"])
            if not rate or ceiling is None:
                continue
            demand = float(c.get("rate_rps") or c["share"])
            est += demand / float(rate)
            den += demand / ceiling.rps if ceiling.rps > 0 else math.inf
        return est / den if den > 0 else math.inf

    def over(self, view: dict, load: float) -> dict[str, tuple[float, str]]:
        """The units of ``view`` loaded past their ceiling at ``load``: unit -> (offered load / replicas,
        the binding class's basis)."""
        out = {}
        for uid, (ratio, basis) in unit_loads(view, load, self).items():
            if ratio > 1.0 + 1e-9:
                out[uid] = (ratio, basis)
        return out

    def apply(self, judged: dict, view: dict, load: float) -> dict:
        """``judged`` (one simulation, or replications judged as one) with every unit over its ceiling
        missed (its ``ceiling``: ratio and basis) and so its model; a copy where anything changes."""
        over = self.over(view, load)
        if not over:
            return judged
        units = [_over(u, *over[u["unit"]]) if u["unit"] in over else u for u in judged["units"]]
        hit = {u["model"] for u in units if u.get("ceiling")}
        models = []
        for m in judged["models"]:
            if m["model"] in hit:
                worst = max(u["ceiling"]["ratio"] for u in units if u["model"] == m["model"] and u.get("ceiling"))
                ratio = max(m["objective"].get("ratio") or 0.0, worst)
                m = {**m, "met": False, "decision": "missed", "objective": {**m["objective"], "met": False, "ratio": ratio}}
            models.append(m)
        return {**judged, "units": units, "models": models, "met": all(m["met"] for m in models)}


def _over(u: dict, ratio: float, basis: str) -> dict:
    return {**u, "decision": "missed", "ceiling": {"ratio": round(ratio, 4), "basis": basis},
            "objective": {**u["objective"], "met": False, "ratio": max(u["objective"].get("ratio") or 0.0, ratio)}}


def unit_loads(view: dict, load: float, ceilings: Ceilings) -> dict[str, tuple[float, str]]:
    """Per unit of ``view`` with traffic: (its offered load at ``load`` in replicas' worth of its
    ceilings / its replicas, the basis of the class that takes most of it). The offered rate is what
    the simulator offers: the model's rate_rps x demand_scale (max_throughput) x ``load`` x the class's
    share x the unit's routing share."""
    scale = demand_multiple(view.get("objective"), view.get("demand_scale"))
    templates = {t["id"]: t for t in view["templates"]}
    allocs = {a["unit"]: a for a in view["allocations"]}
    used: dict[str, float] = {}
    basis: dict[str, tuple[float, str]] = {}
    for m in view["models"]:
        rate = float(m.get("rate_rps") or 0.0) * scale * load
        for c in m["classes"] if rate > 0 else ():
            for e in (view["routing"].get(m["name"]) or {}).get(c["name"]) or ():
                a = allocs.get(e["unit"])
                if a is None:
                    continue
                ceiling = ceilings.of_template(templates[a["template"]], m).get(c["name"])
                offered = rate * float(c["share"]) * float(e["share"])
                part = math.inf if ceiling is None or ceiling.rps <= 0 else offered / ceiling.rps
                used[e["unit"]] = used.get(e["unit"], 0.0) + part
                if part > basis.get(e["unit"], (-1.0, ""))[0]:
                    basis[e["unit"]] = (part, ceiling.basis if ceiling else "no rate for the class")
    return {u: (x / max(int(allocs[u]["count"]), 1), basis[u][1]) for u, x in used.items() if x > 0}


def _means(rule) -> tuple[float, float]:
    """The mean (input, output) tokens of a size rule (hetinfra.sim.workload.SizeRule)."""
    if rule.rows:
        n = len(rule.rows)
        return sum(i for i, _ in rule.rows) / n, sum(o for _, o in rule.rows) / n
    (fi, ni), (fo, no) = rule.input, rule.output
    return fi + max(ni - 1, 0) / 2.0, fo + max(no - 1, 0) / 2.0


def _precision(model: dict, variant: str | None) -> str:
    if variant:
        v = next((x for x in model.get("variants") or () if x["name"] == variant), None)
        if v is not None and v.get("precision"):
            return v["precision"]
    return model.get("precision") or "bf16"
