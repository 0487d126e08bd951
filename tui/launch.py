"""Opening the TUI: demo, run, watch, overview, observations."""

from __future__ import annotations

from core.errors import InputError


def _unavailable(*_args, **_kwargs) -> int:
    raise InputError("plandeck", "the terminal UI is not built yet; use --headless")


run_in_tui = run_demo = run_watch = run_overview = run_observations = _unavailable
