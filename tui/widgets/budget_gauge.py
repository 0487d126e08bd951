"""The budget gauge: plan elapsed vs budget (warn from 75 %, over), and the stage clock."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from core.durations import human_duration
from core.projection import RunView
from core.tracker import PLAN_WARN_FRACTION

BAR = 16


def _bar(fraction: float) -> str:
    filled = max(0, min(BAR, round(BAR * fraction)))
    return "█" * filled + "░" * (BAR - filled)


def plan_state(view: RunView, elapsed: float | None) -> str:
    budget = view.budget.budget_seconds
    if budget is None:
        return "unset"
    if budget == 0:
        return "off"
    if elapsed is None:
        return "ok"
    if elapsed > budget:
        return "over"
    if elapsed >= PLAN_WARN_FRACTION * budget or view.budget.warned:
        return "warn"
    return "ok"


class BudgetGauge(Static):
    DEFAULT_CLASSES = "panel"
    COMPONENT_CLASSES = {"gauge--ok", "gauge--warn", "gauge--over", "gauge--dim"}

    def __init__(self, **kwargs) -> None:
        super().__init__("", **kwargs)
        self.border_title = "Budget"
        self._last: tuple | None = None

    def update_view(self, view: RunView, now: float) -> None:
        b = view.budget
        ticking = view.live and view.status == "running"
        elapsed = b.elapsed_seconds
        if ticking and b.started_at is not None:
            elapsed = max(0.0, now - b.started_at)
        stage_elapsed = b.stage_elapsed_seconds
        if ticking and b.stage_started_at is not None:
            stage_elapsed = max(0.0, now - b.stage_started_at)
        state = plan_state(view, elapsed)
        key = (
            state,
            None if elapsed is None else int(elapsed),
            None if stage_elapsed is None else int(stage_elapsed),
            b.budget_seconds,
            b.stage_timeout_seconds,
            view.auto_run,
            view.status,
        )
        if key == self._last:
            return
        self._last = key
        for name in ("ok", "warn", "over", "off", "unset"):
            self.set_class(state == name, f"-{name}")
        self.update(self._gauge_text(view, state, elapsed, stage_elapsed))

    def _gauge_text(self, view: RunView, state: str, elapsed: float | None, stage_elapsed: float | None) -> Text:
        def style(name: str):
            return self.get_component_rich_style(f"gauge--{name}", partial=True)

        b = view.budget
        text = Text()
        budget = b.budget_seconds
        if budget is None:
            text.append("Plan budget: set at the first Go\n", style=style("dim"))
        elif budget == 0:
            text.append("Plan budget: disabled\n")
        else:
            used = elapsed or 0.0
            frac = used / budget
            text.append("Plan ", style="bold")
            text.append(_bar(frac), style=style(state))
            text.append(f" {int(100 * frac)}%\n")
            left = budget - used
            tail = f"{human_duration(left)} left" if left >= 0 else f"{human_duration(-left)} over"
            text.append(f"{human_duration(used)} of {human_duration(budget)} · {tail}\n")
            finished = view.status in ("completed", "failed", "cancelled", "dead") or view.closed
            if finished:
                pass  # no forecasts for a plan that is over
            elif state == "warn":
                text.append("⏳ past 75 %: auto-run stops at the first boundary past the budget\n", style=style(state))
            elif state == "over":
                text.append("⏱ over budget: auto-run halts at the next stage boundary\n", style=style(state))
            if not view.auto_run and not finished:
                text.append("attended: the budget bounds auto-run only\n", style=style("dim"))
        timeout = b.stage_timeout_seconds
        if timeout == 0:
            text.append("Stage timeout: disabled")
        elif timeout is not None and stage_elapsed is not None and view.status == "running":
            text.append(f"Stage {human_duration(stage_elapsed)} of {human_duration(timeout)}")
        elif timeout is not None:
            text.append(f"Stage timeout {human_duration(timeout)}", style=style("dim"))
        return text
