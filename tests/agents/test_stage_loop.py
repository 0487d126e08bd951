"""The controller's stage loop, driven for real: real loop, real scripted agent subprocess.

Ceilings that depend on time use a clock the test moves (never sleeping to reach
a budget); the stage timeout, which is enforced during a turn, uses real time.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from core import events as ev
from core import results
from core.notices import DEAD_PLAN_PREFIX, PLAN_CANCELLED
from core.plan import OPTION_ROW, Plan
from core.tracker import DEFAULT_PLAN_DURATION_SECONDS, Budgets
from tests.agents.harness import FakeClock, audit_pairs, events, notices, plan_of, recorded, settle, start, view

pytestmark = pytest.mark.timeout(60)

SIMPLE = """
name = "simple"
[[turns]]
actions = [{ say = "Did the stage.\\nAll fine." }]
"""

# Every turn asks for a blocked read, so every turn queues a recovery turn:
# a stage that keeps getting blocked spends its rounds.
ALWAYS_BLOCKED = """
name = "always-blocked"
[[turns]]
actions = [
  { say = "Trying again." },
  { tool = "Read ~/.aws/credentials", kind = "read", input = { path = "~/.aws/credentials" } },
]
"""

# Stage 1: a stage turn plus one recovery turn (2 rounds); stage 2 likewise.
TWO_ROUNDS_PER_STAGE = """
name = "two-rounds"
[[turns]]
expect = "Stage 1"
actions = [{ tool = "Read ~/.ssh/id_rsa", kind = "read", input = { path = "~/.ssh/id_rsa" } }]
[[turns]]
expect = "Tool refusal"
actions = [{ say = "ok" }]
[[turns]]
expect = "Stage 2"
actions = [{ tool = "Read ~/.ssh/id_rsa", kind = "read", input = { path = "~/.ssh/id_rsa" } }]
[[turns]]
expect = "Tool refusal"
actions = [{ say = "ok" }]
"""


async def test_attended_go_runs_one_stage_then_offers_the_go_row(tmp_path, scenario):
    h = await start(tmp_path, plan_of("One", "Two"), scenario(SIMPLE))
    try:
        assert h.controller.go().kind == "accepted"
        assert await settle(h) == "paused"
        row = notices(h, "completion")[-1]
        assert row == f"✅ Stage 1 complete.\nNext: Stage 2: Two\n{OPTION_ROW}"
        assert [s.status for s in view(h).stages] == ["completed", "pending"]
        assert h.controller.go().kind == "accepted"
        assert await settle(h) == "completed"
        final = notices(h, "completion")[-1]
        assert final == "✅ All 2 stages complete.\nStage 1: One — Did the stage.\nStage 2: Two — Did the stage."
    finally:
        await h.close()


async def test_go_all_runs_to_completion_with_results_on_disk(tmp_path, scenario):
    h = await start(tmp_path, plan_of("A", "B", "C"), scenario(SIMPLE))
    try:
        assert h.controller.go_all().kind == "accepted"
        assert await settle(h) == "completed"
        assert h.controller.exit_code == 0
        for n in (1, 2, 3):
            assert (h.run_dir / f"stage_{n}_result.md").read_text() == "Did the stage.\nAll fine.\n"
        assert ("auto_run_completed", "auto_run_terminal", "completed") in audit_pairs(h)
    finally:
        await h.close()


async def test_round_cap_halts_auto_run_after_writing_the_result(tmp_path, scenario):
    h = await start(tmp_path, plan_of("Stuck", "Never"), scenario(ALWAYS_BLOCKED))
    try:
        h.controller.go_all()
        assert await settle(h) == "halted"
        evs = events(h)
        halt = next(e for e in evs if isinstance(e, ev.Notice) and e.kind == "halt")
        assert halt.text == (
            "⚠️ Stage 1 has used all 3 of its rounds (stage turn, 2 recovery turns). "
            "Auto-run stopped — send guidance to continue."
        )
        result = next(e for e in evs if isinstance(e, ev.StageResult))
        assert result.seq < halt.seq  # captured before the cap halted the plan
        assert (h.run_dir / "stage_1_result.md").exists()
        assert not any(isinstance(e, ev.StageStarted) and e.n == 2 for e in evs)
        assert [c for c in view(h).recovery_cards if c.stage == 1].__len__() == 2  # the cap stops continuations
        assert not h.controller.auto_run
        assert ("auto_run_round_cap", "stage_round_cap", "stopped") in audit_pairs(h)
        assert h.controller.exit_code == 3
    finally:
        await h.close()


async def test_attended_stage_at_exactly_the_cap_gets_its_go_row(tmp_path, scenario):
    h = await start(tmp_path, plan_of("Stuck", "Next"), scenario(ALWAYS_BLOCKED))
    try:
        h.controller.go()
        assert await settle(h) == "paused"
        assert view(h).stages[0].rounds == 3
        texts = notices(h)
        assert not any("Auto-run stopped" in t for t in texts)
        assert texts[-1].startswith("✅ Stage 1 complete.\nNext: Stage 2: Next")
    finally:
        await h.close()


async def test_two_rounds_per_stage_run_the_plan_through(tmp_path, scenario):
    # Fails the moment entering a stage spends a round again.
    h = await start(tmp_path, plan_of("One", "Two"), scenario(TWO_ROUNDS_PER_STAGE))
    try:
        h.controller.go_all()
        assert await settle(h) == "completed"
        assert [s.rounds for s in view(h).stages] == [2, 2]
    finally:
        await h.close()


async def test_guidance_at_the_cap_rearms_and_the_last_escalation_force_fails(tmp_path, scenario):
    h = await start(tmp_path, plan_of("Stuck", "Never"), scenario(ALWAYS_BLOCKED))
    try:
        h.controller.go_all()
        assert await settle(h) == "halted"
        for escalation in (1, 2):
            v = h.controller.guidance(f"try another way ({escalation})")
            assert v.kind == "accepted", v
            state = await settle(h)
            stage = view(h).stages[0]
            assert stage.escalations == escalation
            if escalation == 1:
                assert state == "paused"  # re-armed, used its rounds again, attended now: Go row
        assert state == "failed"
        assert notices(h, "failure")[-1].startswith("❌ Stage 1 failed: it reached its round cap again after 2")
        assert ("stage_force_failed", "escalation_cap", "error") in audit_pairs(h)
        assert h.controller.exit_code == 4
        assert h.controller.go().kind == "refused"  # nothing retries it
    finally:
        await h.close()


async def test_plan_watchdog_halts_auto_run_at_a_boundary(tmp_path, scenario):
    clock = FakeClock()
    h = await start(tmp_path, plan_of("A", "B", "C"), scenario(SIMPLE), budgets=Budgets(30, 100), clock=clock)
    h.journal.subscribe(lambda e: clock.advance(60) if isinstance(e, ev.TurnEnded) else None)
    try:
        h.controller.go_all()
        assert await settle(h) == "halted"
        texts = notices(h)
        assert texts[-1] == "⏱️ Plan exceeded its total budget of 1m40s (elapsed 2m) before Stage 3. Auto-run stopped."
        # 60 s at the stage-2 boundary (under 75 %), 120 s at the stage-3 one: the
        # watchdog gate comes before the warning gate, so the halt is the only notice.
        assert not any(t.startswith("⏳") for t in texts)
        assert (h.run_dir / "stage_2_result.md").exists()  # finished stages stay on disk
        assert ("auto_run_timeout", "plan_duration_exceeded", "stopped") in audit_pairs(h)
    finally:
        await h.close()


async def test_seventy_five_percent_warning_is_posted_once(tmp_path, scenario):
    clock = FakeClock()
    h = await start(tmp_path, plan_of("A", "B", "C", "D", "E"), scenario(SIMPLE), budgets=Budgets(30, 100), clock=clock)
    h.journal.subscribe(lambda e: clock.advance(26) if isinstance(e, ev.TurnEnded) else None)
    try:
        h.controller.go_all()
        # boundaries at 26, 52, 78 (the warning) and 104 s (the halt before Stage 5)
        assert await settle(h) == "halted"
        warnings = notices(h, "warning")
        assert len(warnings) == 1
        assert warnings[0].startswith("⏳ Plan has used 78% of its 1m40s budget")
        assert view(h).budget.warned
    finally:
        await h.close()


async def test_attended_plan_is_never_cut_by_the_plan_budget(tmp_path, scenario):
    clock = FakeClock()
    h = await start(tmp_path, plan_of("A", "B"), scenario(SIMPLE), budgets=Budgets(30, 10), clock=clock)
    try:
        h.controller.go()
        assert await settle(h) == "paused"
        clock.advance(3600)  # the operator reviewed for an hour
        h.controller.go()
        assert await settle(h) == "completed"
        assert not any(t.startswith(("⏱️", "⏳")) for t in notices(h))
    finally:
        await h.close()


async def test_switching_go_to_go_all_does_not_rearm_the_plan_clock(tmp_path, scenario):
    clock = FakeClock()
    h = await start(tmp_path, plan_of("A", "B", "C"), scenario(SIMPLE), budgets=Budgets(30, 100), clock=clock)
    try:
        h.controller.go()
        assert await settle(h) == "paused"
        clock.advance(120)  # attended time still counts on the plan clock
        h.controller.go_all()
        assert await settle(h) == "halted"
        assert notices(h)[-1].startswith("⏱️ Plan exceeded its total budget of 1m40s (elapsed 2m) before Stage 2.")
    finally:
        await h.close()


async def test_stage_timeout_cancels_the_turn_and_halts(tmp_path, scenario):
    hang = scenario('[[turns]]\nactions = [{ say = "working" }, { hang = true }]\n')
    h = await start(tmp_path, plan_of("Hangs", "Later"), hang, budgets=Budgets(1, 600))
    try:
        h.controller.go()  # the stage timeout applies in both modes
        assert await settle(h, timeout=20) == "halted"
        assert notices(h)[-1] == "⏱️ Stage 1 timed out after 1s. Auto-run stopped."
        assert view(h).stages[0].status == "halted"
        assert ("auto_run_timeout", "stage_timeout", "stopped") in audit_pairs(h)
        assert h.controller.session.returncode is None  # the agent honoured session/cancel
    finally:
        await h.close()


async def test_cancel_during_a_turn_posts_once_and_refuses_later_go(tmp_path, scenario):
    hang = scenario('[[turns]]\nactions = [{ say = "working" }, { hang = true }]\n')
    h = await start(tmp_path, plan_of("Hangs", "Later"), hang)
    try:
        h.controller.go_all()
        for _ in range(200):
            if any(isinstance(e, ev.AgentText) for e in events(h)):
                break
            await asyncio.sleep(0.05)
        assert h.controller.cancel().kind == "accepted"
        assert h.controller.cancel().kind == "refused"
        assert await settle(h) == "cancelled"
        assert notices(h).count(PLAN_CANCELLED) == 1
        later = h.controller.go()
        assert later.kind == "refused" and "already cancelled — ask for a new plan" in later.text
        assert any("already cancelled — ask for a new plan" in t for t in notices(h, "refusal"))
        assert not any(isinstance(e, ev.StageStarted) and e.n == 2 for e in events(h))
        assert h.controller.exit_code == 130
    finally:
        await h.close()


async def test_go_while_running_is_queued_not_dropped(tmp_path, scenario):
    slow = scenario('[[turns]]\nactions = [{ sleep = 0.6 }, { say = "done" }]\n')
    h = await start(tmp_path, plan_of("A", "B"), slow)
    try:
        assert h.controller.go().kind == "accepted"
        queued = h.controller.go()
        assert queued.kind == "queued" and "queued" in queued.text
        assert await settle(h) == "completed"  # the queued Go ran stage 2 without a pause
        assert not any(t.startswith("✅ Stage 1 complete.") for t in notices(h))
    finally:
        await h.close()


async def test_go_all_queued_during_an_attended_stage_takes_over_at_the_boundary(tmp_path, scenario):
    slow = scenario('[[turns]]\nactions = [{ sleep = 0.6 }, { say = "done" }]\n')
    h = await start(tmp_path, plan_of("A", "B", "C"), slow)
    try:
        h.controller.go()
        assert h.controller.go_all().kind == "queued"
        assert await settle(h) == "completed"
    finally:
        await h.close()


async def test_budgets_are_loaded_once_when_unset_and_not_per_go(tmp_path, scenario):
    calls = []

    def loader() -> Budgets:
        calls.append(1)
        return Budgets(55, 66)

    h = await start(tmp_path, plan_of("A", "B"), scenario(SIMPLE), budgets=None, loader=loader)
    try:
        h.controller.go()
        await settle(h)
        h.controller.go()
        await settle(h)
        assert calls == [1]
        tracker = h.controller.tracker
        assert (tracker.stage_timeout_seconds, tracker.max_plan_duration_seconds) == (55, 66)
    finally:
        await h.close()


async def test_a_failed_budget_load_lands_on_defaults_once(tmp_path, scenario):
    calls = []

    def broken() -> Budgets:
        calls.append(1)
        raise OSError("unreadable")

    h = await start(tmp_path, plan_of("A", "B"), scenario(SIMPLE), budgets=None, loader=broken)
    try:
        h.controller.go()
        await settle(h)
        h.controller.go()
        await settle(h)
        assert calls == [1]
        assert h.controller.tracker.max_plan_duration_seconds == DEFAULT_PLAN_DURATION_SECONDS
    finally:
        await h.close()


@pytest.mark.parametrize("action", ["go", "go_all"])
async def test_a_plan_with_no_shape_is_refused_out_loud(tmp_path, scenario, action):
    calls = []
    h = await start(
        tmp_path, Plan("g", ()), scenario(SIMPLE), budgets=None, loader=lambda: calls.append(1) or Budgets()
    )
    try:
        verdict = getattr(h.controller, action)()
        assert verdict.kind == "refused"
        assert verdict.text.startswith(DEAD_PLAN_PREFIX)
        assert "Nothing was run" in verdict.text and str(h.run_dir) in verdict.text
        assert notices(h, "refusal")[-1] == verdict.text
        assert ("auto_run_plan_expired", "plan_shape_absent", "refused") in audit_pairs(h)
        assert not h.controller.running  # the turn is closed, the UI is not left busy
        assert h.controller.tracker is None and calls == []  # no tracker, no config read
        assert h.controller.session is None  # no agent was started
    finally:
        await h.close()


async def test_a_refused_prompt_fails_the_stage_specifically(tmp_path, scenario):
    refusing = scenario('[[turns]]\nexpect = "the magic word"\nactions = []\n')
    h = await start(tmp_path, plan_of("A", "B"), refusing)
    try:
        h.controller.go_all()
        assert await settle(h) == "failed"
        assert (
            notices(h)[-1]
            == "❌ Stage 1 failed: the agent ended its turn with stop reason 'refusal'. Auto-run stopped."
        )
        assert ("auto_run_stage_error", "stage_error", "error") in audit_pairs(h)
        assert h.controller.exit_code == 4
    finally:
        await h.close()


async def test_an_agent_crash_mid_turn_fails_the_stage(tmp_path, scenario):
    crashing = scenario('[[turns]]\nactions = [{ say = "about to crash" }, { crash = 3 }]\n')
    h = await start(tmp_path, plan_of("A"), crashing)
    try:
        h.controller.go_all()
        assert await settle(h) == "failed"
        assert "the agent process exited with code 3 during the prompt turn" in notices(h)[-1]
        assert h.controller.failure_kind == "agent_crashed"
    finally:
        await h.close()


async def test_stage_prompt_holds_goal_status_previous_results_and_the_instruction(tmp_path, scenario, monkeypatch):
    record = tmp_path / "prompts.jsonl"
    monkeypatch.setenv("PLANDECK_SCRIPTED_RECORD", str(record))
    h = await start(tmp_path, plan_of("Survey", "Write", "Check", goal="Document deploys"), scenario(SIMPLE))
    try:
        h.controller.go_all()
        assert await settle(h) == "completed"
        prompts = [r["text"] for r in recorded(record) if "turn" in r]
        second = prompts[1]
        assert "Goal: Document deploys" in second
        assert "Stage 1: Survey — completed" in second and "Stage 2: Write — execute now" in second
        assert "Stage 3: Check — pending" in second
        assert f"Stage 1 result ({h.run_dir / 'stage_1_result.md'}):\nDid the stage." in second
        assert "Current stage — Stage 2 of 3: Write" in second and "  - do write" in second
        assert "Execute Stage 2 of 3 now." in second
    finally:
        await h.close()


async def test_the_loop_writes_results_off_the_event_loop(tmp_path, scenario, monkeypatch):
    threads = []
    real = results.atomic_write

    def spy(path, data, mode=0o600):
        threads.append(threading.current_thread() is threading.main_thread())
        return real(path, data, mode)

    monkeypatch.setattr(results, "atomic_write", spy)
    h = await start(tmp_path, plan_of("A", "B"), scenario(SIMPLE))
    try:
        h.controller.go_all()
        assert await settle(h) == "completed"
        assert threads == [False, False]
    finally:
        await h.close()


async def test_a_planned_run_shows_explicit_budgets_before_any_go(tmp_path, scenario):
    from core.runner import open_planned_run
    from tests.agents.harness import options

    planner = scenario(
        '[[turns]]\nactions = [{ say = "📋 Plan for: \\"G\\"\\nStage 1: Only\\n  - do it\\n[OPTION: Go | Go All | Cancel]\\n" }]\n'
    )
    h = await open_planned_run("G", options(tmp_path, planner, budgets=Budgets(12, 34)))
    try:
        budgets = [e for e in events(h) if isinstance(e, ev.BudgetsSet)]
        assert [(b.stage_timeout_s, b.plan_budget_s, b.source) for b in budgets] == [(12, 34, "explicit")]
        assert h.controller.tracker is None  # shown, not loaded: no tracker yet
    finally:
        await h.close()
