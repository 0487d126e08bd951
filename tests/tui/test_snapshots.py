"""How the screens look: deterministic snapshots (fixed size, frozen clock, no blink).

Journals are written with a controlled clock and liveness is injected (the
socket probe is tested for real elsewhere), so every run renders identically.
Update deliberately with `pytest --snapshot-update` and review the SVGs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from textual.widgets import DataTable

from core import observation as obs
from core.journal import JournalReader
from core.projection import fold
from tests.tui import journals
from tui.app import PlandeckApp
from tui.widgets.recovery_card import RecoveryCard

SIZE = (120, 36)


def app_for(
    runs: Path,
    run_dir: Path | None,
    *,
    live: bool | set[str] = True,
    after: float = 2.0,
    theme: str | None = None,
    **kw,
) -> PlandeckApp:
    now = journals.CLOCK_AT
    if run_dir is not None:
        view = fold(JournalReader(run_dir / "journal.jsonl").read_all().events)
        now = view.last_ts + after
    probe = (lambda p: p.name in live) if isinstance(live, set) else (lambda _p: live)
    app = PlandeckApp(
        runs_root=runs,
        start=kw.pop("start", "run" if run_dir else "overview"),
        run_dir=run_dir,
        clock=lambda: now,
        watch=False,
        blink=False,
        probe=probe,
        **kw,
    )
    if theme:
        app.theme = theme
    return app


# Paths appear on screen (the runs root, a dead run's results), so they must be
# the same on every machine: a fixed place, emptied before each test.
SNAP_ROOT = Path("/tmp/plandeck-snapshots")


@pytest.fixture
def runs() -> Path:
    shutil.rmtree(SNAP_ROOT, ignore_errors=True)
    SNAP_ROOT.mkdir(parents=True)
    return SNAP_ROOT / "runs"


def test_overview_with_mixed_states(snap_compare, runs):
    made = journals.mixed_runs(runs)
    live = {made[k].name for k in ("awaiting", "running")}
    assert snap_compare(app_for(runs, None, live=live), terminal_size=SIZE)


def test_run_awaiting_go(snap_compare, runs):
    assert snap_compare(app_for(runs, journals.awaiting_go(runs)), terminal_size=SIZE)


def test_run_running(snap_compare, runs):
    assert snap_compare(app_for(runs, journals.running(runs), after=3), terminal_size=SIZE)


def test_run_past_the_seventy_five_percent_warning(snap_compare, runs):
    assert snap_compare(app_for(runs, journals.warned(runs), after=1), terminal_size=SIZE)


def test_run_halted_at_the_round_cap(snap_compare, runs):
    assert snap_compare(app_for(runs, journals.halted_at_cap(runs)), terminal_size=SIZE)


def test_dead_plan_refusal_shown(snap_compare, runs):
    run_dir = journals.running(runs)

    async def press_go(pilot):
        await pilot.press("g")
        await pilot.pause()

    assert snap_compare(app_for(runs, run_dir, live=False), terminal_size=SIZE, run_before=press_go)


@pytest.mark.parametrize("expanded", [False, True], ids=["collapsed", "expanded"])
def test_recovery_card(snap_compare, runs, expanded):
    run_dir = journals.with_recovery(runs)

    async def focus_card(pilot):
        card = pilot.app.screen.query_one(RecoveryCard)
        card.focus()
        if expanded:
            await pilot.press("enter")
        card.scroll_visible(animate=False)
        await pilot.pause()

    assert snap_compare(app_for(runs, run_dir), terminal_size=SIZE, run_before=focus_card)


def test_blocked_calls_panel(snap_compare, runs):
    run_dir = journals.with_recovery(runs)

    async def browse(pilot):
        await pilot.press("b")
        await pilot.press("down")
        await pilot.pause()

    assert snap_compare(app_for(runs, run_dir), terminal_size=SIZE, run_before=browse)


def test_observation_inspector_with_a_valid_and_an_invalid_record(snap_compare, runs):
    directory = SNAP_ROOT / "observations"
    record = {
        "schema": "projectbuddy/assisted-review-refusal@1",
        "complete": False,
        "outcome": "refused",
        "phase": "inference",
        "failure_kind": "auth_required",
        "exit_code": 4,
        "limits": {"stage_timeout_seconds": 1800.0, "max_rounds": 3},
        "counters": {"requests_started": 4, "requests_completed": 4, "retries": 0, "rounds": 0},
        "elapsed_seconds": 7.3,
        "in_flight": False,
        "request_hash": "a" * 64,
        "server_completion": "unknown",
        "observed_at": "2026-11-30T04:20:39Z",
    }
    obs.write_private_observation(directory, record, name="refusal-20261130T042039Z-aaaa.json")
    bad = dict(record, exit_code=True, prompt="the raw prompt text")
    (directory / "refusal-20261130T050000Z-bbbb.json").write_text(json.dumps(bad))
    app = app_for(runs, None, start="observations", observations_dir=directory)
    assert snap_compare(app, terminal_size=SIZE)


@pytest.mark.parametrize("theme", ["plandeck-dark", "plandeck-light", "plandeck-contrast", "textual-dark", "gruvbox"])
def test_each_theme(snap_compare, runs, theme):
    assert snap_compare(app_for(runs, journals.warned(runs), after=1, theme=theme), terminal_size=SIZE)


def test_small_terminal_is_still_usable(snap_compare, runs):
    assert snap_compare(app_for(runs, journals.running(runs), after=3), terminal_size=(80, 24))


def test_large_terminal(snap_compare, runs):
    assert snap_compare(app_for(runs, journals.with_recovery(runs)), terminal_size=(160, 48))


async def test_the_inspector_never_renders_a_field_outside_the_schema(tmp_path, runs):
    directory = tmp_path / "observations"
    directory.mkdir(mode=0o700)
    bad = {"schema": "projectbuddy/assisted-review-refusal@1", "prompt": "SECRET PROMPT TEXT", "exit_code": "4"}
    (directory / "bad.json").write_text(json.dumps(bad))
    app = app_for(runs, None, start="observations", observations_dir=directory)
    async with app.run_test(size=SIZE) as pilot:
        table = app.screen.query_one(DataTable)
        for _ in range(100):
            if table.row_count:
                break
            await pilot.pause(0.05)
        detail = str(app.screen.query_one("#obs-detail").render())
        assert "INVALID" in detail and "prompt: unknown field" in detail
        assert "SECRET PROMPT TEXT" not in detail
        rows = [str(c) for c in table.get_row_at(0)]
        assert rows[0] == "INVALID" and not any("SECRET" in c for c in rows)
