"""The maintainer's fit script (tools/fit_calibration.py), loaded as a module for the calibration tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"


def load_fit_tool():
    """tools/fit_calibration.py is a script, not a package module: load it once by path."""
    if "fit_calibration" in sys.modules:
        return sys.modules["fit_calibration"]
    spec = importlib.util.spec_from_file_location("fit_calibration", REPO / "tools" / "fit_calibration.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["fit_calibration"] = mod
    spec.loader.exec_module(mod)
    return mod
