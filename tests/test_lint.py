"""The code stays lint-clean (ruff, configured in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_ruff_is_clean():
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
