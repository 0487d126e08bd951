"""The README's two fresh-machine commands exist, and CI runs the test one verbatim."""

from __future__ import annotations

import os
import re
import subprocess

from tests.conftest import ROOT


def _block(name: str) -> str:
    text = (ROOT / "README.md").read_text()
    match = re.search(rf"<!-- {name} -->\n```\n(.+?)\n```\n<!-- /{name} -->", text, re.S)
    assert match, f"README.md has no {name} block"
    return match.group(1).strip()


def test_readme_gives_one_command_for_the_main_job_and_one_for_the_tests():
    main = _block("main-command")
    test = _block("test-command")
    assert "\n" not in main and "\n" not in test
    assert "python3 -m venv" in main and main.endswith("plandeck demo")
    assert "python3 -m venv" in test and "pytest" in test


def test_ci_script_runs_exactly_the_readme_test_command():
    script = ROOT / ".ci" / "run"
    assert os.access(script, os.X_OK)
    extracted = subprocess.run(
        ["awk", "/<!-- test-command -->/{f=1;next} /<!-- \\/test-command -->/{f=0} f && !/^```/", "README.md"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert extracted == _block("test-command")
    assert "rm -rf .venv" in script.read_text()  # a fresh virtual environment every time
