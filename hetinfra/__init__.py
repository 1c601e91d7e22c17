"""hetinfra: cheapest heterogeneous multi-cloud GPU plans for LLM serving under SLOs."""

__version__ = "0.1.0"
