"""Warnings on the final plan that its document states beside its figures (plan.json ``warnings`` and the
summary): profile rows measured on a weaker statistic than the objective, and units bought that carry
no traffic."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetinfra.csvtext import whole_number

if TYPE_CHECKING:
    from hetinfra.document import Plan
    from hetinfra.plan.planner import PlanResult

__all__ = ["idle_warnings", "statistic_warnings", "unmet_warnings"]


def idle_warnings(pr: PlanResult) -> list[str]:
    """Units the plan buys that carry none of their model's traffic, and the rule that buys them: a
    fraction cap counts GPUs (``max_spot_fraction``), so the cheapest way to let a model run spot is
    on-demand GPUs that serve nothing (a held-out spec: 8 idle T4s, $4.21/h, beside one spot p4d).
    Said, with what changes it, never hidden: a plan carries no replica it does not need unless a rule
    of the spec asks for it."""
    from hetinfra.plan.allocations_json import planned_load

    flow = planned_load(pr).rps
    idle: dict[str, list[str]] = {}
    for uid, n in sorted(pr.result.n.items()):
        if n > 0 and flow.get(uid, 0.0) <= 1e-9:
            idle.setdefault(pr.units[uid].model, []).append(uid)
    spot_cap = {pm.spec.name: pm.spec.max_spot_fraction for pm in pr.inputs.models}
    out = []
    for model, uids in sorted(idle.items()):
        gpus = sum(pr.units[u].gpus * pr.result.n[u] for u in uids)
        cost = sum(pr.units[u].cost * pr.result.n[u] for u in uids)
        why = (f"bought so that at most {spot_cap[model]:g} of its GPUs are spot (max_spot_fraction counts GPUs, "
               "not capacity): raise max_spot_fraction, or allow no spot for it"
               if spot_cap.get(model, 1.0) < 1.0 and not any(pr.units[u].spot for u in uids)
               else "a rule of the spec (a cap, a cover or a floor) asks for them")
        out.append(f"model {model}: {gpus} GPU(s) (${cost:.2f}/h: {', '.join(uids)}) carry none of its traffic; {why}")
    return out


def unmet_warnings(pr: PlanResult, doc: "Plan") -> list[str]:
    """Demand the plan leaves unserved (``planning.allow_unmet``), per model: how much of what was
    declared, and the two settings that decide it. Said as a warning, never left to plan.json's
    ``unmet_rps`` alone: a held-out spec (a 70B at 10 req/s under a $20/h budget) planned "$14.69/h, 4
    GPUs" and serves 1.19 req/s of it, with nothing in the summary saying so."""
    spec = pr.inputs.spec
    penalty = f"serving it costs more than its penalty (${spec.planning.unmet_penalty_usd_per_rps_hour:g} per req/s-hour)"
    why = (f"the budget (${spec.budget_usd_per_hour:g}/h) buys no more of it, or {penalty}; raise "
           "budget_usd_per_hour or unmet_penalty_usd_per_rps_hour" if spec.budget_usd_per_hour
           else f"{penalty}; raise unmet_penalty_usd_per_rps_hour")
    out = []
    for model, (rps, total) in sorted(doc.unmet_by_model().items()):
        out.append(f"model {model}: {rps:.3g} of its {total:.3g} req/s ({100 * min(rps / total, 1.0):.0f}%) left "
                   f"unserved under planning.allow_unmet: {why}, or drop allow_unmet to plan all of it")
    return out


def statistic_warnings(pr: PlanResult) -> list[str]:
    """Profile rows behind the plan's units measured on a weaker statistic than their model's objective
    (mean for p99): used, with this warning; the simulation checks the plan at the objective's. One
    warning per file, statistic and model, naming its rows as line ranges: Mélange's profiles (a rate
    per class and GPU, no statistic) gave one line per row, 70 of them on V1 at 32 req/s."""
    from hetinfra.perf.profiles import weaker_statistic

    rows = {r.origin: r for r in pr.inputs.profiles.rows}
    objective = {pm.spec.name: pm.spec.slo.percentile for pm in pr.inputs.models}
    weaker: dict[tuple[str, str, str], set[str]] = {}
    for uid in pr.result.n:
        t = pr.units[uid].template
        for src in t.sources.values():
            row = rows.get(src[len("profile:"):]) if src.startswith("profile:") else None
            if row is not None and weaker_statistic(row, objective[t.model]):
                path, _, line = row.origin.rpartition(":")
                weaker.setdefault((path or row.origin, row.statistic or "", t.model), set()).add(line)
    return [f"profile {path} {_lines(lines)} measured on {statistic or 'an unknown statistic (mean)'}, weaker than "
            f"{model}'s {objective[model]} objective: used, and checked by simulation"
            for (path, statistic, model), lines in sorted(weaker.items())]


def _lines(lines: set[str]) -> str:
    """``lines`` of a file as "line 7 was" or "lines 38-51, 100 were" (runs of consecutive numbers)."""
    numbers = sorted(whole_number(n) for n in lines if whole_number(n) is not None)
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans)
    others = sorted(n for n in lines if whole_number(n) is None)  # an origin without a line number: said as it is
    text = ", ".join(filter(None, [text, *others]))
    return f"line {text} was" if len(lines) == 1 else f"lines {text} ({len(lines)} rows) were"
