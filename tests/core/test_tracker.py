"""SPEC §4: every rule of the tracker, with an injected clock (no sleeping)."""

from __future__ import annotations

import pytest

from core.durations import human_duration
from core.tracker import (
    DEFAULT_PLAN_DURATION_SECONDS,
    DEFAULT_STAGE_TIMEOUT_SECONDS,
    Budgets,
    StageTracker,
)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


def tracker(clock: Clock, **kw) -> StageTracker:
    kw.setdefault("stage_timeout_seconds", 1800)
    kw.setdefault("max_plan_duration_seconds", 7200)
    return StageTracker(clock=clock, **kw)


def test_entering_a_stage_spends_no_round(clock):
    t = tracker(clock)
    t.start_stage(1)
    assert t.rounds(1) == 0
    assert not t.round_limit_reached(1)


def test_full_round_budget_is_spendable_after_entry_and_cap_returns_at_three(clock):
    t = tracker(clock)
    t.start_stage(1)
    assert t.record_round(1) is False
    assert t.record_round(1) is False
    assert t.record_round(1) is True  # the third completed turn reaches the cap
    assert t.round_limit_reached(1)


def test_reentering_a_stage_does_not_launder_its_rounds(clock):
    t = tracker(clock)
    t.start_stage(1)
    t.record_round(1)
    t.record_round(1)
    t.start_stage(1)
    assert t.rounds(1) == 2


def test_plan_clock_starts_once_and_is_not_rearmed_per_stage(clock):
    t = tracker(clock)
    assert not t.plan_started
    t.start_stage(1)
    clock.advance(100)
    t.start_stage(2)
    clock.advance(50)
    assert t.plan_elapsed() == pytest.approx(150)


def test_stage_clock_restarts_per_stage_so_paused_time_does_not_count(clock):
    t = tracker(clock, stage_timeout_seconds=60)
    t.start_stage(1)
    clock.advance(50)
    # paused at the Go prompt for an hour:
    clock.advance(3600)
    t.start_stage(2)
    assert t.stage_remaining() == pytest.approx(60)


def test_plan_watchdog_fires_past_budget(clock):
    t = tracker(clock, max_plan_duration_seconds=100)
    t.start_stage(1)
    clock.advance(100)
    assert not t.plan_timed_out()  # at the budget is not past it
    clock.advance(0.5)
    assert t.plan_timed_out()


def test_zero_disables_the_plan_budget_and_its_warning(clock):
    t = tracker(clock, max_plan_duration_seconds=0)
    t.start_stage(1)
    clock.advance(10**6)
    assert not t.plan_timed_out()
    assert not t.plan_warning_due()


def test_zero_disables_the_stage_timeout(clock):
    t = tracker(clock, stage_timeout_seconds=0)
    t.start_stage(1)
    clock.advance(10**6)
    assert t.stage_remaining() is None


def test_warning_fires_once_at_seventy_five_percent(clock):
    t = tracker(clock, max_plan_duration_seconds=100)
    t.start_stage(1)
    clock.advance(74)
    assert not t.plan_warning_due()
    clock.advance(1)
    assert t.plan_warning_due()
    assert t.warned
    clock.advance(10)
    assert not t.plan_warning_due()  # latched: at most once per plan
    clock.advance(100)
    assert not t.plan_warning_due()


def test_budgets_unset_only_when_none_supplied(clock):
    assert StageTracker(clock=clock).budgets_unset
    explicit = StageTracker(clock=clock, stage_timeout_seconds=DEFAULT_STAGE_TIMEOUT_SECONDS)
    assert not explicit.budgets_unset  # "equal to the default" is still supplied


def test_unset_tracker_loads_budgets_once(clock):
    calls = []

    def loader() -> Budgets:
        calls.append(1)
        return Budgets(55, 66)

    t = StageTracker(clock=clock)
    assert t.load_budgets(loader) == "config"
    assert (t.stage_timeout_seconds, t.max_plan_duration_seconds) == (55, 66)
    t.load_budgets(loader)
    assert calls == [1]


def test_failed_load_falls_to_defaults_not_zero_and_is_not_retried(clock):
    calls = []

    def broken() -> Budgets:
        calls.append(1)
        raise OSError("config unreadable")

    t = StageTracker(clock=clock)
    assert t.load_budgets(broken) == "defaults"
    assert t.stage_timeout_seconds == DEFAULT_STAGE_TIMEOUT_SECONDS
    assert t.max_plan_duration_seconds == DEFAULT_PLAN_DURATION_SECONDS  # not 0 = disabled
    assert not t.budgets_unset
    t.load_budgets(broken)
    t.load_budgets(broken)
    assert calls == [1]


def test_explicit_budgets_are_never_reloaded(clock):
    calls = []
    t = StageTracker(clock=clock, stage_timeout_seconds=77, max_plan_duration_seconds=88)
    t.load_budgets(lambda: calls.append(1) or Budgets(1, 2))
    assert calls == []
    assert t.stage_timeout_seconds == 77


def test_guidance_at_the_cap_rearms_and_counts_an_escalation(clock):
    t = tracker(clock)
    t.start_stage(2)
    for _ in range(3):
        t.record_round(2)
    assert t.reset_after_guidance(2) is True
    assert t.rounds(2) == 0
    assert t.escalations(2) == 1


def test_guidance_below_the_cap_does_not_escalate(clock):
    t = tracker(clock)
    t.start_stage(1)
    t.record_round(1)
    assert t.reset_after_guidance(1) is False
    assert t.escalations(1) == 0
    assert t.rounds(1) == 1


def test_force_fail_is_reachable_after_the_last_escalation(clock):
    t = tracker(clock)
    t.start_stage(1)
    for escalation in range(2):
        for _ in range(3):
            t.record_round(1)
        assert not t.is_force_failed(1), f"escalation {escalation}: not yet"
        t.reset_after_guidance(1)
    for _ in range(2):
        t.record_round(1)
    assert not t.is_force_failed(1)
    assert t.record_round(1) is True
    assert t.is_force_failed(1)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(7200, "2h"), (5400, "1h30m"), (1800, "30m"), (90, "1m30s"), (45, "45s"), (3600, "1h"), (0, "0s"), (2.4, "2s")],
)
def test_human_durations(seconds, text):
    assert human_duration(seconds) == text
