"""The replications rule of hetinfra.plan.replicated in numbers (how many runs a judgement takes) and in
words, as plan.json's fidelity.replications.method states it (a plan verified under bursty arrivals gets
the burst clause)."""

from __future__ import annotations

from hetinfra.plan.cliff import CLIFF_JUMP, CLIFF_MARGIN, CLIFF_SEEDS
from hetinfra.plan.kv_pressure import (BURST_EDGE, KV_NEAR, MAX_BURST_PRESSED, MAX_PRESSED, PRESSED_CONFIDENCE,
                                       SEATS_NEAR, bursty)
from hetinfra.plan.lumpy import (HEAVY_INPUT, LUMPY_ALLOWED, LUMPY_LEVEL, LUMPY_RATE, LUMPY_RUNS, LUMPY_SHARE,
                                 RARE_REQUESTS)
from hetinfra.plan.verdicts import ACCEPT_BELOW, CONFIDENCE, CONFIRM_CONFIDENCE

__all__ = ["BURSTY", "EDGE", "EDGE_LOOK", "LUMPY", "MAX", "METHOD", "START", "STEP", "method"]

#: replications per judgement: START at first (the screening seed among them), STEP more at a time
#: for undecided models, at most MAX. Two give a Student-t prediction bound (one more run) of mean + 7.7 sd,
#: enough for a model far from its objective (most of a fleet: it stops there); four give mean + 2.6 sd,
#: seven mean + 2.1 sd.
START, STEP, MAX = 2, 2, 7
#: the confirmation stops early (after 2 or 4 replications) on a met model only when its bound is
#: EDGE inside its objective; nearer the edge it runs on to EDGE_LOOK. Each look at the replications
#: so far is one more chance for a model at the edge to pass by luck: by Monte Carlo (normal runs,
#: sd 1% of the objective), a model whose mean run misses (half its runs miss) passed the confirmation's
#: looks at 2, 4, 6 and 8 replications 3.4% of the time, one whose mean is 1 sd inside 22%; with the
#: edge rule 0.2% and 11%, at 0.2 more replications on average for a model far inside. The search's own
#: judgements keep stopping at the first met look (the confirmation guards their luck): a
#: 3-model spec's 8B model (L40S at 94% of its rate) was confirmed at 4 replications, p99 TPOT
#: 39.49-39.69 ms against 40, and missed on 4 of 11 audit seeds (39.16-40.88 ms)
EDGE, EDGE_LOOK = 0.02, 6

METHOD = (f"replications: screened on one seed (a model that misses there is missed; in the search's judgements, one "
          f"whose one-sided {CONFIDENCE:.0%} batch-means bound of every statistic, of the model and of each unit, is within "
          f"{ACCEPT_BELOW:g}x its objective with no KV cache filled is met there), then {START} to {MAX} "
          f"independent replications ({STEP} more at a time while a model is undecided), and in the confirmation up to "
          f"{MAX_PRESSED}, at the plan's longest run, while a unit's KV cache was {KV_NEAR:.0%} full or preempted or a "
          f"replica ran {SEATS_NEAR:.0%} of its max_num_seqs sequences, or where the objective has an attainment "
          f"target, and at "
          f"least {EDGE_LOOK} while its bound is within {EDGE:.0%} of its objective; a model meets when the one-sided {CONFIDENCE:.0%} prediction bound (on one more run; never inside the worst run; {CONFIRM_CONFIDENCE:.1%} in the confirmation, {PRESSED_CONFIDENCE:.0%} there for a model under that pressure) of each statistic is "
          "inside its objective (in the confirmation, for a percentile, also the lower 97.5% prediction bound on the share of "
          "a run's requests within the objective, its spread never below what the runs' batch means imply, at least the "
          "percentile's level) and its units are stable in every replication, no unit is loaded past its measured "
          "interval or roofline, and no confirmation saw that model's plan miss; a model the confirmation met under "
          f"that pressure is not met where the {PRESSED_CONFIDENCE:.0%} prediction bound on a unit's KV re-preemption "
          f"over its runs passes the stability rule's limit, and is run again on its first {CLIFF_SEEDS} seeds at "
          f"{CLIFF_MARGIN:.0%} more load, not met where a run there misses a statistic by more than {CLIFF_JUMP:g}x "
          "that statistic's bound (a cliff that close to its promise)")
#: the method's words where planning.verify.burst_cv > 1 (hetinfra.plan.kv_pressure.burst_pressed); none for Poisson
BURSTY = (f"; arrivals burstier than Poisson (burst_cv > 1), as these, press every model ({MAX_PRESSED} runs at the "
          f"plan's longest, {PRESSED_CONFIDENCE:.0%}), which runs on to {MAX_BURST_PRESSED}, and on a fresh block after a "
          f"veto, while its bound is within {BURST_EDGE:.0%} of its objective")


#: the method's words where the confirmation counted a lumpy model (hetinfra.plan.lumpy); none elsewhere
LUMPY = (f"; a model met under that pressure one request of whose classes holds {LUMPY_SHARE:.0%} of a replica's KV "
         f"cache or more, or met with a rare heavy class (within its percentile's tail, at most {RARE_REQUESTS} a run, "
         f"prompts {HEAVY_INPUT:g}x the others'), is run on up to {LUMPY_RUNS} more seeds at the promised load, not met where more than "
         f"{LUMPY_ALLOWED} of them miss (what runs missing at {LUMPY_RATE:.0%} show under {LUMPY_LEVEL:.0%} of the time)")


def method(burst_cv: float, lumpy: bool = False) -> str:
    """fidelity.replications.method of a plan verified at ``burst_cv``: METHOD, BURSTY where it is bursty, and
    LUMPY where the confirmation counted a lumpy model (``lumpy``)."""
    return METHOD + (BURSTY if bursty(burst_cv) else "") + (LUMPY if lumpy else "")
