"""Verification's simulator: every decision judged on independent replications with a stated
confidence, adaptively, and held under the ceilings that measurement and physics set
(docs/verification.md, "Replications and a stated confidence").

One call judges a simulation view (``hetinfra.plan.plan_json.simulation_view``, or a copy the trim
or the over-provisioning search edited) for one purpose's seeds (``hetinfra.sim.replications.
seeds_for``: "decide" for the rounds, the trim and the sustained-load search; "confirm" for the final
plan, seeds no decision saw):

1. **screen**: the first seed alone. A model that misses there (or whose units are not stable) is
   clearly out: it is ``missed`` on that one replication, and no more are run for it. Rejecting on
   one replication errs on the safe side (a removal not taken, a regime derated).
   In the search's judgements (``early``: the "decide" seeds; never the confirmation's), a model
   that is clearly IN there is met on that one replication: the one-sided CONFIDENCE batch-means
   bound (``hetinfra.sim.batches``: the run's measured requests cut into up to ten batches in
   arrival order) of every statistic, of the model and of each of its units, within ACCEPT_BELOW of
   the objective, stable, and no unit's KV cache filled or preempted. Most of a fleet is that far
   inside; the second replication it ran before only confirmed it. An error here errs towards a
   cheaper plan, which the confirmation on fresh seeds judges on replications.
2. the other models run up to START replications, and are judged together
   (``hetinfra.sim.replications.judge``: a one-sided ``CONFIDENCE`` bound on each statistic);
3. while a model is ``undecided`` (its bound straddles the objective) and has fewer than MAX
   replications, STEP more seeds run for the undecided models only. Undecided after MAX is not met.
   The confirmation also keeps running a model that meets while its plan is under pressure (a
   KV cache at least KV_NEAR full, or preempting, or a replica's running batch at SEATS_NEAR of its
   max_num_seqs, in a replication of either judge: ``pressure``; or an objective with an attainment
   target, or arrivals burstier than Poisson, whose misses come with a run's rare burst:
   hetinfra.plan.kv_pressure.burst_pressed),
   up to MAX_PRESSED (under bursty arrivals on to MAX_BURST_PRESSED while its bound is within BURST_EDGE
   of its objective: Replicated.beyond_pressed), and judges it at PRESSED_CONFIDENCE
   (hetinfra.plan.kv_pressure: a burst's heavy upper tail, which a normal bound at CONFIDENCE underrates);
4. a model the confirmation met under that pressure is judged on its KV thrashing over its runs
   (hetinfra.plan.kv_pressure.thrashing), and those it leaves met are probed
   (hetinfra.plan.cliff): run on their first CLIFF_SEEDS seeds at CLIFF_MARGIN more load, not met
   where they collapse there; those still met with a lumpy class (one request of it holds LUMPY_SHARE of a
   replica's KV cache or more) are counted (hetinfra.plan.lumpy): run on LUMPY_RUNS more seeds at the
   promised load, not met where more than LUMPY_ALLOWED of them miss.

The confirmation's verdicts are evidence the search may not ignore: a model plan it saw miss is
missed in every later judgement of the search (:meth:`Replicated.veto`).

A model's requests depend on its own demand and routing only (``hetinfra.sim.plan_sim``), so running
the undecided models alone gives them exactly what a run of the whole plan gives, and the per-unit
memo (its keys hold the seed) serves every replication again to the trim.

Then the ceilings (``hetinfra.plan.ceiling``): a unit loaded past its measured interval or its
roofline misses whatever the simulation says.
"""

from __future__ import annotations

from dataclasses import replace

from hetinfra.document.simulation import SimPlan
from hetinfra.plan.budget import current
from hetinfra.plan.ceiling import Ceilings
from hetinfra.plan.cliff import CLIFF_CUT, CLIFF_SEEDS, probe, stressed
from hetinfra.plan.kv_pressure import (BURST_EDGE, KV_NEAR, MAX_PRESSED, PRESSED_CONFIDENCE, burst_pressed, bursty,
                                       kv_filled, most_pressed, thrashing, thrashing_first, under_pressure)
from hetinfra.plan.lumpy import LUMPY_CUT, count, count_seeds, lumpy, rare_heavy
from hetinfra.plan.parts import joined, part_of, reduced
from hetinfra.plan.replication_method import EDGE, EDGE_LOOK, MAX, START, STEP, method
from hetinfra.plan.verdicts import (CONFIDENCE, CONFIRM_CONFIDENCE, clearly_in, clearly_out, cut, near_objective,
                                    not_met, only, screened, seeds_union)
from hetinfra.plan.verdict_keys import model_state, simulated_part

__all__ = ["Replicated", "CONFIDENCE", "START", "STEP", "MAX", "MAX_PRESSED", "EDGE", "EDGE_LOOK"]


#: what the work budget names when it stops a judgement's further replications (plan.json
#: work_budget.stopped): the models still open then are undecided, so not met
REPLICATIONS_CUT = "verification's replications (models still undecided counted as missed)"


class Replicated:
    """Judges simulation views on ``purpose``'s seeds (see the module docstring). ``memo`` is shared
    with the caller's other Replicated (one per purpose); ``last`` is the last judgement."""

    def __init__(self, spec, spec_path, config, purpose: str, margin: float, memo: dict, ceilings: Ceilings,
                 progress=None, start: int = START, pressed: bool = False, pressure: set | None = None,
                 early: bool = False, edge: bool = False):
        from hetinfra.sim.replications import seeds_for

        #: replications one judgement may run, and the size of a block of seeds (:meth:`fresh`)
        self.most = most_pressed(config.burst_cv) if pressed else MAX
        self.seeds = seeds_for(int(config.seed), purpose, self.most)
        # the confirmation's runs carry their batch means (its shares and attainments floor their spread with
        # them: hetinfra.sim.batches.run_spread); of the search's, only an early judge's screening run, which
        # accepts on them (verdicts.clearly_in): computing them on every run of the search made the independent
        # 32-model fleet's verification 1.10x slower in CPU (WorkloadConfig.batch_means None: at every seed)
        config = replace(config, batch_means=None if edge else (self.seeds[0],) if early else ())
        self.spec, self.path, self.config, self.margin = spec, spec_path, config, margin
        #: per model, the shortest run :meth:`resize` goes to (the confirmation: the first plan's need)
        self.floor: dict[str, int] = {}
        self.purpose, self.memo, self.ceilings, self.progress = purpose, memo, ceilings, progress
        self.start = start  # replications after the screen
        #: a model that meets but is under pressure (:meth:`under_pressure`) runs up to MAX_PRESSED, or on (the
        #: confirmation)
        self.pressed = pressed
        #: a model far inside its objective on the screening seed's batch means is met there (the search's)
        self.early = early
        #: a met model within EDGE of its objective runs on to EDGE_LOOK replications (the confirmation's)
        self.edge = edge
        #: the confidence of a calm model's bounds where it is not the judge's own (the confirmation's copy that
        #: gives a padded vetoed plan its second look: hetinfra.plan.alternative.ALTERNATIVE_CONFIDENCE)
        self.calm: float | None = None
        #: model states (:func:`model_state`) under pressure (hetinfra.plan.kv_pressure.under_pressure) in a replication
        #: of this judge or of another sharing the set (the search's runs of the final plan tell the confirmation)
        self.pressure = set() if pressure is None else pressure
        self.block = 0  # which block of ``most`` seeds of its purpose it judges on (:meth:`fresh`)
        #: per model, its own block where :meth:`fresh` gave it one (a model the confirmation vetoed)
        self.blocks: dict[str, int] = {}
        self.last_pass: list[str] = []
        self.vetoed: set[str] = set()  # model states a confirmation saw miss (:meth:`veto`)
        self.simulations = 0  # replications run (model-level work is in the memo's hands)
        #: per model, a run length longer than the judge's (:meth:`lengthen`)
        self.lengths: dict[str, int] = {}
        #: each model's judgement by :meth:`_verdict_key`, and the top-level keys of the last simulation run
        self._verdicts: dict[str, tuple[dict, list[dict]]] = {}
        self._head: dict = {}
        #: each lumpy count made, by what it depends on (:meth:`_count_lumpy`)
        self._counts: dict[str, dict] = {}

    def fresh(self, models=None) -> None:
        """Judge on a block of seeds of its purpose that no judgement has seen: every model from now on
        (``models`` None), or only ``models``, each on its next block. A model's requests depend on its
        own demand, units and routing only (hetinfra.sim.plan_sim), so a model whose judgement on
        these seeds steered no decision (the confirmation met it: nothing vetoed its plan) keeps its
        seeds, and the memo its verdict, while a vetoed one is judged on seeds its search never saw
        (which models: hetinfra.plan.verify._refreshed). Re-confirming every model after each veto
        took 2.9 s of the 12.1 s of benchmarks/bench_scale.py --shared's independent 32-model fleet."""
        if models is None:
            self.block = max([self.block, *self.blocks.values()]) + 1
            self.blocks = {}
            self.seeds = self._block_seeds(self.block)
            if self.early:  # the new screening seed's runs carry the batch means
                self.config = replace(self.config, batch_means=(self.seeds[0],))
            return
        for m in models:
            self.blocks[m] = self.blocks.get(m, self.block) + 1

    def seeds_of(self, model: str) -> list[int]:
        """The seeds ``model`` is judged on: its own block's (:meth:`fresh`), else the judge's."""
        b = self.block_of(model)
        return self.seeds if b == self.block else self._block_seeds(b)

    def block_of(self, model: str) -> int:
        """The block of seeds ``model`` is judged on: its own (:meth:`fresh`), else the judge's."""
        return self.blocks.get(model, self.block)

    def _block_seeds(self, block: int) -> list[int]:
        """Block ``block`` of ``most`` seeds of this judge's purpose."""
        from hetinfra.sim.replications import seeds_for

        return seeds_for(int(self.config.seed), self.purpose, self.most * (block + 1))[self.most * block:]

    def lengthen(self, requests: dict[str, int]) -> None:
        """Run each model of ``requests`` at its length from now on (hetinfra.plan.confirm.
        sized_confirmation), never shorter. The memo's keys hold the run length, so no earlier result
        is taken for a longer run."""
        self.lengths.update({m: int(n) for m, n in requests.items() if int(n) > self.length(m)})

    def resize(self, requests: dict[str, int]) -> None:
        """Run each model of ``requests`` at its length from now on, shorter or longer than before, never
        under its floor (:attr:`floor`: the first plan's need): the confirmation sizes each plan it
        confirms anew (hetinfra.plan.confirm.presized), so a plan the search left behind does not set
        the lengths of the next one. They were only ever lengthened: on bench_scale.py's independent
        fleet a vetoed plan's slow model took later confirmations to 100,000 requests, where the
        final plan needs 27,000."""
        self.lengths = {m: max(int(n), self.floor.get(m, 0)) for m, n in requests.items()}

    def under_pressure(self, view: dict, model: str) -> bool:
        """Whether ``model``'s plan in ``view`` was under pressure (KV or seats) in a replication of this judge or
        of another sharing its ``pressure`` (the search's runs of the same plan), or its objective has an
        attainment target or this judge's arrivals are burstier than Poisson
        (hetinfra.plan.kv_pressure.burst_pressed)."""
        return self._seen_pressure(view, model) or burst_pressed(view, model, self.config.burst_cv)

    def _seen_pressure(self, view: dict, model: str) -> bool:
        """Whether a replication (of this judge or one sharing ``pressure``) ran ``model``'s plan in ``view``
        under KV or seat pressure."""
        return bool(self.pressure) and model_state(view, model) in self.pressure

    def beyond_pressed(self, verdict: dict) -> bool:
        """Whether a pressed model judged ``verdict`` needs more than MAX_PRESSED runs: only under bursty
        arrivals, and only while its bound is within BURST_EDGE of its objective."""
        return bursty(self.config.burst_cv) and near_objective(verdict.get("ratio_bound"), self.margin, BURST_EDGE)

    def refreshes(self, view: dict, verdict: dict) -> bool:
        """Whether the model of ``verdict`` (the last confirmation's) is judged on a fresh block after a veto:
        missed, or under pressure (:meth:`under_pressure`); under bursty arrivals a model its spec alone
        presses (burst_pressed) only while near its objective (:meth:`beyond_pressed`): every model of
        a bursty fleet judged again on each veto ran a 48-model fleet out of its work budget."""
        model = verdict["model"]
        if not verdict["met"] or self._seen_pressure(view, model):
            return True
        return burst_pressed(view, model, self.config.burst_cv) and \
            (not bursty(self.config.burst_cv) or self.beyond_pressed(verdict))

    def length(self, model: str) -> int:
        """Requests per replication of ``model``: its own (:meth:`lengthen`), at least the judge's."""
        return max(self.lengths.get(model, 0), int(self.config.requests))

    @property
    def longest(self) -> int:
        """The longest run of any model (plan.json fidelity.requests)."""
        return max([int(self.config.requests), *self.lengths.values()])

    def first_replication(self, view: dict) -> dict:
        """The simulation of the whole ``view`` on this judge's first seed, as its judgements run it
        (the memo serves it after a judgement of ``view``)."""
        names = [m["name"] for m in view["models"] if m.get("rate_rps")]
        if not names:
            from pathlib import Path

            from hetinfra.sim.plan_sim import simulate_plan

            return simulate_plan(view, self.spec, Path(self.path), replace(self.config, seed=self.seeds[0]),
                                 memo=self.memo, detail=False)
        return self._run(view, names, slice(0, 1), {})[0]

    def __call__(self, view: dict) -> dict:
        judged = self.ceilings.apply(self._judge(view), view, self.config.load)
        vetoed = {m["model"] for m in judged["models"] if self.vetoed and model_state(view, m["model"]) in self.vetoed}
        if not vetoed:
            return judged
        models = [not_met(m, vetoed=True) if m["model"] in vetoed else m for m in judged["models"]]
        return {**judged, "models": models, "met": all(m["met"] for m in models)}

    def veto(self, view: dict, models) -> None:
        """Evidence the search may not ignore: ``models``' plans in ``view`` missed on seeds of another
        judge (the confirmation); from now on they miss here too, whatever these seeds say."""
        self.vetoed.update(model_state(view, m) for m in models)

    def _run(self, view: dict, models: list[str], picks: slice, parsed: dict, config=None) -> list[dict]:
        """``models`` of ``view`` simulated on their seeds ``picks`` (:meth:`seeds_of`: the same
        replications of each model's own block), each model at its own length (:meth:`length`): those
        of one length and block run together, and each replication's runs are joined; ``parsed``: this
        judgement's parse cache, per set of models kept (one judgement reads one unchanging view:
        validating each part once instead of at every step saves most of the validations of a fleet's
        judging); ``config``: the workload where it is not the judge's (the cliff probe's load)."""
        groups: dict[tuple, list[str]] = {}
        for m in models:
            groups.setdefault((self.length(m), tuple(self.seeds_of(m)[picks])), []).append(m)
        runs = [self._run_at(view, ms, list(seeds), parsed, n, config) for (n, seeds), ms in sorted(groups.items())]
        return runs[0] if len(runs) == 1 else [joined(view, [r[i] for r in runs]) for i in range(len(runs[0]))]

    def _run_at(self, view: dict, models: list[str], seeds: list[int], parsed: dict, requests: int,
                config=None, keep: bool = True) -> list[dict]:
        from hetinfra.sim.replications import simulate_replications

        every = [m["name"] for m in view["models"] if m.get("rate_rps")]
        part = view if set(models) >= set(every) else reduced(view, set(models))
        parse = parsed.setdefault(tuple(sorted(models)), {})
        whole = parsed.get(tuple(sorted(every)), {}).get(SimPlan)
        if part is not view and whole is not None and SimPlan not in parse:
            parse[SimPlan] = part_of(whole, set(models))
        ticks = self.progress.requests if self.progress is not None else None
        config = config or self.config
        config = config if requests == config.requests else replace(config, requests=requests)
        return simulate_replications(part, self.spec, self.path, config, seeds, memo=self.memo if keep else None,
                                     detail=False, ticks=ticks, parsed=parse)

    def _judge(self, view: dict) -> dict:
        names = [m["name"] for m in view["models"] if m.get("rate_rps")]
        if not names:
            return {"met": True, "models": [], "units": [], "seeds": [], "confidence": CONFIDENCE}
        keys = {n: self._verdict_key(view, n) for n in names}
        out = {n: self._verdicts[keys[n]] for n in names if keys[n] in self._verdicts}
        fresh = [n for n in names if n not in out]
        if fresh:
            self._head = self._fresh(view, fresh, out)
            self._verdicts.update({keys[n]: out[n] for n in fresh if not out[n][0].get("cut")})
        judged = [out[n] for n in names]
        self.simulations += max(m["replications"] for m, _ in judged)  # as many seeds as the longest ran
        return _composed(self._head, judged, method(self.config.burst_cv))

    def _verdict_key(self, view: dict, model: str, seeds: bool = True) -> str:
        """Everything of ``view`` that ``model``'s judgement here depends on (:func:`simulated_part`), with
        this judge's seeds and run length, and, for a judge that keeps pressed models open, whether
        the model's state is under pressure: a model's judgement depends on its own simulations only
        (its requests depend on its own demand, units and routing: hetinfra.sim.plan_sim), so a
        model the trim, a later round or the over-provisioning search did not touch is judged once.
        ``seeds`` False: the same without the seeds, the key of a lumpy count, which runs on seeds of its own
        (hetinfra.plan.lumpy.count_seeds): a model unchanged since its count, judged on another block after
        a veto of others, keeps it (recounted at each confirmation, the linked 32-model fleet's two lumpy
        models ran 480 more runs for the same plan, 1.24x its wall)."""
        import json

        c = self.config
        pressed = self.pressed and self.under_pressure(view, model)
        return json.dumps([simulated_part(view, model), self.seeds_of(model) if seeds else None, self.length(model),
                           c.load, c.burst_cv, getattr(c, "warmup_fraction", None), pressed], sort_keys=True, default=str)

    def _fresh(self, view: dict, names: list[str], out: dict) -> dict:
        """Judge ``names`` of ``view`` (the models no earlier judgement of theirs holds) into ``out``,
        those on one block of seeds (:meth:`seeds_of`) together: the module docstring's screen, then
        replications while undecided; the top-level keys of the first block's screen."""
        by_block: dict[int, list[str]] = {}
        for n in names:
            by_block.setdefault(self.block_of(n), []).append(n)
        parsed: dict = {}
        heads = [self._fresh_on_block(view, ms, out, parsed) for _b, ms in sorted(by_block.items())]
        return heads[0]

    def _fresh_on_block(self, view: dict, names: list[str], out: dict, parsed: dict) -> dict:
        """:meth:`_fresh` of ``names``, which share their seeds: the screen's simulation's top-level keys."""
        [first] = self._run(view, names, slice(0, 1), parsed)
        # the screen's pressure counts for every model, the ones it decides too: a model the search accepts
        # on its screening seed, KV cache 96% full at the plan's longest run, is one the confirmation must
        # run at that length (o13-phi-4 of bench_scale.py --mix other --seed 1 linked: confirmed on 2 runs
        # at its own 20,000 requests, it thrashed in 1 of 10 audit runs at the plan's 84,000)
        self.pressure.update(model_state(view, n) for n in names if under_pressure([first], n))
        out.update({m["model"]: screened(m, first) for m in first["models"] if clearly_out(m, first)})
        if self.early:
            out.update({m["model"]: got for m in first["models"] if m["model"] not in out
                        and (got := clearly_in(m, first, self.margin)) is not None})
        runs: dict[str, list[dict]] = {n: [first] for n in names if n not in out}
        ran, count, judged, every_pressed = dict(runs), self.start, False, set()  # ran: each model's runs, kept
        while runs:
            todo = sorted(runs)
            have = len(runs[todo[0]])
            if judged and not current().check(REPLICATIONS_CUT):
                out.update({n: cut(*out[n]) for n in todo})  # short of the replications the rule needs
                break
            for sim in self._run(view, todo, slice(have, count), parsed):
                for n in todo:
                    runs[n].append(sim)
            for n in todo:
                if under_pressure(runs[n], n):
                    self.pressure.add(model_state(view, n))
            pressed = {n for n in todo if self.pressed and self.under_pressure(view, n)}
            every_pressed |= pressed
            verdict = self._verdict(runs[todo[0]], todo, pressed)
            for m in verdict["models"]:
                near = self.edge and m["met"] and count < EDGE_LOOK and \
                    near_objective(m["ratio_bound"], self.margin, EDGE)
                open_ = m["decision"] == "undecided" or (m["model"] in pressed and m["met"]) or near
                out[m["model"]] = (m, [u for u in verdict["units"] if u["model"] == m["model"]])
                if not open_ or count >= self._most_runs(m, m["model"] in pressed):
                    del runs[m["model"]]
            # a pressed model's look at MAX_PRESSED runs decides whether it runs on (:meth:`beyond_pressed`)
            count, judged = min(count + STEP, self.most, MAX_PRESSED if count < MAX_PRESSED else self.most), True
        self._judge_pressed(view, sorted(n for n in every_pressed if out[n][0]["met"]), ran, out, parsed)
        if self.edge:  # the confirmation counts a met model with a rare heavy class too (hetinfra.plan.lumpy.rare_heavy)
            self._count_lumpy(view, sorted(n for n in ran if n not in every_pressed and out[n][0]["met"]), out, parsed,
                              rare_heavy)
        return {k: v for k, v in first.items() if k not in ("models", "units")}

    def _most_runs(self, verdict: dict, pressed: bool) -> int:
        """Replications a model with ``verdict`` may run: MAX, or pressed MAX_PRESSED, or under bursts
        MAX_BURST_PRESSED while its bound is near its objective (:meth:`beyond_pressed`)."""
        if not pressed:
            return MAX
        return self.most if self.beyond_pressed(verdict) else MAX_PRESSED

    def _judge_pressed(self, view: dict, names: list[str], ran: dict, out: dict, parsed: dict) -> None:
        """The checks of ``names``, models met under pressure, beyond their statistics: their KV
        thrashing over their replications ``ran`` (hetinfra.plan.kv_pressure.thrashing), then the cliff
        probe of those it leaves met (:meth:`_probe_cliffs`), then the lumpy count of those still met whose KV
        cache came KV_NEAR full (or preempted) in one of them (:meth:`_count_lumpy`): a cascade starts with a
        cache that fills, and a model pressed only by its spec (bursts, an attainment target) or by its seats
        whose cache stayed far from full has none to count (bench_scale.write_other(16, seed 10)'s fleet under
        burst_cv 2: o07-phi-4, its cache at most 35% full in its 13 runs, ran 60 count runs, all clean, and
        the plan took 1.48x the time)."""
        for n in names:
            record = thrashing(ran[n], n, PRESSED_CONFIDENCE)
            if record is not None and not record["met"]:
                out[n] = (not_met(out[n][0], thrashing=record), thrashing_first(out[n][1], record))
            elif record is not None:
                out[n] = ({**out[n][0], "thrashing": record}, out[n][1])
        self._probe_cliffs(view, [n for n in names if out[n][0]["met"]], out, parsed)
        self._count_lumpy(view, [n for n in names if out[n][0]["met"] and kv_filled(ran[n], n, KV_NEAR)], out, parsed)

    def _count_lumpy(self, view: dict, names: list[str], out: dict, parsed: dict, find=lumpy) -> None:
        """The lumpy count (hetinfra.plan.lumpy) of ``names``, models met under pressure: each with a lumpy class
        (``find``: or a rare heavy one, of models met without pressure) is run on its block's LUMPY_RUNS count
        seeds at the promised load, not met where more of them miss than LUMPY_ALLOWED. Its runs stay out of
        the memo: no other judgement runs those seeds."""
        where = {n: got for n in names if (got := find(view, n)) is not None}
        if not where or not current().check(LUMPY_CUT):
            return
        for n, at in where.items():
            key = self._verdict_key(view, n, seeds=False)
            if key not in self._counts:  # a model unchanged since its count (new seeds, another veto) keeps it
                self._counts[key] = count(at, n, count_seeds(int(self.config.seed), self.purpose, self.block_of(n)),
                                          self.config.load, lambda seeds, n=n: self._run_at(
                                              view, [n], seeds, parsed, self.length(n), keep=False))
                self.simulations += self._counts[key]["runs"]
            record = self._counts[key]
            out[n] = ({**out[n][0], "lumpy": record} if record["met"] else not_met(out[n][0], lumpy=record), out[n][1])

    def _probe_cliffs(self, view: dict, names: list[str], out: dict, parsed: dict) -> None:
        """The cliff probe (hetinfra.plan.cliff) of ``names``, models met under pressure: each run on its
        first CLIFF_SEEDS seeds at CLIFF_MARGIN more load; one that collapses there is not met, with
        the probe's units (the padding's order reads them: the unit that fell off first)."""
        if not names or not current().check(CLIFF_CUT):
            return
        config = stressed(self.config)
        runs = self._run(view, names, slice(0, CLIFF_SEEDS), parsed, config)
        self.simulations += len(runs)  # fidelity.replications.simulated counts the probe's runs too
        units = self._verdict(runs, names, set(names))["units"]
        for n in names:
            record = probe(out[n][0], runs, n, config.load, self.seeds_of(n)[:CLIFF_SEEDS])
            entry = not_met(out[n][0], cliff=record) if record["collapsed"] else {**out[n][0], "cliff": record}
            out[n] = (entry, [u for u in units if u["model"] == n] if record["collapsed"] else out[n][1])

    def _verdict(self, sims: list[dict], models: list[str], pressed: set[str]) -> dict:
        """``models`` judged on their replications ``sims`` (hetinfra.sim.replications.judge), those in
        ``pressed`` (the confirmation's models under pressure) at PRESSED_CONFIDENCE, the others at
        CONFIRM_CONFIDENCE in the confirmation (``edge``) and CONFIDENCE in the search: a model's entry and
        its units' depend on its own runs only, so each set is judged apart."""
        from hetinfra.sim.replications import judge

        calm = self.calm or (CONFIRM_CONFIDENCE if self.edge else CONFIDENCE)  # a model not under pressure
        sets = [(calm, [n for n in models if n not in pressed]), (max(PRESSED_CONFIDENCE, calm), sorted(pressed))]
        # the shares within the objective (hetinfra.sim.replications._share_bounds) judge the confirmation's
        # models at CONFIRM_CONFIDENCE, as `simulate --replications` does at its own; the search's judgements
        # stop where they stopped before
        shares = calm if self.edge else None
        verdicts = [judge([only(s, set(names)) for s in sims], level, self.margin, shares)
                    for level, names in sets if names]
        by_model = {m["model"]: m for v in verdicts for m in v["models"]}
        judged = [by_model[n] for n in models]
        return {**verdicts[0], "met": all(m["met"] for m in judged), "models": judged,
                "units": [u for v in verdicts for u in v["units"]]}


def _composed(first: dict, judged: list[tuple[dict, list[dict]]], how: str) -> dict:
    """One judgement of the whole view from each model's (entry, units), in the view's order; ``how``: its
    method (:func:`method`)."""
    models = [m for m, _ in judged]
    seeds = seeds_union(models)
    return {**{k: v for k, v in first.items() if k not in ("models", "units")}, "seeds": seeds,
            "confidence": CONFIDENCE, "method": how, "met": all(m["met"] for m in models),
            "models": models, "units": [u for _, us in judged for u in us]}
