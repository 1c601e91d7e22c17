"""List the long options ``vllm serve`` accepts, read from a vLLM wheel's source without importing it
(vLLM needs torch and a GPU stack; this reads the parser's definition with ``ast``):

- every option string given to an ``add_argument(...)`` call in ``vllm/engine/arg_utils.py``
  (``EngineArgs.add_cli_args``: the engine's flags, each named explicitly) and
  ``vllm/entrypoints/openai/cli_args.py`` (``make_arg_parser``: ``--headless``, ``--config``, ...);
- ``--<field>`` for every field of ``FrontendArgs`` (``cli_args.py``), which
  ``FrontendArgs.add_cli_args`` adds in a loop (``--host``, ``--port``, ``--lora-modules``, ...).

Usage (the wheel from PyPI with pip, e.g. ``pip download vllm==0.12.0 --no-deps --only-binary :all:``)::

    python tools/vllm_serve_flags.py vllm-0.12.0-cp38-abi3-manylinux_2_31_x86_64.whl \\
        > tests/compile/vllm_serve_flags_0.12.0.txt

tests/compile/test_vllm_flags.py checks every command line hetinfra writes against that list.
"""

from __future__ import annotations

import ast
import re
import sys
import zipfile

FILES = ("vllm/engine/arg_utils.py", "vllm/entrypoints/openai/cli_args.py")


def _add_argument_options(tree: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            out |= {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                    and a.value.startswith("--")}
    return out


def _frontend_fields(tree: ast.AST) -> set[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "FrontendArgs":
            return {"--" + s.target.id.replace("_", "-") for s in node.body
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    raise SystemExit("FrontendArgs not found in cli_args.py")


def serve_flags(wheel: str) -> tuple[str, list[str]]:
    """(vLLM version, sorted long options of ``vllm serve``) from a wheel."""
    with zipfile.ZipFile(wheel) as z:
        version = re.search(r"vllm-([^-]+)-", wheel.rsplit("/", 1)[-1]).group(1)
        flags: set[str] = set()
        for name in FILES:
            tree = ast.parse(z.read(name).decode())
            flags |= _add_argument_options(tree)
            if name.endswith("cli_args.py"):
                flags |= _frontend_fields(tree)
    return version, sorted(flags)


def main() -> None:
    version, flags = serve_flags(sys.argv[1])
    print(f"# vllm serve long options of vLLM {version}, read from its wheel by tools/vllm_serve_flags.py")
    print("\n".join(flags))


if __name__ == "__main__":
    main()
