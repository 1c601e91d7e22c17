"""The compiled simulator core (hetinfra/sim/_core.c) and the editable install's bytecode; everything
else is in pyproject.toml.

optional=True: where it cannot be built (no C compiler), hetinfra installs without it and
verification runs the Python reference loop, with identical results (hetinfra/sim/core.py).
-ffp-contract=off: no fused multiply-add, so the core's floating point matches Python's bit for bit.
"""

import compileall
import sys

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

FLAGS = [] if sys.platform == "win32" else ["-O2", "-ffp-contract=off", "-fno-fast-math", "-std=c11"]


class BuildPy(build_py):
    """An editable install (``pip install -e .``, the Quick start's) byte-compiles the packages where
    they lie, as installing a wheel does in site-packages. Where PYTHONDONTWRITEBYTECODE is set (many
    container images; these CI machines), Python never writes bytecode itself, so every ``hetinfra``
    call would compile its ~100 modules again: 70 ms of `hetinfra plan`'s 0.5 s on the front door
    (docs/benchmarks.md). A module edited later is compiled in memory, as Python does for stale
    bytecode."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            for package in self.packages:
                compileall.compile_dir(self.get_package_dir(package), maxlevels=0, quiet=2)


if __name__ == "__main__":  # as setuptools runs it; tests/test_setup.py imports BuildPy alone
    setup(cmdclass={"build_py": BuildPy},
          ext_modules=[Extension("hetinfra.sim._core", ["hetinfra/sim/_core.c"], extra_compile_args=FLAGS,
                                 optional=True)])
