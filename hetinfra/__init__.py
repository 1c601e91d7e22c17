"""hetinfra: cheapest heterogeneous multi-cloud GPU plans for LLM serving under SLOs."""

__version__ = "0.1.0"
#: plan.json's format version (written by hetinfra.plan.plan_json, read by deploy, replan and the
#: simulator); bump only for incompatible changes: new keys may be added within a version.
PLAN_VERSION = 1
