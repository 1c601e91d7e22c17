"""The spec's ``planning`` section: the solver's objective, routing, work limits and layouts, and
``planning.verify``, how the plan verifies itself by simulation. Importable from
:mod:`hetinfra.spec.models` too."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

# the simulator's load and burst_cv domains live in hetinfra.facts (the CLI's flags read them without
# the spec); spec/planning names them for the fields below and for hetinfra.sim.workload
from hetinfra.facts import MAX_BURST_CV, MAX_LOAD, MIN_BURST_CV, MIN_LOAD  # noqa: F401
from hetinfra.spec.base import Strict
from hetinfra.spec.units import MAX_SCALE


class VerifySpec(Strict):
    """How `hetinfra plan` verifies its own solution: a discrete-event simulation of every replica
    (vLLM's scheduler) at ``load`` x the declared demand; units of a model that misses its SLO are
    derated and the plan re-solved, at most ``max_rounds`` times."""

    enabled: bool = Field(True, description="Simulate the plan and re-plan until it meets every objective "
                                            "(`hetinfra plan --no-verify` turns it off for one run).")
    load: float | None = Field(None, ge=MIN_LOAD, le=10, description="The ONE load, a multiple of the declared demand, "
                                                             "at which the plan must keep every objective in "
                                                             "simulation (and be minimal). Unset: the larger "
                                                             "of 1 + planning.headroom and 1.2. The ILP sizes for this load; no "
                                                             "other margin applies (docs/verification.md).")
    burst_cv: float = Field(1.0, ge=MIN_BURST_CV, le=MAX_BURST_CV,
                            description="Coefficient of variation of inter-arrival times (gamma): 1 = Poisson, "
                                        "> 1 = burstier traffic, < 1 = more even (0.01 to 10).")
    requests: int = Field(20000, ge=1000, le=1_000_000, description="Requests simulated per model and round (the first 10% warm up).")
    max_rounds: int = Field(6, ge=1, le=20, description="Re-plans at most; a model still missing then gets "
                                                        "replicas, one at a time, until it meets on both seed "
                                                        "sets (at most 4: the padding, docs/verification.md); "
                                                        "one still missing after that is reported (a warning, "
                                                        "or exit 3 with --strict-verify).")
    settle_rounds: int = Field(6, ge=0, le=20, description="Where max_rounds run out and no round's plan met: "
                                                           "re-plans at most that only derate what missed (no "
                                                           "credit rises) until one meets, before the padding; "
                                                           "0: none (docs/verification.md).")
    seed: int = Field(0, ge=0, description="Random seed of the simulation (same seed, same plan).")
    margin: float = Field(0.0, ge=0, lt=0.5, description="A stated, optional tightening: a model passes only when "
                                                         "its simulated statistics are this fraction under the "
                                                         "bounds (0.05: p99 TPOT <= 95% of tpot_ms). Default 0: "
                                                         "the bounds as written; run-to-run noise is handled by "
                                                         "more `requests`, not by a factor.")


class PlanningSpec(Strict):
    """Solver settings."""

    confidence: Literal["safe", "expected"] = Field(
        "safe", description="safe: templates whose rates are extrapolated (no calibration data covers them) are "
                            "planned at the low end of their confidence interval; expected: at the middle. "
                            "Verification may then credit them up to the top (docs/verification.md).")

    estimator: Literal["builtin", "aiconfigurator", "auto"] = Field(
        "builtin", description="Where estimated rates take their step times: builtin (the shipped constants, fitted "
                               "on public kernel and end-to-end measurements); aiconfigurator (NVIDIA aiconfigurator's "
                               "measured kernels for each layout its database covers; needs pip install "
                               "'hetinfra[aiconfigurator]'); auto (aiconfigurator where installed and covering the "
                               "layout, builtin elsewhere). docs/calibration.md.")

    objective: Literal["min_cost", "max_throughput"] = Field(
        "min_cost", description="min_cost: cheapest plan serving all demand. max_throughput: largest uniform "
                                "scale of the declared demand under budget and availability (needs a budget).")
    routing: Literal["fractional", "sliced"] = Field(
        "fractional", description="fractional: any share of a class to any endpoint. sliced: Mélange's binary "
                                  "assignment of 1/slice_factor slices of each class.")
    slice_factor: int = Field(8, ge=1, le=64, description="Slices per class with routing: sliced.")
    headroom: float = Field(0.0, ge=0, lt=1, description="Fraction of each instance's capacity kept free (over-provisioning).")
    time_limit_s: float = Field(300, gt=0, le=86_400, description=(
        "Work budget of the whole `plan` command (templates, every solve, verification, baselines): a "
        "wall-clock safety stop, seconds. Plans do not depend on it unless it is hit (plan.json work_budget, "
        "solver.safety_stop and a warning say so); max_nodes and verification's counts are the deterministic "
        "limits."))
    max_nodes: int = Field(2000, ge=1, le=10_000_000, description="Branch-and-bound nodes each MIP (one per block of "
                                                                  "linked models) may explore: the deterministic work "
                                                                  "limit. Same inputs, same plan, on any machine.")
    mip_gap: float = Field(0.001, ge=0, lt=1, description="Relative MIP gap at which the solver may stop.")
    solver: str = Field("highs", pattern=r"^[a-z][a-z0-9_]*$", max_length=40, description=(
        "MIP solver. highs (default): HiGHS on the compiled rows, decomposed per block of linked models. Any other "
        "name (gurobi, cplex, cbc, scip, glpk, ...) is passed to Pyomo's SolverFactory, which solves the Pyomo model "
        "of the same rows whole, with time_limit_s and mip_gap where the solver takes them; max_nodes is HiGHS's. "
        "cbc falls back to the binary in PuLP's wheel. Not available: exit 2 (docs/internals/solver.md)."))
    locality: float = Field(0.0, ge=0, le=1, description="SageServe's epsilon: fraction of each region's local "
                                                          "demand (demand.origins) served by capacity in that region.")
    horizon_months: int = Field(
        12, ge=1, le=120, description="Planning horizon in months (730 hours each): committed capacity is priced per "
                                      "hour of the horizon, a term longer than the horizon (or not dividing it) "
                                      "paying for its unused months too: committed $/h x whole terms covering the "
                                      "horizon / the horizon.")
    churn_penalty_hours: float = Field(
        0.5, ge=0, le=8760, description="With --state: each new instance costs this many hours of its price extra "
                               "(start-up and model load), so small savings do not churn the running fleet.")
    churn_payback_hours: float = Field(
        4.0, gt=0, le=8760, description="With --state: the hours a move has to pay back that one-off cost in: the plan "
                               "leaves what runs when its savings per hour exceed the new instances' "
                               "churn_penalty_hours of price / these hours. 1 was the implicit value before 0.1.0: "
                               "a 25% saving whose start-up took just over an hour to pay back was never made.")
    allow_unmet: bool = Field(False, description="Allow serving less than the declared demand, at unmet_penalty.")
    unmet_penalty_usd_per_rps_hour: float = Field(
        100.0, gt=0, le=MAX_SCALE, description="With allow_unmet: cost per hour of each req/s left unserved.")
    max_nodes_per_template: int = Field(
        4, ge=1, le=16, description="Most nodes one serving template (a pipeline-parallel replica) may span.")
    tp_pp_layouts: bool = Field(
        True, description="Consider every TP x PP (x DP) layout: pipeline stages inside one node (e.g. TP2 x PP2 on a "
                          "4-GPU node, vLLM's mp backend) and pipelines across nodes with TP smaller than a node "
                          "(several stages per node). Dominated layouts are pruned, and ties keep the simpler layout. "
                          "false: TP = all GPUs of a node in a pipeline, PP only across nodes.")
    allow_mixed_pipelines: bool = Field(
        False, description="EXPERIMENTAL. Also consider pipelines whose stages run on different instance types of one "
                           "cloud and region (Coral's heterogeneous templates), with an uneven layer split. Deployed "
                           "with the Pulumi stacks only (a SkyPilot task has one accelerator type).")
    disaggregation: Literal["off", "auto"] = Field(
        "off", description="Prefill/decode disaggregation (xPyD bundles: prefill engines and decode engines that hand "
                           "each prompt's KV cache over NVLink or RDMA, in one node or placement group). auto: offer "
                           "bundles beside colocated engines; the solver picks one per model and class only where it "
                           "is cheaper by the margin (docs/concepts/disaggregation.md). off (default): colocated "
                           "engines only.")
    adapter_placement: Literal["placed", "everywhere"] = Field(
        "placed", description="LoRA adapters (`adapters`): placed (default): the solver puts each adapter on the units "
                              "it picks, each engine with the slots it needs; everywhere: every replica of a base holds "
                              "all its adapters (KServe's static mode), the comparison docs/concepts/adapters.md reports.")
    verify: VerifySpec = Field(default_factory=VerifySpec, description="Check the plan's latency "
                                 "objectives by simulating it, and re-plan the units that miss.")
    mixed_memory_ratio: float = Field(
        3.0, gt=1, le=16, description="Mixed pipelines: skip node combinations whose total GPU memory exceeds this "
                                      "multiple of the model's weights (Coral's beta); larger ones are dominated "
                                      "by splitting the same GPUs into smaller replicas.")
