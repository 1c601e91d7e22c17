"""hetinfra: cheapest heterogeneous multi-cloud GPU plans for LLM serving under SLOs."""

__version__ = "0.1.0"
#: plan.json's format version (written by hetinfra.plan.plan_json, read by deploy, replan and the
#: simulator); bump only for incompatible changes: new keys may be added within a version.
PLAN_VERSION = 1


def cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one): how many threads
    the solver's per-model solves (hetinfra.solver.ahead) and the simulator's units (hetinfra.sim.core)
    run on."""
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
