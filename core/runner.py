"""Starting a run: its private directory, journal, controller, agent and control socket.

Used by the headless CLI, the TUI and the demo alike, so every run is built the
same way and is attachable from another process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core import events as ev
from core.agents.registry import AgentSpec
from core.control import ControlServer
from core.controller import PlanController
from core.journal import JOURNAL_NAME, JournalWriter
from core.plan import Plan, parse_plan_text, planning_prompt
from core.policy import Policy
from core.redact import redact
from core.tracker import MAX_STAGE_ESCALATIONS, MAX_STAGE_ROUNDS, Budgets


def new_run_id(wall: float | None = None) -> str:
    stamp = datetime.fromtimestamp(time.time() if wall is None else wall, UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(2)}"


def create_run_dir(runs_dir: Path) -> tuple[Path, str]:
    """A new private (0700) run directory under runs_dir."""
    runs_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    for _ in range(20):
        run_id = new_run_id()
        run_dir = runs_dir / run_id
        try:
            os.mkdir(run_dir, 0o700)
        except FileExistsError:
            continue
        return run_dir.resolve(), run_id
    raise OSError("could not create a unique run directory")


@dataclass
class RunOptions:
    agent: AgentSpec
    policy: Policy
    workspace: Path
    runs_dir: Path
    budgets: Budgets | None = None
    budget_loader: Callable[[], Budgets] | None = None
    max_rounds: int = MAX_STAGE_ROUNDS
    max_escalations: int = MAX_STAGE_ESCALATIONS
    observer: Any = None
    serve: bool = True
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time


@dataclass
class RunHandle:
    run_dir: Path
    run_id: str
    journal: JournalWriter
    controller: PlanController
    server: ControlServer | None = None
    state_changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def close(self, reason: str = "the controller stopped") -> None:
        if self.server is not None:
            await self.server.close()
            self.server = None
        await self.controller.close(reason)

    async def wait(self, until: Callable[[PlanController], bool]) -> None:
        while not until(self.controller):
            self.state_changed.clear()
            if until(self.controller):
                return
            await self.state_changed.wait()


def _session_factory(opts: RunOptions, run_dir: Path):
    from core.agents.session import AgentSession  # importing acp costs ~0.4 s: only when a run starts

    async def factory(emit: Callable[[ev.Event], None]) -> AgentSession:
        session = AgentSession(
            opts.agent,
            workspace=opts.workspace,
            policy=opts.policy,
            emit=emit,
            log_dir=run_dir,
            observer=opts.observer,
            clock=opts.clock,
        )
        try:
            await session.start()
        except BaseException:
            await session.close()
            raise
        return session

    return factory


async def _prepare(opts: RunOptions) -> tuple[Path, str, JournalWriter]:
    if opts.observer is not None:
        opts.observer.mark("capture_preparation")
    opts.workspace.mkdir(parents=True, exist_ok=True)
    run_dir, run_id = create_run_dir(opts.runs_dir)
    journal = JournalWriter(run_dir / JOURNAL_NAME, wall=opts.wall)
    return run_dir, run_id, journal


async def _finish(handle: RunHandle, opts: RunOptions) -> RunHandle:
    handle.journal.subscribe(
        lambda e: handle.state_changed.set() if isinstance(e, ev.PlanState | ev.RunClosed) else None
    )
    if opts.serve:
        handle.server = ControlServer(handle.run_dir, handle.controller)
        await handle.server.start()
    return handle


def _controller(
    plan: Plan, run_dir: Path, run_id: str, journal: JournalWriter, opts: RunOptions, **extra: Any
) -> PlanController:
    return PlanController(
        plan=plan,
        run_dir=run_dir,
        run_id=run_id,
        journal=journal,
        session_factory=_session_factory(opts, run_dir),
        budgets=opts.budgets,
        budget_loader=opts.budget_loader,
        max_rounds=opts.max_rounds,
        max_escalations=opts.max_escalations,
        clock=opts.clock,
        observer=opts.observer,
        cancel_grace=opts.agent.timeouts.cancel_grace,
        **extra,
    )


async def open_run(plan: Plan, opts: RunOptions, *, source: str = "file") -> RunHandle:
    """A run for a plan we already have (a plan file)."""
    run_dir, run_id, journal = await _prepare(opts)
    controller = _controller(plan, run_dir, run_id, journal, opts)
    controller.open(agent=opts.agent.name, workspace=str(opts.workspace.resolve()), source=source)
    return await _finish(RunHandle(run_dir, run_id, journal, controller), opts)


async def open_planned_run(goal: str, opts: RunOptions) -> RunHandle:
    """A planning turn first; the parsed plan (possibly with no stages) is then run.

    A planning turn that parses zero stages leaves a plan with no shape: Go on
    it is refused exactly like a dead plan (SPEC §1.4).
    """
    run_dir, run_id, journal = await _prepare(opts)
    journal.append(
        ev.RunStarted(
            run_id=run_id,
            goal=goal,
            agent=opts.agent.name,
            stages=(),
            source="planning",
            workspace=str(opts.workspace.resolve()),
            pid=os.getpid(),
        )
    )
    journal.append(ev.PlanState(state="running", auto_run=False, stage=None))
    factory = _session_factory(opts, run_dir)
    session = None
    text = ""
    failure: str | None = None
    try:
        session = await factory(journal.append)
        prompt = planning_prompt(goal)
        journal.append(ev.TurnStarted(stage=0, kind="planning", text=redact(prompt)))
        outcome = await session.prompt(prompt, stage=0)
        journal.append(
            ev.TurnEnded(
                stage=0,
                stop_reason=outcome.stop_reason
                if outcome.stop_reason in ("end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled")
                else "error",
                rounds=0,
                answered=outcome.answered,
                blocked=len(outcome.refusals),
            )
        )  # type: ignore[arg-type]
        text = "".join(outcome.text_parts)
    except Exception as exc:
        failure = redact(str(exc))[:300]
    parsed = parse_plan_text(text)
    plan = parsed.to_plan()
    plan = Plan(plan.goal or goal, plan.stages)
    why = "its planning turn produced no stages" if failure is None else f"its planning turn failed: {failure}"
    controller = _controller(plan, run_dir, run_id, journal, opts, empty_reason=why)
    controller.session = session
    issues = parsed.issues if failure is None else (*parsed.issues, f"planning turn failed: {failure}")
    controller.plan_ready(tuple(issues))
    return await _finish(RunHandle(run_dir, run_id, journal, controller), opts)


async def shutdown(handle: RunHandle, reason: str) -> None:
    with contextlib.suppress(Exception):
        await handle.close(reason)
