"""``python -m hetinfra.cli``: the same as the ``hetinfra`` command."""

from hetinfra.cli.app import main

main()
