"""``hetinfra replan``: re-solve against what runs, decide, and (with ``--apply``) change safely.

Exit codes (documented in docs/reference/exit-codes.md; cron scripts switch on them):

- 0  no change worth making (nothing differs, or the savings are under the thresholds)
- 10 change proposed (not applied): the diff is in the log and ``OUT/proposed/plan.json``
- 11 change applied (or a half-finished earlier replan was completed)
- 75 another replan holds the lock; this run did nothing
- 2 invalid input, 3 infeasible, 4 feed or provider failure (as for every command)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from hetinfra.compile.artifacts import write_plan
from hetinfra.document import Allocation, Plan
from hetinfra.document.state import allocation_of
from hetinfra.fileio import atomic_write_text, dumps_strict, present
from hetinfra.outdir import kept_dir
from hetinfra.errors import ProviderError
from hetinfra.replan.owner import check_service
from hetinfra.replan.diff import (FORCED, HOLD, NONE, Decision, decide, dropped_units, gpus_in_use, held_as_met,
                                  held_changes, render, spec_demand_changes)
from hetinfra.deploy.health import http_health, wait_healthy
from hetinfra.replan.safe import (JOURNAL, Journal, cap_cut, render_stages, replan_lock, stage_cost, stage_counts,
                                  stage_moves, stage_plan)

#: the stage of a run whose units keep their replicas and re-hold adapters (diff.held_changes)
UPDATE = "update"

NO_CHANGE, PROPOSED, APPLIED = 0, 10, 11

#: the plan a run that exits 10 proposes (under OUT); it is there only after such a run
PROPOSED_PLAN = Path("proposed") / "plan.json"


def clear_proposal(out: Path) -> None:
    """Remove the proposal an earlier run left (one unlink: it is there whole or gone), so that a run
    that proposes nothing leaves no stale OUT/proposed/plan.json for a script to act on."""
    (out / PROPOSED_PLAN).unlink(missing_ok=True)
    try:
        (out / PROPOSED_PLAN).parent.rmdir()
    except OSError:  # not there, or holds files of the user's
        pass


@dataclass
class ReplanOptions:
    feeds: str = "snapshot"
    strict_feeds: bool = False
    max_age_h: float | None = None
    min_savings_pct: float = 5.0
    min_savings_usd_h: float = 1.0
    max_changes: int | None = None
    apply: bool = False
    target: str = "all"
    demand_log: Path | None = None
    health_timeout_s: float = 1800.0
    caps_file: str | None = None
    availability: bool = False
    refresh: bool = True  # read live replicas from the clouds (hetinfra.deploy.drift), not only state.json
    min_history_h: float | None = None  # observed demand needs this much log; None: the profile's period or 24 h
    max_cut: float = 0.5  # most of the running GPUs one run removes ...
    force: bool = False  # ... unless forced
    #: a forecast whose backtest MAPE exceeds this (a fraction) holds back every removal of the run
    max_forecast_error: float = 0.5


@dataclass
class Outcome:
    code: int
    summary: str
    decision: Decision | None = None  # None when an interrupted replan was completed or reported
    stages: list[str] | None = None  # what this run applies (or, proposed, would apply), stage by stage
    #: forecasts whose backtest error is over --max-forecast-error-pct: they held this run's removals back
    forecast_holds: list[str] | None = None
    #: (instances launched, removed) by this run's stages (less than the decision's when capped)
    this_run_moves: tuple[int, int] | None = None


def min_history_s(spec, min_history_h: float | None) -> float:
    """Least span of log the observed demand of a model needs: ``--min-history-h``, else one period of the
    declared demand.profile (one hour per multiplier: 24 for a day, 168 for a week), else 24 hours."""
    if min_history_h is not None:
        return min_history_h * 3600.0
    periods = max((len(m.demand.profile) for m in spec.models if m.demand.profile), default=24)
    return periods * 3600.0


def unreliable_forecasts(observed: dict, max_error: float) -> list[str]:
    """Lines naming each observed model whose forecast's backtest MAPE exceeds ``max_error`` (a
    fraction). Such a forecast may add capacity but never removes any (see :func:`_this_run`)."""
    return [f"{name}: the forecast's backtest error (MAPE {obs.forecast.mape:.0%}) exceeds {max_error:.0%} "
            "(--max-forecast-error-pct); it does not drive cuts: this run makes no removal"
            for name, obs in sorted(observed.items())
            if obs.forecast.mape is not None and obs.forecast.mape > max_error]


def _running_plan(out: Path) -> Plan | None:
    """OUT/plan.json, read once for a run (None where OUT holds a state.json alone). A broken one is exit 2,
    as the planner's own read of it (hetinfra.plan.running.running_factors) has always made it."""
    from hetinfra.document.plan import RUNNING_HINT, load_plan

    return load_plan(out / "plan.json", hint=RUNNING_HINT) if present(out / "plan.json") else None


def _declared_origins(running_plan: Plan | None) -> frozenset[str]:
    """The regions the running plan declares: the origins a demand log may name."""
    from hetinfra.document.crosscheck import declared_regions

    return declared_regions(running_plan) if running_plan is not None else frozenset()


def _observed_spec(spec_path: Path, demand_log: Path, detail: Callable[[str], None], opts: ReplanOptions,
                   known: frozenset[str] = frozenset()):
    """The spec with the observed demand of each model the log covers long enough, the triggers it
    makes, and the lines of forecasts too wrong to drive cuts (:func:`unreliable_forecasts`)."""
    from hetinfra.replan.demand_log import apply_to_spec, observe_spec, read_demand_log
    from hetinfra.spec.load import load_spec

    spec, _, _ = load_spec(spec_path)
    log = read_demand_log(demand_log)
    from hetinfra.plan.adapters import adapter_triggers, fold_adapters, with_adapter_shares  # LoRA: adapter rows are their base's

    log, adapter_shares = fold_adapters(log, spec)
    observed, notes = observe_spec(log, spec)
    notes = list(log.skipped) + notes
    need = min_history_s(spec, opts.min_history_h)
    unused = []  # said in the outcome, not only in replan.log: the log changed nothing for these
    for name, obs in sorted(observed.items()):
        if obs.span_s < need:  # too short to know a day's peak: plan the declared demand instead
            del observed[name]
            notes.append(f"{name}: the log covers {obs.span_s / 3600:.2f} h ({obs.requests} requests), less than the "
                         f"{need / 3600:g} h of history needed (--min-history-h); planning the declared demand")
            unused.append(f"{name} planned at its declared demand (the log covers {obs.span_s / 3600:.2f} h of the "
                          f"{need / 3600:g} h needed: --min-history-h)")
    in_log = set(log.model_names())
    unused += [f"{m.name} planned at its declared demand (not in the log)" for m in spec.models if m.name not in in_log]
    unused += [f"log model {n!r} is in no model of the spec" for n in sorted(in_log - {m.name for m in spec.models})]
    unreliable = unreliable_forecasts(observed, opts.max_forecast_error)
    new_spec, more = apply_to_spec(spec, observed, known)
    new_spec = with_adapter_shares(new_spec, adapter_shares)  # and their observed shares re-place them
    triggers = []
    for m in spec.models:
        new_rate = next(x.demand.rate_rps for x in new_spec.models if x.name == m.name)
        if abs(new_rate - m.demand.rate_rps) > 1e-9:
            triggers.append(f"demand of {m.name}: {m.demand.rate_rps:g} -> {new_rate:.3g} req/s (forecast peak + buffer)")
    triggers += adapter_triggers(spec, new_spec)
    for line in list(notes) + list(more) + unreliable:
        detail(f"demand: {line}")
    return new_spec, triggers, unreliable, unused


def _live(out: Path, running: list[dict], opts: ReplanOptions, detail, *, pulumi_command, env
          ) -> tuple[list[dict], list[str], dict[tuple[str, str, str], int]]:
    """What runs by the clouds' account when hetinfra deployed ``out`` (state.json): replicas gone
    (only `pulumi up` brings them back) or stalled (their groups find no capacity) are taken out of
    ``running``. Returns it, the lines that force the move, and caps that keep the new plan from
    placing more of a stalled unit's GPU where it stalled than run there now."""
    if not opts.refresh or not present(out / "state.json"):
        return running, [], {}
    from hetinfra.deploy.drift import read_live, record
    from hetinfra.deploy.live_read import running_now
    from hetinfra.deploy.state import DeployState

    live = read_live(out, DeployState.load(out), pulumi_command=pulumi_command, env=env)
    record(out, live)
    now_running, forced, notes = running_now(running, live)
    for line in notes:
        detail(f"live: {line}")
    units = live.get("units") or {}
    stalled = [a for a in map(allocation_of, running) if (units.get(a.deployment_unit) or {}).get("stalled")]
    used = gpus_in_use([allocation_of(a) for a in now_running])
    caps = {k: used.get(k, 0) for k in gpus_in_use(stalled)}
    for (cloud, region, gpu), n in sorted(caps.items()):
        detail(f"live: {gpu} in {cloud}/{region} capped at the {n} GPU(s) running there (a group stalled)")
    return now_running, forced, caps


def _check_health_paths(new_plan: Plan, running: list[Allocation], stages, target: str) -> None:
    """Refuse (exit 2) before anything changes when a unit this run grows could not be checked
    for health from this host (hetinfra.deploy.health)."""
    from hetinfra.deploy.apply import path_of
    from hetinfra.deploy.preflight import check_health_paths

    before = {r.unit: r.count for r in running}
    grow = {u for name, counts in stages if name == "make" for u, c in counts.items() if c > before.get(u, 0)}
    grow |= {h.unit for h in held_changes(running, new_plan.allocations)}  # their engines restart
    check_health_paths(new_plan, [(a, path_of(a, target, new_plan)) for a in new_plan.allocations
                                  if a.unit in grow], refuse=True)


def _run_stages(out: Path, journal: Journal, opts: ReplanOptions, detail, *, health, pulumi_command, env) -> None:
    """Apply the journal's stages in order. A stage's plan is written into OUT only for good: a stage whose
    apply fails before its first step (a missing prerequisite, a failed preview) leaves OUT as it was
    (:func:`hetinfra.outdir.kept_dir`) and, when no stage of the journal ran yet, records nothing, so the
    next run re-plans afresh instead of pushing this run's plan as a half-finished one."""
    new_plan, running = journal.doc.new_plan, journal.doc.running_before
    for stage in journal.doc.stages:
        if stage.status == "done":
            detail(f"stage {stage.name}: done in an earlier run")
            continue
        target = Plan.parse(stage_plan(new_plan, running, stage.counts), out / "plan.json")
        with kept_dir(out, fresh=("state.json", JOURNAL)) as keep:
            write_plan(out, target)
            try:
                _apply_stage(out, target, stage, running, opts, detail, lambda: (keep(), journal.set(stage, "running")),
                             health=health, pulumi_command=pulumi_command, env=env)
            except Exception as exc:
                if journal.recorded:  # a stage ran (now or in an earlier run): the journal says where it stopped
                    journal.set(stage, "failed", str(exc))
                raise
        journal.set(stage, "done")
    journal.finish()


def _apply_stage(out: Path, target: Plan, stage, running: list[dict], opts: ReplanOptions, detail, on_steps,
                 *, health, pulumi_command, env) -> None:
    """One stage: apply its plan (``on_steps`` before the first step), then wait for what it grew."""
    from hetinfra.deploy.apply import apply_plan

    state = apply_plan(out, target, target=opts.target, yes=True, echo=detail, pulumi_command=pulumi_command,
                       env=env, on_steps=on_steps)
    if stage.name not in ("make", UPDATE):
        return
    was = list(map(allocation_of, running))
    before = {r.unit: r.count for r in was}
    grown = {a.deployment_unit for a in target.allocations if a.count > before.get(a.unit, 0)}
    grown |= {h.deployment_unit for h in held_changes(was, target.allocations)}  # restarted engines
    bad = wait_healthy(target, state.model, sorted(grown), timeout_s=opts.health_timeout_s, env=env or {},
                       http=health)
    if bad:
        raise ProviderError(f"new capacity is not healthy after {opts.health_timeout_s:g} s: "
                            f"{', '.join(bad)}; the old capacity was kept",
                            hint="check the VMs' /var/log/hetinfra-startup.log; the next replan retries")


def replan(spec_path: Path, out: Path, opts: ReplanOptions, *, detail: Callable[[str], None] = print,
           health=http_health, pulumi_command=None, env: dict | None = None) -> Outcome:
    import os

    env = dict(os.environ) if env is None else env
    with replan_lock(out):
        check_service(spec_path, out)  # another service's spec would plan the running one away
        journal = Journal(out)
        if journal.unfinished:
            return _resume(out, journal, opts, detail, health=health, pulumi_command=pulumi_command, env=env)
        p = _propose(spec_path, out, opts, detail, pulumi_command=pulumi_command, env=env)
        d = p.decision
        detail(render(d))
        if d.kind in (NONE, HOLD):
            why = "nothing differs" if d.kind == NONE else d.note or (
                f"savings ${d.savings:.2f}/h ({d.savings_pct:.1f}%) under the thresholds "
                f"({opts.min_savings_pct:g}% and ${opts.min_savings_usd_h:g}/h)")
            clear_proposal(out)
            return Outcome(NO_CHANGE, f"no change worth making: {why}; ${d.running_cost_new:.2f}/h"
                           + _log_unused(p), d, forecast_holds=p.unreliable)
        label = "forced move" if d.kind == FORCED else "change"
        head = (f"{label}: +{d.added}/-{d.removed} instance(s)"
                + (f", adapters moved on {len(d.held)} unit(s)" if d.held else "")
                + f", ${d.running_cost_new:.2f}/h -> ${d.new_cost:.2f}/h (savings ${d.savings:.2f}/h)")
        new_plan = p.plan.to_dict()  # the journal's copy and proposed/plan.json
        stages, complete, capped = _this_run(p.running, p.plan, opts, detail, hold_cuts=bool(p.unreliable))
        shown = render_stages(stages, p.running)
        moves = stage_moves(stages, p.running, p.plan)
        if not complete:  # capped: say what this run does apart from the whole change, and what it costs
            head += (f"; this run {'makes' if opts.apply else 'would make'} +{moves[0]}/-{moves[1]}, leaving "
                     f"${stage_cost(stages, p.running, p.plan):.2f}/h until the next run")
        if not opts.apply:
            atomic_write_text(out / PROPOSED_PLAN, dumps_strict(new_plan, indent=2) + "\n")
            return Outcome(PROPOSED, f"{head}; proposed in {out / PROPOSED_PLAN} (run with --apply)"
                           + ("; this run would apply a capped cut" if capped else "")
                           + ("; a forecast too wrong to cut on holds removals back" if p.unreliable else "")
                           + _log_unused(p), d, shown, p.unreliable, moves)
        _check_health_paths(p.plan, p.running, stages, opts.target)
        journal.start(new_plan, stages, complete, p.running_dicts)
        _run_stages(out, journal, opts, detail, health=health, pulumi_command=pulumi_command, env=env)
        clear_proposal(out)  # acted on: what is left of it, the journal holds
        rest = "" if complete else "; capped (--max-changes / --max-cut-pct), the next run continues"
        return Outcome(APPLIED, f"applied {head}{rest}" + _log_unused(p), d, shown, p.unreliable, moves)


def _log_unused(p: "Proposal") -> str:
    """The outcome's clause on what the demand log changed nothing for (a history too short, a model not
    in it, a log model no spec model has): said in the outcome, as it was only in replan.log and a run
    that planned the declared demand read 'nothing differs' (replan audit Q1, Q2)."""
    return f"; demand log: {'; '.join(p.log_unused)}" if p.log_unused else ""


@dataclass
class Proposal:
    """The new plan against what runs, and the decision about it."""

    plan: Plan
    running: list[Allocation]
    running_dicts: list[dict]  # as state.json (or the running plan.json) records them: the journal's copy
    decision: Decision
    unreliable: list[str]  # forecasts too wrong to drive cuts
    log_unused: list[str] = field(default_factory=list)  # models the demand log changed nothing for, and why


def _propose(spec_path: Path, out: Path, opts: ReplanOptions, detail, *, pulumi_command, env) -> Proposal:
    """Today's feeds and caps, the observed demand, what runs by the clouds' account, the plan made
    against it, and the decision (:func:`hetinfra.replan.diff.decide`)."""
    from hetinfra.plan.feeds import load_caps, load_feeds
    from hetinfra.plan.pipeline import plan_document
    from hetinfra.plan.plan_json import for_out
    from hetinfra.plan.planner import running_allocations

    snapshot, feed_warnings = load_feeds(opts.feeds, opts.strict_feeds, opts.max_age_h)
    caps, cap_warnings = load_caps(opts.caps_file, opts.availability, snapshot, spec_path)
    for w in list(feed_warnings) + cap_warnings:
        detail(f"feeds: {w}")
    running_plan = _running_plan(out)
    override, demand_triggers, unreliable, unused = (_observed_spec(spec_path, opts.demand_log, detail, opts,
                                                                    _declared_origins(running_plan))
                                                     if opts.demand_log else (None, [], [], []))
    running_dicts, lost, live_caps = _live(out, running_allocations(out), opts, detail,
                                           pulumi_command=pulumi_command, env=env)
    running = [allocation_of(a) for a in running_dicts]
    for k, n in live_caps.items():  # the tighter cap wins
        caps[k] = min(n, caps.get(k, n))
    result, plan = plan_document(spec_path, with_baselines=False, snapshot=snapshot, state=out,
                                 spec_override=override, extra_caps=caps)
    plan = for_out(plan, spec_path, out)  # inputs.spec_path relative to OUT, as `plan --out OUT` writes it
    if not opts.demand_log:  # the spec edited since the running plan: name what moved (replan audit Q4)
        demand_triggers = spec_demand_changes(running_plan, plan)
    dropped = dropped_units(running, result)
    d = decide(running, plan, result.inputs.snapshot.offers, result.inputs.caps,
               min_savings_pct=opts.min_savings_pct, min_savings_usd_h=opts.min_savings_usd_h,
               demand_notes=demand_triggers, forced_notes=lost + dropped)
    if d.kind == FORCED and d.costlier and not dropped:
        from hetinfra.plan.still_meets import running_meets  # forced by cost alone: is it needed?

        meets = running_meets(running_plan, plan, result.inputs.spec, spec_path, running)
        d = held_as_met(d, meets) if meets else d
    return Proposal(plan, running, running_dicts, d, unreliable, unused)


def _resume(out: Path, journal: Journal, opts: ReplanOptions, detail, *, health, pulumi_command, env) -> Outcome:
    """A replan that stopped half-way: reported, or (``--apply``) completed before anything else."""
    what = f"a replan started {journal.doc.started_at} stopped half-way ({journal.doc.error or 'killed'})"
    if not opts.apply:
        detail(what)
        return Outcome(PROPOSED, f"{what}; run with --apply to complete it")
    detail(f"{what}; completing it")
    _run_stages(out, journal, opts, detail, health=health, pulumi_command=pulumi_command, env=env)
    return Outcome(APPLIED, "completed the interrupted replan: "
                   + _fleet(Plan.parse(journal.doc.new_plan, journal.path)))


def _this_run(running: list[Allocation], new_plan: Plan, opts: ReplanOptions,
              detail, hold_cuts: bool = False) -> tuple[list, bool, bool]:
    """The stages this run applies (``--max-changes``, then the capacity-cut cap unless ``--force``),
    whether they reach the new plan, whether the cut was capped; the dry run shows the same.
    ``hold_cuts`` (a forecast too wrong to act on, even with ``--force``): no running GPU is removed."""
    stages, complete = stage_counts(running, new_plan, opts.max_changes)
    now = {a.unit: a.count for a in running if a.count}
    same = all({u: n for u, n in c.items() if n} == now for _, c in stages)
    if same and held_changes(running, new_plan.allocations):
        # same replicas (no stage, or --max-changes' no-op break), other adapters: one stage applies the
        # new records (a stage's plan takes the new plan's allocations), which restarts those units'
        # engines with the new --lora-modules, and waits for their health
        stages = [(UPDATE, {a.unit: a.count for a in running})]
    capped = False
    if hold_cuts or not opts.force:
        stages, capped, line = cap_cut(stages, running, new_plan, 0.0 if hold_cuts else opts.max_cut,
                                       "a forecast's backtest error is over --max-forecast-error-pct" if hold_cuts else None)
        if line:
            detail(line)
    detail("this run " + ("applies:" if opts.apply else "would apply:"))
    for line in render_stages(stages, running):
        detail(f"  {line}")
    return stages, complete and not capped, capped


def _fleet(plan: Plan) -> str:
    return f"{sum(a.instances for a in plan.allocations)} instance(s), ${plan.cost_usd_per_hour:.2f}/h"

