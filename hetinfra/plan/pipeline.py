"""``hetinfra plan``, stage by stage (docs/internals/plan-stage.md):

    resolve -> templates -> solve -> verify -> assemble

* resolve and templates: :func:`hetinfra.plan.staging.prepare` (the spec's inputs, every unit with
  its estimated rates, what runs now, the confidence level's starting factors);
* solve: :func:`hetinfra.plan.planner.solve_units` (prune, the ILP, infeasibility diagnosis);
* verify: :func:`hetinfra.plan.verify.verify` re-solves (through the one callable this module
  binds) and re-simulates a simulation view of each round's solution, then trims;
* assemble: :func:`assemble` builds plan.json once, from the final solution, with the baselines;
  :func:`hetinfra.plan.fidelity.record` adds what verification found (a typed ``Fidelity``), and the
  document is returned as the :class:`hetinfra.document.Plan` whose dump plan.json is.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from hetinfra.plan.planner import PlanResult, compared_with, pool_at, prepare, single_gpu_baselines, solve_units
from hetinfra.plan.plan_warnings import idle_warnings, statistic_warnings, unmet_warnings
from hetinfra.plan.tail import best_effort_warnings, strict_units, uses_best_effort

if TYPE_CHECKING:
    from hetinfra.document import Plan

#: what the work budget names when it cuts or skips the single-GPU baselines (plan.json work_budget.stopped)
BASELINES = "the single-GPU baselines"
UNVERIFIED_WARNING = ("the plan was not verified by simulation: its latency objectives are estimated, not checked "
                      "(run `hetinfra simulate` on it)")


#: the most vLLM engines (Template.engines_per_replica x replicas) a plan's first solve may run for
#: verification to simulate it: every engine of every unit is simulated in every replication, so time
#: grows with the engines (stop 57, services/chat.yaml at 2,000 req/s: 370 engines first, 15 s; at 5,000
#: req/s: 922 engines, 2 min 16 s; at 20,000 req/s, 4,465 engines, it ran out of memory before stop 58
#: bounded the simulation memo, hetinfra.sim.memo). A larger plan is written unverified and says why
#: (plan.json ``fidelity.reason``, a warning) rather than spend the work budget on a first judgement
MAX_VERIFIED_ENGINES = 1_000
TOO_LARGE_TO_VERIFY = ("the plan's first solve runs {engines:,} vLLM engines, more than verification simulates "
                       "({limit:,}): it was not verified (split the service into several specs; `hetinfra simulate` "
                       "runs a plan of up to {most:,} engines)")


def plan_document(spec_path: str | Path, *, verify: bool = True, strict: bool = False, with_baselines: bool = True,
                  progress=None, verify_baselines: bool = False, **prepare_kwargs) -> tuple[PlanResult, "Plan"]:
    """Plan ``spec_path`` (``prepare_kwargs``: see :func:`hetinfra.plan.staging.prepare`), verify it by
    simulation unless ``verify`` is false or the spec turns it off, and return the result and its
    plan.json (with ``fidelity``). ``strict``: a plan that still misses after the last round raises
    InfeasibleError (exit 3) instead of carrying a warning. ``progress``: a
    :class:`hetinfra.plan.progress.Progress` (None: silent). ``verify_baselines``: each baseline row
    planned on its GPU type alone and verified (hetinfra.plan.verified_baselines)."""
    from hetinfra.plan.budget import Budget, opened
    from hetinfra.solver.memo import clear

    if verify and (strict or verify_baselines):
        needs_verification(spec_path, prepare_kwargs, "--verify-baselines" if verify_baselines else "--strict-verify")
    clear()  # this command's solves remember only each other: the plan never depends on what ran before it
    with opened(Budget(None)) as budget:
        pr, doc = _planned(spec_path, budget, verify, strict, with_baselines, progress, prepare_kwargs)
    doc = reported(doc, budget)
    if verify_baselines and doc.baselines:
        from hetinfra.plan.verified_baselines import verified_baselines

        if progress is not None:
            progress.stage("verified baselines")
        doc = verified_baselines(doc, pr.inputs.spec, spec_path, prepare_kwargs, plan_document)
    return pr, doc


def needs_verification(spec_path, prepare_kwargs: dict, flag: str) -> None:
    """Exit 2 where ``flag`` (`plan --verify-baselines` or `--strict-verify`, which judge the plan by its
    verification) meets a spec whose ``planning.verify.enabled`` is false, at that key's line: the flag
    contradicts the spec as it does ``--no-verify`` (a verified baseline row read "missed in its own
    verification" for a plan never simulated; --strict-verify passed a plan nobody checked)."""
    from hetinfra.errors import InvalidInputError
    from hetinfra.spec.load import load_spec

    spec, _, locate = load_spec(Path(spec_path))
    spec = prepare_kwargs.get("spec_override") or spec
    if not spec.planning.verify.enabled:
        raise InvalidInputError(f"{locate('planning', 'verify', 'enabled')}: planning.verify.enabled is false, "
                                f"which {flag} contradicts (it judges the plan by its verification)",
                                hint=f"set planning.verify.enabled: true, or drop {flag}")


def _planned(spec_path, budget, verify: bool, strict: bool, with_baselines: bool, progress,
             prepare_kwargs: dict) -> tuple[PlanResult, "Plan"]:
    """:func:`plan_document`'s stages under ``budget`` (its limit set once the spec is read)."""
    from hetinfra.plan import verify as verification

    staged = prepare(spec_path, **prepare_kwargs)
    spec = staged.inputs.spec
    budget.time_limit_s = spec.planning.time_limit_s
    budget.check("the templates")  # built whole (the plan needs them); recorded if they spent the budget
    if progress is not None:
        progress.budget(budget)
    verifying = verify and spec.planning.verify.enabled
    overrides = verification.verification_overrides(spec) if verifying else None

    def solve_over(units: list, derate: dict[str, float] | None, start: dict[str, int] | None = None) -> PlanResult:
        return solve_units(staged.inputs, units, staged.running, with_baselines=False, derate=derate,
                           template_cache=staged.template_cache, overrides=overrides, start=start)

    def resolve(derate: dict[str, float] | None, start: dict[str, int] | None = None) -> PlanResult:
        return solve_over(staged.units, derate, start)

    if not verifying:
        from hetinfra.plan.fidelity import unverified

        pr, doc = _unverified(staged, resolve, with_baselines and budget.check(BASELINES))
        return pr, doc.model_copy(update={
            "fidelity": unverified("plan --no-verify" if not verify else "planning.verify.enabled is false"),
            "warnings": [*doc.warnings, UNVERIFIED_WARNING]})
    return _verified(staged, solve_over, resolve, budget, with_baselines, strict, progress)


def _verified(staged, solve_over, resolve, budget, with_baselines: bool, strict: bool,
              progress) -> tuple[PlanResult, "Plan"]:
    """The plan verified by simulation (hetinfra.plan.verify), or the all-adapters one where that is
    cheaper, with its single-GPU baselines and what verification found (plan.json ``fidelity``)."""
    from hetinfra.plan import verify as verification
    from hetinfra.plan.held_everywhere import cheaper_of

    spec = staged.inputs.spec
    pr = resolve(staged.derate)
    engines = sum(count * pr.units[uid].template.engines_per_replica for uid, count in pr.result.n.items())
    if engines > MAX_VERIFIED_ENGINES:
        return _too_large(staged, pr, resolve, budget, with_baselines, engines)
    with ThreadPoolExecutor(1, thread_name_prefix="hetinfra-baselines") as side:
        baselines = _Baselines(side, budget, with_baselines, takes_turns(spec))
        # the over-provisioning search runs on the plan kept, not on a LoRA candidate left aside
        outcome = verification.verify(pr, resolve, progress, baselines.on_rounds, measured=False)
        chosen, compared = cheaper_of(outcome, spec, staged.units, staged.derate, solve_over=solve_over,
                            verify_over=lambda units, first: verification.verify(
                                first, lambda d, s=None: solve_over(units, d, s), progress, measured=False))
        if chosen is not outcome:  # the all-adapters plan is cheaper (hetinfra.plan.held_everywhere)
            outcome = chosen
            baselines.forget()
        at_bounds = _at_the_bounds(outcome, staged, solve_over, progress)
        dropped = None
        if at_bounds is not outcome:  # every class at the bounds meets for less (hetinfra.plan.tail)
            outcome, dropped = at_bounds, outcome
            baselines.forget()
        verification.measure(outcome)
        if progress is not None:
            progress.stage("baselines" if with_baselines else "assemble")
        found, skipped = baselines.found()
    from hetinfra.plan.fidelity import record  # typed sections: loaded beside the solve (hetinfra.cli.preload)

    doc = record(assemble(outcome.pr, with_baselines and not skipped, found), outcome, strict)
    if dropped is not None:
        doc = doc.model_copy(update={"warnings": [*doc.warnings, _dropped_words(dropped)]})
    if compared is not None:  # LoRA: the adapter placements compared (hetinfra.plan.held_everywhere)
        from hetinfra.document.adapters import AdapterCandidates

        doc = doc.model_copy(update={"adapter_candidates": AdapterCandidates.model_validate(compared)})
    return outcome.pr, doc


def _dropped_words(dropped) -> str:
    """The warning that a plan with best-effort classes was verified and left for the plan at the bounds: a plan
    twice its p99 twin's cost said nothing of it (held-out h158, heldout66 F4)."""
    cost = dropped.pr.result.cost(dropped.pr.problem)
    return (f"a plan serving some classes best effort was verified too (${cost:.2f}/h, "
            f"{'met' if dropped.met else 'not met'}); the plan with every class at its bounds is kept, as it meets"
            + (" for less" if dropped.met else ""))


def _at_the_bounds(outcome, staged, solve_over, progress):
    """``outcome`` (verified, with best-effort classes: hetinfra.plan.tail), or the same spec verified with
    every class at the bounds where that meets for less. A best-effort class's long prefills slow the
    requests sharing its replicas, and the rounds that derate them do not go back to the layouts that
    serve it at the bounds: held-out h142 (three rare classes at p90, benchmarks/results/heldout65b) planned
    $123.90/h with best effort and $98.96/h without. Verified only where the plan has best-effort classes."""
    from hetinfra.errors import InfeasibleError
    from hetinfra.plan import verify as verification

    pool = strict_units(staged.units)
    if pool is None or not uses_best_effort(outcome.pr):
        return outcome
    try:
        other = verification.verify(solve_over(pool, staged.derate), lambda d, s=None: solve_over(pool, d, s), progress,
                                    measured=False)
    except InfeasibleError:
        return outcome

    def cost(o) -> float:
        return o.pr.result.cost(o.pr.problem)

    return other if other.met and (not outcome.met or cost(other) < cost(outcome) - 1e-9) else outcome


class _Baselines:
    """The single-GPU baselines of verification's plan, solved beside the trim's simulations on ``side``
    once the rounds end (:meth:`on_rounds`): the plan's factors and problem are final then (the trim
    drops replicas, the over-provisioning scales demand). A veto sends the search back and the rounds end
    again: the earlier plan's baselines are stopped (queued, cancelled; running, at their next GPU type).
    Run to the end, a linked 32-model fleet's two vetoes solved three sets of baselines, 14 s of CPU
    beside the search. Where Pyomo's solves take turns (``turns``: takes_turns) they wait for the end
    instead: beside verification's re-solves (after a veto, the all-adapters candidate) they would hold
    the lock and cut them (as _unverified does)."""

    def __init__(self, side: ThreadPoolExecutor, budget, wanted: bool, turns: bool):
        self.side, self.budget, self.wanted, self.turns = side, budget, wanted, turns
        self.started: Future | None = None
        self.skipped = False  # the budget was spent when the baselines would have started
        self.rounds_plan: PlanResult | None = None  # turns: the plan whose baselines run at the end
        self.stale = threading.Event()

    def on_rounds(self, final: PlanResult) -> None:
        import contextvars

        if self.turns:
            self.rounds_plan = final
            return
        if self.started is not None:
            self.started.cancel()
            self.stale.set()
        self.stale = threading.Event()
        self.skipped = self.wanted and not self.budget.check(BASELINES)
        if self.wanted and not self.skipped:  # in this context: the command's budget
            self.started = self.side.submit(contextvars.copy_context().run, baselines_of, final, self.stale.is_set)

    def forget(self) -> None:
        """The rounds' plan was not kept (the all-adapters one was): assemble solves the kept plan's."""
        self.started, self.rounds_plan = None, None

    def found(self) -> tuple[tuple[list, float | None] | None, bool]:
        """(the baselines found, or None for assemble to solve them; whether the budget skipped them)."""
        if not self.turns:
            return (self.started.result() if self.started is not None else None), self.skipped
        self.skipped = self.wanted and not self.budget.check(BASELINES)
        if self.rounds_plan is None or not self.wanted or self.skipped:
            return None, self.skipped
        return baselines_of(self.rounds_plan), self.skipped


def _too_large(staged, first: PlanResult, resolve, budget, with_baselines: bool,
               engines: int) -> tuple[PlanResult, "Plan"]:
    """The plan unverified, as ``--no-verify`` writes it, where its first solve runs more than
    MAX_VERIFIED_ENGINES ``engines``: ``fidelity.reason`` and a warning say so."""
    from hetinfra.facts import MAX_SIMULATED_ENGINES
    from hetinfra.plan.fidelity import unverified

    why = TOO_LARGE_TO_VERIFY.format(engines=engines, limit=MAX_VERIFIED_ENGINES, most=MAX_SIMULATED_ENGINES)
    pr, doc = _unverified(staged, resolve, with_baselines and budget.check(BASELINES), solved=first)
    return pr, doc.model_copy(update={"fidelity": unverified(why), "warnings": [*doc.warnings, why]})


def _unverified(staged, resolve, with_baselines: bool, solved: PlanResult | None = None) -> tuple[PlanResult, "Plan"]:
    """The plan without verification, its single-GPU baselines solved beside its solve on a side thread:
    they price the pool at the starting factors, which an unverified plan keeps, so they need nothing
    of its solve (on the 32-model linked fleet the two took 1.1 cores one after the other). Each
    thread's solves remember only their own (``solver.memo``): the same blocks as in turn. ``solved``:
    the plan at the starting factors where the caller has solved it already (:func:`_too_large`).

    Where the solves go through Pyomo (:func:`takes_turns`) they run one at a time, so the baselines
    start after the plan's solve, in what it left of the work budget: beside it they took Pyomo's lock
    first and the plan's solve waited for them (a spec with 30 LoRA adapters: its MIP began after the
    baselines had spent the budget, and ran 598 s against planning.time_limit_s 300)."""
    import contextvars
    from functools import partial

    from hetinfra.plan.budget import current
    from hetinfra.plan.purchase import without_committed

    spec = staged.inputs.spec
    early = with_baselines and spec.planning.objective == "min_cost"  # compared_with's rule
    turns = takes_turns(spec)
    with ThreadPoolExecutor(1, thread_name_prefix="hetinfra-baselines") as side:
        start = partial(side.submit, contextvars.copy_context().run, single_gpu_baselines, staged.inputs,
                        pool_at(staged.inputs, staged.units, staged.running, staged.derate))
        started = start() if early and not turns else None
        pr = solved if solved is not None else resolve(staged.derate)
        skipped = early and turns and not current().check(BASELINES)  # recorded there: plan.json work_budget
        if early and turns and not skipped:
            started = start()
        found = (started.result(), without_committed(pr)) if started is not None else None
    return pr, assemble(pr, with_baselines and not skipped, found)


def takes_turns(spec) -> bool:
    """Whether the spec's solves go through Pyomo (``solver.solve.solve``: LoRA adapters, or a
    planning.solver other than highs), which runs one solve at a time in a process
    (``solver.highs_quiet.FD_CAPTURE``): solves on two threads would only wait for each other."""
    return bool(spec.adapters) or spec.planning.solver != "highs"


def reported(doc: "Plan", budget) -> "Plan":
    """``doc`` saying what the work budget's safety stop cut, if anything: plan.json ``work_budget``, a
    warning (the summary prints it), and ``solver.safety_stop`` where a solve was cut."""
    from hetinfra.document.sections import WorkBudget

    warning = budget.warning()
    if warning is None:
        return doc
    update = {"work_budget": WorkBudget(time_limit_s=budget.time_limit_s, stopped=list(budget.stopped)),
              "warnings": [*doc.warnings, warning]}
    if "a solve" in budget.stopped or BASELINES in budget.stopped:
        update["solver"] = doc.solver.model_copy(update={"safety_stop": True})
    return doc.model_copy(update=update)


def baselines_of(pr: PlanResult, stale=None) -> tuple[list, float | None]:
    """The single-GPU-type baselines of ``pr`` (min_cost; over its units at its factors) and its cost
    without committed terms: ``planner.compared_with`` over the pool at the plan's factors (``stale``:
    planner.baselines')."""
    return compared_with(pr, pool_at(pr.inputs, pr.all_units, pr.running, pr.derate), stale)


def assemble(pr: PlanResult, with_baselines: bool, found: tuple[list, float | None] | None = None) -> "Plan":
    """plan.json of the final plan: the single-GPU-type baselines (``found``, else
    :func:`baselines_of` here), then the document (hetinfra.plan.plan_json) and the
    profile-statistic warnings."""
    from hetinfra.plan.plan_json import build_plan_json

    if with_baselines:
        pr.baselines, pr.flexible_cost = found if found is not None else baselines_of(pr)
    doc = build_plan_json(pr)
    return doc.model_copy(update={"warnings": [*doc.warnings, *unmet_warnings(pr, doc), *statistic_warnings(pr),
                                               *idle_warnings(pr), *best_effort_warnings(pr)]})
