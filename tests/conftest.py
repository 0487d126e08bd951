"""Shared fixtures: isolated data/config dirs, scenario and plan files, the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Never touch the developer's real plandeck data or config."""
    data = tmp_path / "data"
    monkeypatch.setenv("PLANDECK_DATA_DIR", str(data))
    monkeypatch.setenv("PLANDECK_CONFIG", str(tmp_path / "config" / "config.toml"))
    monkeypatch.delenv("PLANDECK_SCRIPTED_RECORD", raising=False)
    return data


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    return tmp_path / "runs"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


@pytest.fixture
def scenario(tmp_path: Path):
    counter = iter(range(1000))

    def make(text: str) -> Path:
        return write(tmp_path / f"scenario{next(counter)}.toml", text)

    return make


@pytest.fixture
def plan_file(tmp_path: Path):
    def make(*titles: str, goal: str = "Test goal") -> Path:
        body = [f'goal = "{goal}"']
        for t in titles:
            body += ["[[stages]]", f'title = "{t}"', f'tasks = ["do {t.lower()}"]']
        return write(tmp_path / "plan.toml", "\n".join(body) + "\n")

    return make


def run_cli(*args: str, timeout: float = 60, env: dict[str, str] | None = None, cwd: Path | None = None):
    """Run `plandeck` in a subprocess; returns CompletedProcess (text)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "tui.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=str(cwd) if cwd else None,
    )


@pytest.fixture
def cli():
    return run_cli


def read_until(proc: subprocess.Popen, needle: str, timeout: float = 30.0) -> str:
    """Read a child's stdout line by line until one contains needle; returns that line."""
    import time

    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if needle in line:
            return line
        if not line and proc.poll() is not None:
            break
    raise AssertionError(f"the process never printed {needle!r}")
