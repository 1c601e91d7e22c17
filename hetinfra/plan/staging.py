"""The plan stage's resolve and templates steps (``hetinfra.plan.pipeline`` runs them first): the spec's
inputs, every unit with its estimated rates, what runs now, and each template's starting factor."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hetinfra.errors import InfeasibleError
from hetinfra.facts import GPU_MEMORY_UTILIZATION
from hetinfra.perf.memory import weights_gb_per_gpu
from hetinfra.perf.model import PerformanceModel
from hetinfra.plan.adapters import with_adapters, with_running_holds
from hetinfra.plan.inputs import PlanInputs, resolve
from hetinfra.plan.library import ClassCoverage, TemplateUnit
from hetinfra.plan.running import read_running, running_factors
from hetinfra.plan.templates import build_units
from hetinfra.plan.variants import below_floor, check_accuracy_floor
from hetinfra.price_feeds.offers import OfferSnapshot
from hetinfra.spec.load import load_spec


#: how to mend an unserved class, by why no layout serves it
_SLO_HINT = "loosen the SLO, allow faster GPUs, or add a profile for this size"
_LAYOUT_HINT = ("loosen the SLO, allow faster GPUs or GPUs with more memory (or more of them per node), or add a "
                "profile for this size")
_WEIGHTS_HINT = ("allow GPUs with more memory or more GPUs per node, more nodes per pipeline "
                 "(planning.max_nodes_per_template) or a lower precision (fp8, int4); or check the model's params")


def _unserved_message(inputs: PlanInputs, key: tuple[str, str], cov: ClassCoverage) -> tuple[str, str]:
    """(why no allowed layout serves class ``key``, how to mend it), one short line each
    (:func:`_why_unserved`), naming the GPUs of infrastructure.gpus that no offer in the allowed
    clouds and regions has: they were never considered, and the fastest GPU named may be slower than
    them (GCP alone, gpus [L4, A10G, L40S]: "fastest is L4 tp=2 pp=2 at 64.8 ms" read as if L40S, whose
    TP2 floor is 23.6 ms, could not meet TPOT 40 ms)."""
    msg, hint = _why_unserved(inputs, key, cov)
    missing = unoffered_gpus(inputs)
    if not missing:
        return msg, hint
    names = ", ".join(missing)
    infra = inputs.spec.infrastructure
    where = f"clouds {', '.join(infra.clouds)}" + (f", regions {', '.join(infra.regions)}" if infra.regions else "")
    return (f"{msg}; not considered: {names} (in infrastructure.gpus, but no offer in {where})",
            f"allow a cloud or region that offers {names}; or {hint}")


def unoffered_gpus(inputs: PlanInputs) -> list[str]:
    """The GPUs infrastructure.gpus lists that no allowed offer has (the allowed clouds and regions
    offer none of them), in the spec's order."""
    listed = inputs.spec.infrastructure.gpus or []
    offered = {o.gpu for o in inputs.offers}
    return [g for g in dict.fromkeys(listed) if g not in offered]


def _why_unserved(inputs: PlanInputs, key: tuple[str, str], cov: ClassCoverage) -> tuple[str, str]:
    """(why no allowed layout serves class ``key``, how to mend it): the weights no layout can hold,
    else the SLO no layout reaches, else the layouts' distinct reasons."""
    model, cls = key
    pm = next(p for p in inputs.models if p.spec.name == model)
    heavy = _weights_beyond(inputs, pm)
    if heavy:
        return f"model {model}: {heavy}{below_floor(pm)}", _WEIGHTS_HINT
    slo = pm.spec.slo
    cls_obj = next(c for c in pm.classes if c.name == cls)
    size = f"in<={cls_obj.input_tokens},out<={cls_obj.output_tokens}"
    for what, floor, objective in (("TPOT", cov.best_tpot_floor, slo.tpot_ms), ("TTFT", cov.best_ttft_floor, slo.ttft_ms)):
        if floor is not None and floor[0] > objective:  # no layout reaches it even alone, nothing queued
            ms, where = floor
            return (f"model {model}: no allowed GPU meets {what} {objective:g} ms for requests {size}: "
                    f"fastest is {where} at {ms:.1f} ms{below_floor(pm)}", _SLO_HINT)
    # a reason is "<layout>: <why>", the layouts with the most GPUs first (the nearest to serving); a
    # pipeline on one node and across nodes often fail alike
    distinct = list(dict.fromkeys(r.split(": ", 1)[-1] for r in cov.reasons))
    first = next((r for r in cov.reasons if r.endswith(distinct[0])), "") if distinct else "no offer can serve it"
    more = f"; {len(distinct) - 1} other reason{'s' if len(distinct) > 2 else ''}" if len(distinct) > 1 else ""
    return (f"model {model}: no allowed GPU can serve requests {size} under TTFT {slo.ttft_ms:g} ms / TPOT "
            f"{slo.tpot_ms:g} ms ({first}{more}){below_floor(pm)}", _LAYOUT_HINT)


def _weights_beyond(inputs: PlanInputs, pm) -> str | None:
    """Why no allowed layout can hold the weights of any checkpoint ``pm`` may serve (None: one may):
    the lightest checkpoint's weights exceed the usable memory of the largest layout the planner
    tries (planning.max_nodes_per_template nodes of the allowed node with the most GPU memory)."""
    archs = [(m.arch, m.spec.precision) for _, m in pm.checkpoints() if m.arch is not None]
    if not archs or not inputs.offers:
        return None
    need, precision = min((weights_gb_per_gpu(a, 1, 1, p), p) for a, p in archs)
    node = max(inputs.offers, key=lambda o: (o.gpu_count * o.gpu_memory_gb, o.gpu, o.instance_type))
    nodes = inputs.spec.planning.max_nodes_per_template
    usable = nodes * node.gpu_count * node.gpu_memory_gb * GPU_MEMORY_UTILIZATION
    if need <= usable:
        return None
    return (f"its weights need {need:,.0f} GB at {precision}, more than any allowed layout holds (at most "
            f"{usable:,.0f} GB: {nodes} node{'s' if nodes > 1 else ''} of {node.gpu_count} x {node.gpu} at "
            f"gpu_memory_utilization {GPU_MEMORY_UTILIZATION:g})")


@dataclass
class Staged:
    """What the solve stage starts from: the resolved inputs, every unit with its estimated rates, what
    runs now, and each template's starting factor (planning.confidence)."""
    inputs: PlanInputs
    units: list[TemplateUnit]
    running: dict[str, int]
    derate: dict[str, float] | None
    template_cache: dict | None


def prepare(spec_path: str | Path, *, snapshot: OfferSnapshot | None = None, state: Path | None = None,
            spec_override=None, extra_caps: dict[tuple[str, str, str], int] | None = None,
            template_cache: bool = True) -> Staged:
    """Resolve the spec at ``spec_path`` and build its units (the pipeline's resolve and templates
    stages): ``spec_override`` (a ServiceSpec, e.g. with demand re-estimated from observations)
    replaces the file's content, whose folder still anchors relative paths."""
    path = Path(spec_path)
    spec, text, locate = load_spec(path)
    if spec_override is not None:
        spec = spec_override
    inputs = resolve(spec, path, text, snapshot, locate, extra_caps=extra_caps)
    check_accuracy_floor(inputs)
    perf = PerformanceModel(inputs.profiles)
    cache = None
    if template_cache:
        from hetinfra.plan.template_cache import TemplateCache, default_dir

        root = default_dir()
        cache = TemplateCache(root) if root is not None else None
    unit_list, coverage = build_units(inputs, perf, cache)
    inputs = _with_unrated_gpus(inputs, unit_list, coverage)
    inputs, unit_list = with_adapters(inputs, unit_list, locate)  # LoRA: adapter classes, slot tiers
    unserved = [(k, c) for k, c in coverage.items() if not c.served]
    if unserved and not spec.planning.allow_unmet:
        found = [_unserved_message(inputs, k, c) for k, c in unserved]
        msgs = list(dict.fromkeys(m for m, _ in found))  # a model too heavy for every layout: one line, not per class
        more = f" (and {len(msgs) - 1} more classes)" if len(msgs) > 1 else ""
        raise InfeasibleError(msgs[0] + more, hint=found[0][1], details={"relax": [{"slo": m} for m in msgs]})
    running = read_running(Path(state)) if state else {}
    if state and spec.adapters:  # LoRA: the placement that runs, which the re-plan prefers (plan/adapters)
        inputs = with_running_holds(inputs, Path(state))
    # planning.confidence applies to every plan: a verified plan starts there (verification credits
    # a template back up to its interval's top where the simulation allows), an unverified one ends there
    derate = start_factors(unit_list, spec.planning.confidence)
    if state:
        derate.update(running_factors(Path(state), unit_list))
    return Staged(inputs, unit_list, running, derate or None, cache.report() if cache else None)


def _with_unrated_gpus(inputs, units: list[TemplateUnit], coverage: dict):
    """``inputs`` with a warning per GPU offered to the plan on which no layout of any model has a rate at all
    (neither a profile row nor the estimator applies), and why: such a GPU is in neither the plan nor its
    baselines table, and
    a user who offered it should hear that it was never considered (held-out h169, heldout66 F9: a custom
    GPU without a profile, offered at $0.70/h beside AWS, left out without a word)."""
    from dataclasses import replace

    from hetinfra.perf.model import NO_RATE

    rated = {u.template.gpu for u in units}
    reasons = [r for cov in coverage.values() for r in cov.reasons if NO_RATE in r]
    lines = []
    for gpu in sorted({o.gpu for o in inputs.offers} - rated):
        why = next((r.split(": ", 1)[1] for r in reasons if r.split(" ", 1)[0] == gpu and ": " in r), None)
        if why is not None:  # a GPU rated but too slow for the objectives is in the baselines table, said there
            lines.append(f"GPU {gpu}: offered, but no layout of any model has a rate on it ({why}); it is not "
                         "considered (a profile CSV rates it: `hetinfra profile` or `hetinfra profile-import`)")
    return replace(inputs, warnings=(*inputs.warnings, *lines)) if lines else inputs


def start_factors(units: list[TemplateUnit], setting: str) -> dict[str, float]:
    """Template id -> the factor its estimated rates are planned at (hetinfra.perf.confidence.
    planning_factor over the template's interval): under ``planning.confidence: safe`` the low end for
    extrapolated templates, else 1; under ``expected`` its interval's middle."""
    from hetinfra.perf.confidence import planning_factor

    out = {}
    for u in units:
        t = u.template
        f = planning_factor(t.confidence[0] if t.confidence else "calibrated", setting, t.interval,
                            t.disagreement[1] if t.disagreement else None)
        if f != 1.0:
            out[u.template.id] = f
    return out
