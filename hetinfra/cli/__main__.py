"""``python -m hetinfra.cli``: the same as the ``hetinfra`` command (its one entry point,
:func:`hetinfra.cli.main`: the BLAS thread setting, stop signals during imports, the end without
teardown)."""

from hetinfra.cli import main

main()
