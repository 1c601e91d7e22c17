"""Pyomo allocation models and their HiGHS solve wrapper (installed as ``hetinfra.solver``)."""
