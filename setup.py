"""The compiled simulator core (hetinfra/sim/_core.c); everything else is in pyproject.toml.

optional=True: where it cannot be built (no C compiler), hetinfra installs without it and
verification runs the Python reference loop, with identical results (hetinfra/sim/core.py).
-ffp-contract=off: no fused multiply-add, so the core's floating point matches Python's bit for bit.
"""

import sys

from setuptools import Extension, setup

FLAGS = [] if sys.platform == "win32" else ["-O2", "-ffp-contract=off", "-fno-fast-math", "-std=c11"]

setup(ext_modules=[Extension("hetinfra.sim._core", ["hetinfra/sim/_core.c"], extra_compile_args=FLAGS, optional=True)])
