"""setup.py's editable build byte-compiles the packages where they lie (BuildPy)."""

import runpy
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# setuptools (~0.3 s CPU to import, pkg_resources and its vendored packages) is imported by these tests
# alone: not at collection, where every xdist worker imported it, and on one worker (--dist loadgroup)
pytestmark = pytest.mark.xdist_group("setup-py")


def _build_py(tmp_path: Path, editable: bool):
    from setuptools import Distribution

    build_py = runpy.run_path(str(REPO / "setup.py"), run_name="setup")["BuildPy"]
    (tmp_path / "src" / "sub").mkdir(parents=True)
    for rel in ("src/__init__.py", "src/mod.py", "src/sub/__init__.py"):
        (tmp_path / rel).write_text("VALUE = 1\n")
    dist = Distribution({"packages": ["pkg", "pkg.sub"], "package_dir": {"pkg": str(tmp_path / "src")},
                         "script_name": "setup.py"})
    cmd = build_py(dist)
    cmd.editable_mode = editable
    cmd.build_lib = str(tmp_path / "build")
    cmd.ensure_finalized()
    return cmd


def _bytecode(tmp_path: Path) -> set[str]:
    tag = sys.implementation.cache_tag
    return {str(p.relative_to(tmp_path)) for p in (tmp_path / "src").rglob(f"*.{tag}.pyc")}


def test_editable_build_compiles_every_package_in_place(tmp_path):
    _build_py(tmp_path, editable=True).run()
    tag = sys.implementation.cache_tag
    assert _bytecode(tmp_path) == {f"src/__pycache__/__init__.{tag}.pyc", f"src/__pycache__/mod.{tag}.pyc",
                                   f"src/sub/__pycache__/__init__.{tag}.pyc"}


def test_wheel_build_leaves_the_sources_alone(tmp_path):
    """A wheel's bytecode is the installer's (pip compiles into site-packages), not the build's."""
    _build_py(tmp_path, editable=False).run()
    assert _bytecode(tmp_path) == set()
    assert (tmp_path / "build" / "pkg" / "mod.py").exists()
