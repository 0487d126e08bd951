"""Helpers for driving the app: real in-process runs, and deterministic journals for snapshots."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from core import events as ev
from core.journal import JOURNAL_NAME, JournalWriter
from core.plan import Plan
from core.policy import Policy
from core.runner import open_run
from core.tracker import Budgets
from tests.agents.harness import options
from tui.app import PlandeckApp


def in_process_app(
    tmp: Path, plan: Plan, scenario: Path, *, budgets: Budgets = Budgets(30, 600), policy: Policy | None = None
) -> PlandeckApp:
    opts = options(tmp, scenario, budgets=budgets, policy=policy)

    async def opener():
        return await open_run(plan, opts)

    return PlandeckApp(runs_root=tmp / "runs", opener=opener, blink=False, watch=False)


async def until(pilot, condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await pilot.pause(0.05)


def current_view(app: PlandeckApp):
    screen = app.screen
    return getattr(screen, "view", None)


def transcript_texts(app: PlandeckApp) -> list[str]:
    from tui.widgets.recovery_card import RecoveryCard
    from tui.widgets.transcript import TranscriptRow

    out = []
    for widget in app.screen.query("TranscriptRow, RecoveryCard"):
        if isinstance(widget, TranscriptRow):
            out.append(widget.row.text)
        elif isinstance(widget, RecoveryCard):
            out.append(widget.text)
    return out


# -- deterministic journals ------------------------------------------------------------------

T0 = 1_796_000_000.0


class JournalBuilder:
    """Writes a journal with a controlled wall clock: what a run would have written."""

    def __init__(self, runs_root: Path, run_id: str, *, goal: str, stages: list[str], agent: str = "claude") -> None:
        self.run_dir = runs_root / run_id
        self.run_dir.mkdir(parents=True, mode=0o700)
        self.t = T0
        self.w = JournalWriter(self.run_dir / JOURNAL_NAME, wall=lambda: self.t)
        self.stages = stages
        self.add(
            ev.RunStarted(
                run_id=run_id,
                goal=goal,
                agent=agent,
                source="file",
                workspace="/work/project",
                pid=4242,
                stages=tuple(ev.StageSpec(i + 1, t, (f"{t.lower()} carefully",)) for i, t in enumerate(stages)),
            )
        )
        self.add(ev.PlanState(state="awaiting_go", auto_run=False))

    def add(self, event: ev.Event, after: float = 0.0) -> JournalBuilder:
        self.t += after
        self.w.append(event)
        return self

    def connect(self) -> JournalBuilder:
        self.add(
            ev.AgentConnected(
                name="@agentclientprotocol/claude-agent-acp",
                version="0.101.0",
                protocol_version=1,
                steering=False,
                modes=("default", "auto"),
                mode="default",
            )
        )
        return self

    def budgets(self, stage: float = 1800, plan: float = 7200) -> JournalBuilder:
        return self.add(
            ev.BudgetsSet(stage_timeout_s=stage, plan_budget_s=plan, max_rounds=3, max_escalations=2, source="config")
        )

    def go(self, auto: bool = False) -> JournalBuilder:
        action = "go_all" if auto else "go"
        text = "Go All: auto-run is running the remaining stages." if auto else "Go: Stage 1 is starting."
        self.add(ev.ActionTaken(action=action, verdict="accepted", text=text, origin="ui"))
        return self.add(ev.PlanState(state="running", auto_run=auto))

    def stage(self, n: int, *texts: str, rounds: int = 1, complete: bool = True, after: float = 10.0) -> JournalBuilder:
        title = self.stages[n - 1]
        if n == 1:
            self.add(ev.PlanClockStarted())
        self.add(ev.StageStarted(n=n, title=title))
        self.add(ev.StageState(n=n, state="running", rounds=0, escalations=0))
        self.add(ev.TurnStarted(stage=n, kind="stage", text=f"Goal … Execute Stage {n} of {len(self.stages)} now."))
        for text in texts:
            self.add(ev.AgentText(stage=n, text=text), after=after / max(1, len(texts)))
        if complete:
            self.add(ev.TurnEnded(stage=n, stop_reason="end_turn", rounds=rounds, answered=True, blocked=0))
            path = str(self.run_dir / f"stage_{n}_result.md")
            (self.run_dir / f"stage_{n}_result.md").write_text("".join(texts) + "\n")
            self.add(ev.StageResult(n=n, path=path, bytes=len("".join(texts))))
            self.add(ev.StageState(n=n, state="completed", rounds=rounds, escalations=0))
        return self

    def close(self, code: int = 0) -> Path:
        self.w.close()
        return self.run_dir

    def leave_open(self) -> Path:
        self.w.close()  # the file stays without a run_closed event, as a killed process leaves it
        return self.run_dir


def run_app(
    runs_root: Path, run_dir: Path | None = None, *, live: bool = True, start: str | None = None, **kw
) -> PlandeckApp:
    return PlandeckApp(
        runs_root=runs_root,
        start=start or ("run" if run_dir else "overview"),
        run_dir=run_dir,
        clock=lambda: T0 + 600,
        watch=False,
        blink=False,
        probe=lambda _p: live,
        **kw,
    )
