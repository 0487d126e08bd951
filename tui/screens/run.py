"""The run screen: one plan, live — stages, budget, transcript, blocked calls, controls."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from core.projection import Row, RunView
from core.verdict import Verdict
from tui.messages import RunUpdated
from tui.widgets.blocked_calls import BlockedCalls
from tui.widgets.budget_gauge import BudgetGauge
from tui.widgets.plan_controls import PlanControls
from tui.widgets.stage_list import StageList
from tui.widgets.transcript import Transcript

STATUS_LABELS = {
    "awaiting_go": "awaiting Go",
    "running": "running",
    "paused": "paused — Go row",
    "halted": "halted",
    "failed": "failed",
    "completed": "completed",
    "cancelled": "cancelled",
    "dead": "dead — no live process",
}
MAX_TOASTS_PER_BATCH = 3
NOTIFY = {
    "warning": ("warning", True),
    "halt": ("warning", True),
    "failure": ("error", True),
    "refusal": ("error", True),
    "cancel": ("warning", False),
    "completion": ("information", False),
}


def title_text(view: RunView, width: int = 120) -> Text:
    status = f" {STATUS_LABELS.get(view.status, view.status)} "
    tail = Text()
    if view.status not in ("completed", "failed", "cancelled", "dead"):
        tail.append("  auto-run" if view.auto_run else "  attended")
    agent = view.agent_name.split(" ")[0] if view.agent_name else view.agent
    tail.append(f" · {agent}")
    if view.agent_mode:
        tail.append(f" ({view.agent_mode})")
    tail.append(" · live" if view.live else " · not live")
    if view.needs_input:
        tail.append("  ● needs input", style="bold")
    goal = view.goal or "(planning…)"
    room = max(12, width - len(status) - tail.cell_len - 4)
    if len(goal) > room:
        goal = goal[: room - 1] + "…"
    text = Text()
    text.append(f" {goal} ", style="bold")
    text.append(status, style="reverse")
    text.append_text(tail)
    return text


def hint_text(view: RunView) -> str:
    if view.pending_asks:
        return "A tool call waits for your decision."
    if not view.live and view.status not in ("completed", "cancelled", "failed"):
        return "No live process owns this run: Go is refused, results stay on disk."
    return {
        "awaiting_go": "Press g to run Stage 1, or G to auto-run the whole plan.",
        "paused": "Stage complete. g runs the next stage, G auto-runs the rest, i sends guidance.",
        "halted": "Auto-run stopped. Send guidance (i) to continue the stage, or g for the next one.",
        "running": "Running. Go / Go All pressed now are queued; c cancels.",
    }.get(view.status, "")


class RunScreen(Screen):
    BINDINGS = [
        Binding("g", "go", "Go"),
        Binding("G", "go_all", "Go All"),
        Binding("c", "cancel_plan", "Cancel"),
        Binding("i", "guidance", "Guidance"),
        Binding("b", "blocked", "Blocked", show=False),
        Binding("question_mark", "app.help", "Help"),
        Binding("escape", "back", "Runs"),
    ]

    def __init__(self, run_dir: Path) -> None:
        super().__init__()
        self.run_dir = run_dir
        self.view: RunView | None = None
        self._seen_notice_seq: int | None = None
        self._asked: set[str] = set()
        self._needed_input = False
        self._local_key = -1
        self._header: tuple[str, str] = ("", "")

    def compose(self) -> ComposeResult:
        yield Static("", id="run-title", markup=False)
        with Horizontal(id="run-body"):
            with Vertical(id="run-side"):
                yield StageList(id="stages")
                yield BudgetGauge(id="budget")
                yield BlockedCalls(id="blocked")
            yield Transcript(id="transcript")
        yield Static("", id="run-hint", markup=False)
        yield PlanControls(id="controls", blink=self.app.blink)
        yield Footer()

    def on_mount(self) -> None:
        view = self.app.view_of(self.run_dir)
        if view is not None:
            self.show(view)
        self.set_interval(1.0, self._tick)

    def _tick(self) -> None:
        if self.view is not None and self.view.live:
            self.query_one(BudgetGauge).update_view(self.view, self.app.clock())

    def on_run_updated(self, message: RunUpdated) -> None:
        if message.run_dir == self.run_dir:
            self.show(message.view)

    def show(self, view: RunView) -> None:
        first = self.view is None
        self.view = view
        title = title_text(view, self.size.width or 120)
        hint = hint_text(view)
        if (title.plain, hint) != self._header:  # unchanged text: no refresh, no layout
            self._header = (title.plain, hint)
            self.query_one("#run-title", Static).update(title)
            self.query_one("#run-hint", Static).update(hint)
        self.query_one(StageList).update_view(view)
        self.query_one(BudgetGauge).update_view(view, self.app.clock())
        self.query_one(Transcript).update_view(view)
        self.query_one(BlockedCalls).update_view(view)
        self.set_class(view.needs_input, "-needs-input")
        self._announce(view, first)
        self._ask(view)

    # -- notifications -------------------------------------------------------------------
    def _announce(self, view: RunView, first: bool) -> None:
        last = max((n.seq for n in view.notices), default=0)
        if first or self._seen_notice_seq is None:
            self._seen_notice_seq = last  # what was there on open is history, not news
            self._needed_input = view.needs_input
            return
        fresh = [n for n in view.notices if n.seq > self._seen_notice_seq and n.kind in NOTIFY]
        if len(fresh) > MAX_TOASTS_PER_BATCH:  # a burst: one summary, the transcript has them all
            self.app.announce(f"{len(fresh)} new notices — see the transcript", severity="warning", bell=True)
            fresh = []
        for notice in fresh:
            severity, bell = NOTIFY[notice.kind]
            if notice.kind == "completion" and view.status == "paused":
                bell = True  # the plan now waits for the operator
            first_line = notice.text.splitlines()[0] if notice.text else ""
            self.app.announce(first_line, severity=severity, bell=bell)
        self._seen_notice_seq = max(self._seen_notice_seq, last)
        self._needed_input = view.needs_input

    def _ask(self, view: RunView) -> None:
        from tui.screens.permission import PermissionScreen

        for ask in view.pending_asks:
            if ask.request_id in self._asked:
                continue
            self._asked.add(ask.request_id)
            self.app.announce(f"Permission needed: {ask.title}", severity="warning", bell=True)

            def answered(decision: str | None, request_id: str = ask.request_id) -> None:
                if decision in ("allow", "deny"):
                    self.app.act(self.run_dir, "permission", request_id, decision, on_verdict=self._verdict_for)

            self.app.push_screen(PermissionScreen(ask), answered)

    # -- actions ----------------------------------------------------------------------------
    def _act(self, action: str, *args: str) -> None:
        self.app.act(self.run_dir, action, *args, on_verdict=self._verdict_for)

    def _verdict_for(self, action: str, verdict: Verdict, from_journal: bool) -> None:
        if not from_journal:
            # No live controller recorded it: show the answer in the transcript ourselves.
            row = Row(self._local_key, "local", verdict.text, None, verdict.kind, action)
            self._local_key -= 1
            self.query_one(Transcript).add_local(row)

    def action_go(self) -> None:
        self._act("go")

    def action_go_all(self) -> None:
        self._act("go_all")

    def action_cancel_plan(self) -> None:
        self._act("cancel")

    def action_guidance(self) -> None:
        self.query_one("#guidance", Input).focus()

    def action_blocked(self) -> None:
        self.query_one("#blocked-table", DataTable).focus()

    def action_back(self) -> None:
        focused = self.focused
        if isinstance(focused, Input):
            self.set_focus(None)
            return
        self.app.action_overview()

    def on_plan_controls_action(self, message: PlanControls.Action) -> None:
        if message.action == "guidance":
            self._act("guidance", message.text)
            self.set_focus(None)
        elif message.action in ("go", "go_all", "cancel"):
            self._act(message.action)
