"""Pilot tests: every control flow, as an operator would drive it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from textual.widgets import DataTable, Input

from core import events as ev
from core.notices import DEAD_PLAN_PREFIX, PLAN_CANCELLED
from core.policy import Policy
from tests.agents.harness import plan_of
from tests.tui.helpers import JournalBuilder, current_view, in_process_app, run_app, transcript_texts, until
from tui.screens.permission import PermissionScreen
from tui.screens.run import RunScreen
from tui.screens.runs import RunsScreen
from tui.widgets.recovery_card import RecoveryCard

pytestmark = pytest.mark.timeout(90)

SIMPLE = '[[turns]]\nactions = [{ say = "Stage work done." }]\n'
SLOW = '[[turns]]\nactions = [{ say = "working" }, { sleep = 0.8 }, { say = " done" }]\n'
HANG = '[[turns]]\nactions = [{ say = "working" }, { hang = true }]\n'
ALWAYS_BLOCKED = (
    '[[turns]]\nactions = [{ say = "again" }, '
    '{ tool = "Read ~/.aws/credentials", kind = "read", input = { path = "~/.aws/credentials" } }]\n'
)


def status(app) -> str | None:
    view = current_view(app)
    return None if view is None else view.status


async def test_go_runs_a_stage_then_shows_the_go_row(tmp_path, scenario):
    app = in_process_app(tmp_path, plan_of("One", "Two"), scenario(SIMPLE))
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: status(app) == "awaiting_go")
        await pilot.press("g")
        await until(pilot, lambda: status(app) == "paused")
        texts = transcript_texts(app)
        assert any(
            t.startswith("✅ Stage 1 complete.\nNext: Stage 2: Two\n[OPTION: Go | Go All | Cancel]") for t in texts
        )
        assert "Go: Stage 1 is starting." in texts  # the press shows its verdict
        assert app.screen.has_class("-needs-input")
        await pilot.press("q")


async def test_go_all_runs_to_completion(tmp_path, scenario):
    app = in_process_app(tmp_path, plan_of("One", "Two", "Three"), scenario(SIMPLE))
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: status(app) == "awaiting_go")
        await pilot.press("G")
        await until(pilot, lambda: status(app) == "completed")
        assert [s.status for s in current_view(app).stages] == ["completed"] * 3
        assert any(t.startswith("✅ All 3 stages complete.") for t in transcript_texts(app))
        await pilot.press("q")


async def test_go_while_running_is_queued_and_says_so(tmp_path, scenario):
    app = in_process_app(tmp_path, plan_of("One", "Two"), scenario(SLOW))
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: status(app) == "awaiting_go")
        await pilot.press("g")
        await until(pilot, lambda: status(app) == "running")
        await pilot.click("#go")
        await until(pilot, lambda: any("Go queued" in t for t in transcript_texts(app)))
        await until(pilot, lambda: status(app) == "completed")
        await pilot.press("q")


async def test_cancel_twice_posts_one_cancel_notice(tmp_path, scenario):
    app = in_process_app(tmp_path, plan_of("Hangs", "Never"), scenario(HANG))
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: status(app) == "awaiting_go")
        await pilot.press("g")
        await until(pilot, lambda: any(t == "working" for t in transcript_texts(app)))
        await pilot.press("c")
        await pilot.click("#cancel")
        await until(pilot, lambda: status(app) == "cancelled")
        await until(pilot, lambda: "The plan is already cancelled." in transcript_texts(app))
        assert transcript_texts(app).count(PLAN_CANCELLED) == 1
        await pilot.press("q")


async def test_go_on_a_dead_run_shows_the_refusal_in_the_transcript_and_a_toast(tmp_path):
    b = JournalBuilder(tmp_path / "runs", "20261130-010000-dead", goal="Ship it", stages=["One", "Two"]).connect()
    b.budgets().go().stage(1, "Did one.").add(ev.Notice(kind="completion", text="✅ Stage 1 complete.", stage=1))
    b.add(ev.PlanState(state="paused", auto_run=False, stage=1))
    run_dir = b.leave_open()
    app = run_app(tmp_path / "runs", run_dir, live=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: status(app) == "dead")
        for key in ("g", "G"):
            await pilot.press(key)
        await pilot.click("#go")
        refusals = [t for t in transcript_texts(app) if t.startswith(DEAD_PLAN_PREFIX)]
        assert len(refusals) == 3
        assert "the process that ran it (pid 4242) has exited" in refusals[0]
        assert str(run_dir) in refusals[0]
        toasts = [n.message for n in app._notifications]
        assert sum(m.startswith(DEAD_PLAN_PREFIX) for m in toasts) == 3
        assert (run_dir / "audit.jsonl").read_text().count("auto_run_plan_expired") == 3
        await pilot.press("q")


async def test_guidance_at_the_round_cap_rearms_the_stage(tmp_path, scenario):
    app = in_process_app(tmp_path, plan_of("Stuck", "Next"), scenario(ALWAYS_BLOCKED))
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: status(app) == "awaiting_go")
        await pilot.press("G")
        await until(pilot, lambda: status(app) == "halted")
        assert any("has used all 3 of its rounds" in t for t in transcript_texts(app))
        await pilot.press("i")
        assert isinstance(app.focused, Input)
        await pilot.press(*"use the environment instead")
        await pilot.press("enter")
        await until(pilot, lambda: current_view(app).stages[0].escalations == 1)
        await until(pilot, lambda: status(app) == "paused")
        assert "✎ guidance" not in transcript_texts(app)  # rendered rows carry the text itself
        assert "use the environment instead" in transcript_texts(app)
        assert any("re-armed by guidance (escalation 1 of 2)" in t for t in transcript_texts(app))
        await pilot.press("q")


ASK_POLICY = '[[rules]]\nid = "ask-push"\ndecision = "ask"\nreason = "publishing"\ntitle = ["^git push"]\n'
ASKING = (
    '[[turns]]\nactions = [{ tool = "git push origin main", kind = "execute", '
    'input = { command = "git push origin main" } }, { say = "after the push" }]\n'
)


@pytest.mark.parametrize(("key", "tool_status"), [("a", "completed"), ("d", "failed")])
async def test_the_ask_prompt_allows_or_denies(tmp_path, scenario, key, tool_status):
    policy = Policy.from_text(ASK_POLICY, "<test>")
    app = in_process_app(tmp_path, plan_of("Push"), scenario(ASKING), policy=policy)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: status(app) == "awaiting_go")
        await pilot.press("g")
        await until(pilot, lambda: isinstance(app.screen, PermissionScreen))
        assert "git push origin main" in str(app.screen.query_one("#permission-details").render())
        await pilot.press(key)
        await until(pilot, lambda: isinstance(app.screen, RunScreen) and status(app) == "completed")
        tool = next(r for r in current_view(app).transcript if r.kind == "tool")
        assert tool.status == tool_status
        await pilot.press("q")


async def test_a_recovery_card_expands_to_its_exact_body(tmp_path, scenario):
    text = (
        '[[turns]]\nactions = [{ tool = "Read ~/.aws/credentials", kind = "read", input = { path = "~/.aws/credentials" } }]\n'
        '[[turns]]\nactions = [{ say = "noted" }]\n'
    )
    app = in_process_app(tmp_path, plan_of("Only"), scenario(text))
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: status(app) == "awaiting_go")
        await pilot.press("g")
        await until(pilot, lambda: status(app) == "completed")
        card = app.screen.query_one(RecoveryCard)
        collapsed = str(card.render())
        assert "Tool call blocked" in collapsed and "~/.aws/**" in collapsed
        assert "safety policy · continuing automatically" in collapsed
        assert "How to do this properly" not in collapsed
        card.focus()
        await pilot.press("enter")
        expanded = str(card.render())
        assert card.card.body in expanded
        assert current_view(app).recovery_cards[0].body.endswith(card.card.body)
        await pilot.press("q")


async def test_theme_switching_includes_a_builtin_theme(tmp_path, scenario):
    app = in_process_app(tmp_path, plan_of("One"), scenario(SIMPLE))
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: status(app) == "awaiting_go")
        title = app.screen.query_one("#run-title")
        colours = []
        for name in ("plandeck-dark", "plandeck-light", "plandeck-contrast", "textual-light", "nord"):
            app.theme = name
            await pilot.pause()
            colours.append(title.styles.background)
            assert app.get_css_variables()["budget-warn"]  # plandeck's variables exist under every theme
        assert len(set(colours)) == 5
        await pilot.press("q")


async def test_help_screen_lists_the_bindings(tmp_path, scenario):
    app = in_process_app(tmp_path, plan_of("One"), scenario(SIMPLE))
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: status(app) == "awaiting_go")
        await pilot.press("question_mark")
        text = str(app.screen.query_one("#help-text").render())
        for key in ("Go", "Go All", "Cancel", "guidance"):
            assert key in text
        await pilot.press("escape")
        assert isinstance(app.screen, RunScreen)
        await pilot.press("q")


async def test_the_overview_shows_new_runs_live_and_opens_one(tmp_path, plan_file, workspace, scenario):
    runs = tmp_path / "runs"
    done = JournalBuilder(runs, "20261130-010000-aaaa", goal="Finished plan", stages=["One"]).connect().budgets()
    done.go(auto=True).stage(1, "ok").add(ev.PlanState(state="completed", auto_run=False, stage=1)).close()
    from tui.app import PlandeckApp

    app = PlandeckApp(runs_root=runs, blink=False, watch=True, probe_interval=0.5)
    async with app.run_test(size=(120, 36)) as pilot:
        table = app.screen.query_one(DataTable)
        await until(pilot, lambda: table.row_count == 1)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tui.cli",
                "run",
                str(plan_file("Live one")),
                "--agent",
                f"scripted:{scenario(HANG)}",
                "--headless",
                "--runs-dir",
                str(runs),
                "--workspace",
                str(workspace),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            await until(pilot, lambda: table.row_count == 2, timeout=30)
            screen = app.screen
            assert isinstance(screen, RunsScreen)
            live_row = next(k for k in screen.rows if "aaaa" not in str(k))
            await until(pilot, lambda: str(screen.rows[live_row]["status"]) == "awaiting go", timeout=30)
            assert str(screen.rows[live_row]["mark"]) == "●"  # needs input stands out
            table.move_cursor(row=0)
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, RunScreen))
            assert app.screen.run_dir == live_row, (app.screen.run_dir, live_row)
            await pilot.press("g")  # attached: the Go reaches the other process controller
            await until(pilot, lambda: status(app) == "running", timeout=30)
        finally:
            os.kill(proc.pid, signal.SIGTERM)
            proc.wait(20)
        await pilot.press("q")
