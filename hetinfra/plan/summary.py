"""Human-readable plan summary (Rich). Reads only plan.json (parsed once into its model,
hetinfra.document.Plan), so it shows what was written."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from hetinfra.errors import markup_escaped
from hetinfra.tables import print_table
from hetinfra.plan.summary_fleet import gpus_cell, render_baselines, util_note
from hetinfra.plan.summary_promise import confirmed_by_model, promise_lines, verified_fidelity, with_bound

if TYPE_CHECKING:
    from hetinfra.document import Allocation, Plan


def adapter_lines(doc: "Plan") -> list[str]:
    from hetinfra.plan.adapters import adapter_summary  # issue 38's section, beside its builder

    return adapter_summary(doc)


def render_summary(doc: "Plan", console: Console) -> None:
    """The summary of plan ``doc`` on ``console``."""
    console.print(_headline(doc))
    _render_allocations(doc, console)
    _render_variants(doc, console)
    for m in doc.models:  # issue 37: why each model is split into prefill/decode bundles or not
        if m.disaggregation is not None:
            console.print(f"{m.name}: {'split (prefill/decode)' if m.disaggregation.split else 'not split'}: "
                          f"{m.disaggregation.reason}", highlight=False)
    for line in adapter_lines(doc):  # issue 38: where each LoRA adapter lives
        console.print(line, highlight=False)
    if doc.purchase:
        _render_purchase(doc, console)
    _render_fidelity(doc, console)
    _render_failover(doc, console)
    render_origins(doc, console)
    render_baselines(doc, console)
    _render_solver(doc, console)
    for w in doc.warnings:  # they quote files (a CSV cell, a path): printed as written, never as markup
        console.print(f"[yellow]warning:[/] {markup_escaped(w)}")


def _headline(plan: "Plan") -> str:
    head = f"[bold]{plan.service}[/]: ${plan.cost_usd_per_hour:.2f}/h, {plan.gpus} GPUs"
    if plan.objective == "max_throughput":
        head += f", demand scale {plan.demand_scale:.3f}x of declared (budget ${plan.budget_usd_per_hour:g}/h)"
    elif plan.budget_usd_per_hour:
        head += f" (budget ${plan.budget_usd_per_hour:g}/h)"
    unmet = sum(plan.unmet_rps.values())
    if unmet > 0:  # planning.allow_unmet: the cost is of a plan that serves part of the demand, said first
        declared = sum(m.rate_rps for m in plan.models) * plan.scale()
        head += (f", [yellow]serves {max(declared - unmet, 0.0):.3g} of {declared:.3g} req/s "
                 f"({unmet:.3g} left unserved: unmet_rps)[/]")
    s = plan.solver
    if s.status != "optimal":
        why = "time limit hit" if s.safety_stop else "node limit hit"
        head += f"  [yellow]{why}: best plan found, gap {100 * (s.gap or 0):.2f}%[/]"
    return head


def _render_allocations(plan: "Plan", console: Console) -> None:
    t = Table(title="Allocations", title_justify="left", show_lines=False)
    extrapolated = {x.id for x in plan.templates if x.confidence and x.confidence.level == "extrapolated"}
    narrow = console.width < WIDE
    cols = ("model", "where", "n", "$/h", "util") if narrow else \
        ("model", "cloud/region", "instance", "GPUs", "vLLM", "n", "$/h", "util")
    for col in cols:
        _column(t, col, plan)
    for a in plan.allocations:
        layout = f"TP{a.tp}" + (f" PP{a.pp}" if a.pp > 1 else "")
        if a.engines_per_instance > 1:
            layout = f"{a.engines_per_instance}x {layout}"
        if a.disaggregation is not None:  # a bundle: each role's engines and TP (issue 37)
            layout = " + ".join(f"{r.engines}{r.role[0].upper()} TP{r.tp}" for r in a.disaggregation.roles)
        gpus = gpus_cell(a)
        inst = _instances(a)
        if a.template in extrapolated:
            inst += " *"
        if (a.purchase or "").startswith("committed"):
            inst += f" committed {a.purchase.split('_')[1]}"
        where = (f"{a.cloud}/{a.region}", inst + (" spot" if a.spot else ""), gpus, layout)
        cells = ("\n".join(where),) if narrow else where
        t.add_row(a.model + (f" ({a.variant})" if a.variant else ""), *cells, str(a.count),
                  f"{a.cost_usd_per_hour:.2f}", f"{100 * a.utilization:.0f}%")
    print_table(console, t)
    if any(a.template in extrapolated for a in plan.allocations):
        console.print("[dim]* rates extrapolated beyond the calibration data (templates[].confidence in plan.json)[/]")
    note = util_note(plan)
    if note:
        console.print(note, highlight=False)


#: below this many columns the allocation table stacks place, instance, GPUs and layout in one cell,
#: and every table keeps its figures whole (model, count and $/h never shrink to "…")
WIDE = 110
#: columns that hold figures: never wrapped, never cut (their width is their longest cell)
FIGURES = {"n", "$/h", "util", "attained", "met", "confirmed"}
#: the narrowest a wrapping column may become (its words wrap inside it)
MIN_TEXT = 10


def _column(t: Table, col: str, plan: "Plan") -> None:
    """A column that wraps at words (``fold`` inside a word longer than the column) when it holds
    words, and keeps its whole width when it holds a figure; the model column is as wide as the
    longest model name (up to 24), so no name shrinks to "…"."""
    right = col in FIGURES or col in ("TTFT", "TPOT")
    if col in FIGURES:
        t.add_column(col, justify="right", no_wrap=True, min_width=_widest(col, plan))
    else:
        t.add_column(col, justify="right" if right else "left", overflow="fold", min_width=_widest(col, plan))


def _widest(col: str, plan: "Plan") -> int | None:
    if col == "model":
        return min(24, max([5] + [len(m.name) for m in plan.models]))
    if col in ("n", "$/h"):
        cells = [str(a.count) if col == "n" else f"{a.cost_usd_per_hour:.2f}" for a in plan.allocations]
        return max([len(col)] + [len(c) for c in cells])
    if col in FIGURES:
        return len(col)
    # only the columns a narrow table squeezes get a floor; the others keep their natural width
    return MIN_TEXT if col in ("where", "objective", "TTFT", "TPOT") else None


def _instances(a: "Allocation") -> str:
    """The instance column: the type and nodes, or a mixed pipeline's instance types and layers per stage."""
    if a.heterogeneous_bundle:  # prefill nodes, then decode nodes (issue 37)
        return " + ".join(f"{g.instances // max(a.count, 1)} {g.instance_type} ({r.role})"
                          for g, r in zip(a.stage_groups(), a.disaggregation.roles))
    if not a.stages:
        return a.instance_type + (f" x{a.nodes_per_replica} nodes" if a.nodes_per_replica > 1 else "")
    groups: list[list] = []
    for st in a.stages:
        if groups and groups[-1][0] == st.instance_type:
            groups[-1][1] += 1
        else:
            groups.append([st.instance_type, 1])
    return (" + ".join(f"{n} {it}" if n > 1 else it for it, n in groups)
            + f" ({'/'.join(str(st.layers) for st in a.stages)} layers, experimental)")


def _render_solver(plan: "Plan", console: Console) -> None:
    s = plan.solver
    gap = "n/a" if s.gap is None else f"{100 * s.gap:.3f}%"
    warm = ""
    if s.warm_start:
        warm = f"; warm start: {s.warm_start.from_}" + (f" (${s.warm_start.objective:.2f}/h)"
                                                       if s.warm_start.objective is not None else "")
    solver = "HiGHS" if s.name == "highs" else s.name  # planning.solver: any MIP solver Pyomo drives
    console.print(f"solver: {solver} {s.status}, gap {gap}, {s.variables} vars ({s.integer_variables} integer), "
                  f"{s.constraints} constraints, build {s.build_s:.2f}s + solve {s.solve_s:.2f}s; "
                  f"routing {s.routing}" + (f" (slice factor {s.slice_factor})" if s.slice_factor else "") + warm)
    inp = plan.inputs
    console.print(f"offers as of {inp.offers_as_of} ({markup_escaped(', '.join(x.name for x in inp.sources))}); "
                  f"rates from {_sources(plan)}")


def render_origins(doc: "Plan", console: Console) -> None:
    """Per model and origin: where its requests go and the worst round trip they pay (plan.json origins)."""
    for model, origins in sorted((doc.origins or {}).items()):
        parts = []
        for o, e in origins.items():
            regions = sorted({f.region for flows in doc.routing_by_origin[model][o].values() for f in flows})
            worst = "n/a" if e.worst_network_ms is None else f"{e.worst_network_ms:g} ms"
            rule = f", stays in {e.area}" if e.area else ""
            parts.append(f"{o} -> {', '.join(regions) or '-'} (worst network {worst}{rule})")
        console.print(f"origins of {model}: " + "; ".join(parts))


def _render_variants(plan: "Plan", console: Console) -> None:
    """Which variant serves which class, and the accuracy the plan gives up (plan.json ``models[].accuracy``)."""
    models = [m for m in plan.models if m.variants]
    if not models:
        return
    variant = {a.unit: a.variant for a in plan.allocations}
    t = Table(title="Variants", title_justify="left")
    for col in ("model", "class", "served by", "accuracy"):
        t.add_column(col, justify="right" if col == "accuracy" else "left")
    for m in models:
        score = {v.name: v.accuracy for v in m.variants}
        for cls, routes in (plan.routing.get(m.name) or {}).items():
            shares: dict[str, float] = {}
            for r in routes:
                shares[variant[r.unit]] = shares.get(variant[r.unit], 0.0) + r.share
            mean = sum(score[v] * x for v, x in shares.items()) / sum(shares.values()) if shares else None
            by = ", ".join(f"{v} {100 * x:.0f}%" for v, x in sorted(shares.items(), key=lambda kv: (-kv[1], kv[0])))
            t.add_row(m.name, cls, by or "-", "-" if mean is None else f"{mean:g}")
    print_table(console, t)
    for m in models:
        acc = m.accuracy
        line = f"{m.name}: accuracy {acc.served:g} served (mean over its traffic)" if acc.served is not None \
            else f"{m.name}: no traffic served"
        line += f", best variant {acc.best_variant} {acc.best:g}"
        if acc.given_up is not None:
            line += f": {acc.given_up:g} given up"
        if acc.min_accuracy is not None:
            below = [f"{v.name} ({v.accuracy:g})" for v in m.variants if not v.meets_floor]
            line += f"; floor {acc.min_accuracy:g}" + (f", never planned: {', '.join(below)}" if below else "")
        console.print(line)


def _render_fidelity(plan: "Plan", console: Console) -> None:
    """Simulated latency percentiles beside each model's objective (plan.json ``fidelity``): the mean over
    the replications and its bound, on the search's seeds and on the confirmation's."""
    f = verified_fidelity(plan)
    if f is None:
        return
    conf = f.replications.confidence if f.replications else None
    title = f"Latency objectives, simulated at {f.load:g}x demand ({f.rounds} round(s)"
    title += f", {100 * conf:g}% bounds)" if conf else f", seed {f.seed})"
    t = Table(title=title, title_justify="left")
    for col in ("model", "objective", "TTFT", "TPOT", "attained", "met", "confirmed"):
        _column(t, col, plan)
    confirmed = confirmed_by_model(plan)
    unserved = plan.unserved_models()
    for m in f.models or ():
        goal = f"{m.percentile} TTFT<={m.objective('ttft_ms'):g} ms, TPOT<={m.objective('tpot_ms'):g} ms"
        if m.objective("attainment"):
            goal += f", {100 * m.objective('attainment'):g}% both"
        att, _ = m.statistic("attainment")
        c = confirmed.get(m.model)
        t.add_row(m.model, goal, with_bound(*m.statistic("ttft_ms")), with_bound(*m.statistic("tpot_ms")),
                  "-" if att is None else f"{100 * att:.1f}%", _verdict(m, unserved),
                  "-" if c is None else _verdict(c, unserved))
    print_table(console, t)
    for line in promise_lines(plan):
        console.print(line, highlight=False)


def _verdict(judged, unserved: set[str]) -> str:
    """A model's met cell: yes; NO for a miss; undecided where its bound straddled the objective when
    its replications ended (not shown to meet, not shown to miss); unserved where the plan serves none
    of its demand (no latency to judge)."""
    if judged.met:
        return "yes"
    if judged.model in unserved:
        return "[yellow]unserved[/]"
    return "[yellow]undecided[/]" if judged.decision == "undecided" else "[red]NO[/]"


def _render_failover(plan: "Plan", console: Console) -> None:
    """What SkyServe's failover may add to the plan's cost (plan.json allocations[].alternates and
    .ondemand_fallback)."""
    allocs = plan.allocations
    moving = [a for a in allocs if a.alternates]
    falling = [a for a in allocs if a.ondemand_fallback]
    if not moving and not falling:
        return
    parts = []
    if moving:
        worst = sum((max(x.price_per_hour for x in a.alternates) - a.price_per_instance_usd_per_hour) * a.instances
                    for a in moving)
        premium = plan.deploy.failover.max_premium
        parts.append(f"{len(moving)} of {len(allocs)} unit(s) may fail over to equivalent offers (same GPU and layout, "
                     f"at most +{100 * premium:g}%/h): up to ${max(worst, 0.0):.2f}/h more")
    if falling:
        extra = sum((a.ondemand_fallback.price_per_hour - a.price_per_instance_usd_per_hour) * a.instances
                    for a in falling)
        parts.append(f"{len(falling)} spot unit(s) fall back to on-demand while spot is preempted or starting: up to "
                     f"${extra:.2f}/h more")
    console.print("failover (SkyPilot tasks): " + "; ".join(parts) + f". The plan's ${plan.cost_usd_per_hour:.2f}/h "
                  "is the planned offers'.")


def _render_purchase(plan: "Plan", console: Console) -> None:
    """The committed base, the top-ups and each committed price's break-even (plan.json ``purchase``)."""
    p = plan.purchase
    periods = f", {p.periods} periods" if p.periods > 1 else ""
    console.print(f"Purchase: {', '.join(p.terms)} over {p.horizon_months} months{periods}")
    console.print(f"  committed base ${p.committed_cost_usd_per_hour:.2f}/h + top-ups "
                  f"${p.top_up_cost_usd_per_hour:.2f}/h on average = ${plan.cost_usd_per_hour:.2f}/h; peak period "
                  f"${p.peak_cost_usd_per_hour:.2f}/h"
                  + (f"; without committed terms ${p.without_committed_usd_per_hour:.2f}/h"
                     if p.without_committed_usd_per_hour is not None else ""))
    for a in (a for a in plan.allocations if a.counts_by_period):
        console.print(f"  top-up {a.deployment_unit} by period: {' '.join(map(str, a.counts_by_period))} "
                      f"({a.count} deployed)")
    if not p.break_even:
        return
    t = Table(title="Break-even: committing pays above this utilisation of the committed capacity",
              title_justify="left")
    for col in ("deployment unit", "term", "committed $/h", "on-demand $/h", "break-even", "utilisation", "committed"):
        t.add_column(col, justify="left" if col in ("deployment unit", "term", "committed") else "right",
                     overflow="fold" if col == "deployment unit" else "ellipsis")  # a name wraps, never cut
    names = {a.unit: a.deployment_unit for a in plan.allocations}
    for b in p.break_even:
        t.add_row(names[b.unit], b.purchase.split("_")[1], f"{b.committed_price_usd_per_hour:.4f}",
                  f"{b.on_demand_price_usd_per_hour:.4f}", f"{100 * b.break_even_utilization:.0f}%",
                  f"{100 * b.utilization:.0f}%", "yes" if b.chosen else "no")
    print_table(console, t)


def _sources(plan: "Plan") -> str:
    kinds = sorted({src.split(":")[0] for t in plan.templates for src in t.sources.values()})
    return ", ".join(kinds) or "n/a"
