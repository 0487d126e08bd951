"""PlanController: owns one live plan and runs its stage loop (SPEC §2–§4, §6).

The controller holds the plan's shape in memory, the tracker and the agent
session, and is the only writer of its run's journal. Operators drive it
through the port methods (`go`, `go_all`, `cancel`, `guidance`, `permission`),
each of which answers with a Verdict and records it — no action is silent.

The stage loop applies its gates in this order on every entry and stage:

    cancelled latch → dead plan → tracker + budgets → stop check →
    plan watchdog (auto-run) → 75 % warning (auto-run, latched) →
    enter stage → run turn(s) under the stage timeout → capture result →
    round cap (auto-run) → pause with a Go row (attended) or continue.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core import audit, notices
from core import events as ev
from core.journal import JournalWriter
from core.plan import Plan
from core.recovery import build_refusal_recovery_prompt, should_queue
from core.redact import redact
from core.results import first_line_of, previous_results_block, result_path, write_result
from core.tracker import MAX_STAGE_ESCALATIONS, MAX_STAGE_ROUNDS, Budgets, StageTracker
from core.verdict import Verdict

TERMINAL_STATES = frozenset({"completed", "failed", "cancelled"})
MAX_GUIDANCE_CHARS = 8000
PROMPT_JOURNAL_CAP = 64 * 1024
CONTINUE_PROMPT = "Continue from exactly where you stopped; do not repeat what you already wrote."
EXIT_CODES = {"completed": 0, "halted": 3, "failed": 4, "cancelled": 130}


@dataclass(frozen=True, slots=True)
class _Turn:
    kind: str
    text: str


class _Timeout:
    pass


TIMEOUT = _Timeout()

SessionFactory = Callable[[Callable[[ev.Event], None]], Awaitable[Any]]


class PlanController:
    def __init__(
        self,
        *,
        plan: Plan,
        run_dir: Path,
        run_id: str,
        journal: JournalWriter,
        session_factory: SessionFactory,
        budgets: Budgets | None = None,
        budget_loader: Callable[[], Budgets] | None = None,
        max_rounds: int = MAX_STAGE_ROUNDS,
        max_escalations: int = MAX_STAGE_ESCALATIONS,
        clock: Callable[[], float] = time.monotonic,
        observer: Any = None,
        empty_reason: str = "its planning turn produced no stages",
        cancel_grace: float = 5.0,
    ) -> None:
        self.plan = plan
        self.run_dir = str(run_dir)
        self.run_id = run_id
        self.journal = journal
        self._session_factory = session_factory
        self._explicit_budgets = budgets
        self._budget_loader = budget_loader
        self.max_rounds = max_rounds
        self.max_escalations = max_escalations
        self._clock = clock
        self.observer = observer
        self._empty_reason = empty_reason
        self._cancel_grace = cancel_grace
        self.tracker: StageTracker | None = None
        self.session: Any = None
        self.state = "awaiting_go"
        self.auto_run = False
        self.failure_kind: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._cancelled = False
        self._pending_go = False
        self._pending_go_all = False
        self._pending_guidance: deque[str] = deque()
        self._completed: set[int] = set()
        self._current: int | None = None
        self._stage_parts: dict[int, list[str]] = {}
        self._turn_kinds: dict[int, list[str]] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self.config_reads = 0
        self._budgets_announced = False

    # -- journal helpers ----------------------------------------------------------------
    def emit(self, event: ev.Event) -> None:
        if self.journal.closed:
            return
        self.journal.append(event)
        if isinstance(event, ev.BlockedCall):
            self._audit("tool_call_blocked", "policy_deny", "refused", event.stage)

    def _audit(self, event_type: str, operation: str, outcome: str, stage: int | None = None) -> None:
        with contextlib.suppress(OSError):
            audit.append(self.run_dir, audit.record(event_type, operation, outcome, run_id=self.run_id, stage=stage))  # type: ignore[arg-type]

    def _notice(self, kind: str, text: str, stage: int | None = None) -> None:
        self.emit(ev.Notice(kind=kind, text=text, stage=stage))  # type: ignore[arg-type]

    def _set_state(self, state: str) -> None:
        self.state = state
        self.emit(ev.PlanState(state=state, auto_run=self.auto_run, stage=self._current))  # type: ignore[arg-type]

    def _verdict(self, action: str, kind: str, text: str, origin: str) -> Verdict:
        self.emit(ev.ActionTaken(action=action, verdict=kind, text=text, origin=origin[:40]))  # type: ignore[arg-type]
        return Verdict(kind, text)  # type: ignore[arg-type]

    def open(self, *, agent: str, workspace: str, source: str, plan_issues: tuple[str, ...] = ()) -> None:
        """Announce the run: its plan (for display only) and that it awaits Go."""
        self.emit(
            ev.RunStarted(
                run_id=self.run_id,
                goal=self.plan.goal,
                agent=agent,
                stages=tuple(ev.StageSpec(s.n, s.title, s.tasks) for s in self.plan.stages),
                source=source,  # type: ignore[arg-type]
                workspace=workspace,
                pid=os.getpid(),
                plan_issues=plan_issues,
            )
        )
        self._announce_explicit_budgets()
        self._set_state("awaiting_go")

    def _announce_explicit_budgets(self) -> None:
        """Explicit budgets are known before any Go: show them (no tracker, no config read)."""
        b = self._explicit_budgets
        if b is not None:
            self._announce_budgets(b.stage_timeout_seconds, b.max_plan_duration_seconds, "explicit")

    def _announce_budgets(self, stage_timeout: float, plan_budget: float, source: str) -> None:
        """Journal the budgets once and hand them to the observer as its limits."""
        self._budgets_announced = True
        self.emit(
            ev.BudgetsSet(
                stage_timeout_s=stage_timeout,
                plan_budget_s=plan_budget,
                max_rounds=self.max_rounds,
                max_escalations=self.max_escalations,
                source=source,  # type: ignore[arg-type]
            )
        )
        if self.observer is not None:
            self.observer.bind_limits(
                {
                    "stage_timeout_seconds": stage_timeout,
                    "plan_budget_seconds": plan_budget,
                    "max_rounds": self.max_rounds,
                }
            )

    def plan_ready(self, issues: tuple[str, ...] = ()) -> None:
        """After a planning turn: announce the parsed stages (possibly none)."""
        self.emit(
            ev.PlanReady(stages=tuple(ev.StageSpec(s.n, s.title, s.tasks) for s in self.plan.stages), issues=issues)
        )
        self._announce_explicit_budgets()
        self._set_state("awaiting_go")

    # -- properties ---------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def exit_code(self) -> int | None:
        return EXIT_CODES.get(self.state)

    async def wait_idle(self) -> None:
        await self._idle.wait()

    def _next_stage(self) -> int | None:
        return next((s.n for s in self.plan.stages if s.n not in self._completed), None)

    # -- the port ----------------------------------------------------------------------------------
    def _refused_state(self, action: str, origin: str) -> Verdict | None:
        """The refusals every action shares: cancelled, dead plan, finished plan."""
        if self._cancelled:
            self._notice("refusal", notices.already_cancelled())
            return self._verdict(action, "refused", notices.already_cancelled(), origin)
        if not self.plan.stages:
            return self._refuse_dead(action, origin)
        if self.state == "completed":
            return self._verdict(action, "refused", "The plan is already complete; nothing was run.", origin)
        if self.state == "failed":
            return self._verdict(
                action,
                "refused",
                f"The plan failed at Stage {self._current}; ask for a new plan. Nothing was run.",
                origin,
            )
        return None

    def _refuse_dead(self, action: str, origin: str) -> Verdict:
        """A plan with no shape: refuse out loud (SPEC §6). No tracker, no config read."""
        self._mark("review_preflight")
        text = notices.dead_plan(self._empty_reason, self.run_dir)
        self._notice("refusal", text)
        self._audit("auto_run_plan_expired", "plan_shape_absent", "refused")
        self.failure_kind = "policy_refused"
        return self._verdict(action, "refused", text, origin)

    def go(self, origin: str = "local") -> Verdict:
        refused = self._refused_state("go", origin)
        if refused:
            return refused
        if self.running:
            if self.auto_run or self._pending_go_all:
                return self._verdict("go", "refused", "Auto-run is already running the remaining stages.", origin)
            if self._pending_go:
                return self._verdict("go", "queued", "Go is already queued.", origin)
            self._pending_go = True
            return self._verdict(
                "go", "queued", f"Go queued: the next stage starts when Stage {self._current} finishes.", origin
            )
        n = self._next_stage()
        self._audit("stage_approved", "go", "approved", n)
        self._start(auto_run=False)
        return self._verdict("go", "accepted", f"Go: Stage {n} is starting.", origin)

    def go_all(self, origin: str = "local") -> Verdict:
        refused = self._refused_state("go_all", origin)
        if refused:
            return refused
        if self.running:
            if self.auto_run or self._pending_go_all:
                return self._verdict("go_all", "queued", "Auto-run is already on.", origin)
            self._pending_go_all = True
            self._audit("auto_run_enabled", "go_all", "approved", self._current)
            return self._verdict(
                "go_all", "queued", f"Go All queued: auto-run takes over when Stage {self._current} finishes.", origin
            )
        self._audit("auto_run_enabled", "go_all", "approved", self._next_stage())
        self._start(auto_run=True)
        return self._verdict("go_all", "accepted", "Go All: auto-run is running the remaining stages.", origin)

    def cancel(self, origin: str = "local") -> Verdict:
        if self._cancelled:
            return self._verdict("cancel", "refused", "The plan is already cancelled.", origin)
        if self.state in ("completed", "failed"):
            return self._verdict("cancel", "refused", f"The plan already {self.state}; nothing to cancel.", origin)
        self._cancelled = True
        self.auto_run = False
        self._pending_go = self._pending_go_all = False
        self._pending_guidance.clear()
        if self.tracker is not None:
            self.tracker.stop()
        self.failure_kind = "cancelled"
        self._notice("cancel", notices.PLAN_CANCELLED, self._current)
        self._audit("plan_cancelled", "cancel", "stopped", self._current)
        self._set_state("cancelled")
        if self.running and self.session is not None:
            asyncio.get_running_loop().create_task(self._cancel_turn(), name="plandeck.cancel")
        return self._verdict("cancel", "accepted", "Plan cancelled.", origin)

    def guidance(self, text: str, origin: str = "local") -> Verdict:
        text = text.strip()
        if not text:
            return self._verdict("guidance", "refused", "Guidance is empty.", origin)
        if len(text) > MAX_GUIDANCE_CHARS:
            return self._verdict("guidance", "refused", f"Guidance is over {MAX_GUIDANCE_CHARS} characters.", origin)
        refused = self._refused_state("guidance", origin)
        if refused:
            return refused
        if self.running:
            self._pending_guidance.append(text)
            self._audit("stage_guidance", "guidance", "approved", self._current)
            return self._verdict(
                "guidance", "queued", f"Guidance queued: it goes to Stage {self._current} as its next turn.", origin
            )
        if self._current is None:
            return self._verdict(
                "guidance",
                "refused",
                "No stage has run yet — press Go first; guidance goes to the current stage.",
                origin,
            )
        self._audit("stage_guidance", "guidance", "approved", self._current)
        self._start(auto_run=False, guidance=text)
        return self._verdict("guidance", "accepted", f"Guidance sent to Stage {self._current}.", origin)

    def permission(self, request_id: str, decision: str, origin: str = "local") -> Verdict:
        action = "allow" if decision == "allow" else "deny"
        if decision not in ("allow", "deny"):
            return self._verdict(action, "refused", f"Unknown decision {decision[:20]!r}; use allow or deny.", origin)
        session = self.session
        ask = None if session is None else session.pending_asks.get(request_id)
        if ask is None or not session.resolve_permission(request_id, decision):
            return self._verdict(action, "refused", f"No pending permission request {request_id[:40]!r}.", origin)
        self._audit(
            "permission_decided",
            f"operator_{decision}",
            "approved" if decision == "allow" else "refused",
            self._current,
        )
        word = "Allowed" if decision == "allow" else "Denied"
        return self._verdict(action, "accepted", f"{word}: {redact(ask.title)[:200]}", origin)

    # -- the loop ------------------------------------------------------------------------------------
    def _start(self, *, auto_run: bool, guidance: str | None = None) -> None:
        self.auto_run = auto_run
        self._idle.clear()
        self._set_state("running")
        self._task = asyncio.get_running_loop().create_task(self._run(guidance), name="plandeck.stage-loop")

    async def _run(self, guidance: str | None) -> None:
        try:
            if guidance is not None and self._current is not None:
                n = self._current
                await self._ensure_tracker()
                self._rearm_for_guidance(n)
                if await self._run_stage(n, first=_Turn("guidance", guidance)) != "continue":
                    return
            await self._stage_loop()
        except Exception as exc:  # a defect of ours: fail visibly, never hang "running"
            if not self._cancelled and not self.terminal:
                self._fail(self._current or 0, f"internal error ({type(exc).__name__})", "internal_error")
        finally:
            self._task = None
            self._idle.set()

    async def _ensure_tracker(self) -> None:
        if self.tracker is None:
            b = self._explicit_budgets
            self.tracker = StageTracker(
                clock=self._clock,
                stage_timeout_seconds=None if b is None else b.stage_timeout_seconds,
                max_plan_duration_seconds=None if b is None else b.max_plan_duration_seconds,
                max_rounds=self.max_rounds,
                max_escalations=self.max_escalations,
            )
        tracker = self.tracker
        if tracker.budgets_unset:
            loader = self._budget_loader or (lambda: Budgets())
            self.config_reads += 1
            await asyncio.to_thread(tracker.load_budgets, loader)
            self._announce_budgets(
                tracker.stage_timeout_seconds, tracker.max_plan_duration_seconds, tracker.budget_source
            )
        elif not self._budgets_announced:
            self._announce_budgets(
                tracker.stage_timeout_seconds, tracker.max_plan_duration_seconds, tracker.budget_source
            )

    def _mark(self, phase: str) -> None:
        if self.observer is not None:
            self.observer.mark(phase)

    async def _stage_loop(self) -> None:
        while True:
            if self._cancelled:  # 1. cancelled latch
                return
            if not self.plan.stages:  # 2. dead plan
                self._refuse_dead("go_all" if self.auto_run else "go", "loop")
                self._set_state("awaiting_go")
                return
            await self._ensure_tracker()  # 3. tracker + budgets
            tracker = self.tracker
            assert tracker is not None
            if tracker.stopped or self._cancelled:  # 4. stop check
                return
            n = self._next_stage()
            if n is None:
                await self._complete()
                return
            self._mark("review_preflight")
            if self.auto_run and tracker.plan_timed_out():  # 5. plan watchdog
                self._halt(
                    notices.plan_exceeded(tracker.max_plan_duration_seconds, tracker.plan_elapsed(), n),
                    ("auto_run_timeout", "plan_duration_exceeded"),
                    n,
                    "budget_exhausted",
                )
                return
            if self.auto_run and tracker.plan_warning_due():  # 6. 75 % warning (latched)
                self._notice(
                    "warning", notices.budget_warning(tracker.plan_elapsed(), tracker.max_plan_duration_seconds), n
                )
                self.emit(ev.BudgetWarned(elapsed_s=tracker.plan_elapsed(), budget_s=tracker.max_plan_duration_seconds))
                self._audit("auto_run_budget_warning", "plan_duration_warning", "approved", n)
            if await self._run_stage(n, enter=True) != "continue":  # 7–11
                return

    async def _ensure_session(self) -> Any:
        if self.session is None or self.session.returncode is not None:
            if self.session is not None:
                await self.session.close()
            self.session = await self._session_factory(self.emit)
        return self.session

    async def _run_stage(self, n: int, *, enter: bool = False, first: _Turn | None = None) -> str:
        """Steps 7–11 for stage n. Returns "continue" or "stop"."""
        tracker = self.tracker
        assert tracker is not None
        self._current = n
        stage = self.plan.stage(n)
        if enter:
            clock_was_started = tracker.plan_started
            tracker.start_stage(n)  # 7. enter: spends no round
            if not clock_was_started:
                self.emit(ev.PlanClockStarted())
            self.emit(ev.StageStarted(n=n, title=stage.title))
            self._mark("orchestration_context")
            first = _Turn("stage", await self._stage_prompt(n))
        self.emit(ev.StageState(n=n, state="running", rounds=tracker.rounds(n), escalations=tracker.escalations(n)))
        self._set_state("running")
        assert first is not None
        outcome = await self._turns(n, first)  # 8. turns under the stage timeout
        if self._cancelled:
            return "stop"
        if outcome == "timeout":
            self.emit(ev.StageState(n=n, state="halted", rounds=tracker.rounds(n), escalations=tracker.escalations(n)))
            self._halt(
                notices.stage_timed_out(n, tracker.stage_timeout_seconds),
                ("auto_run_timeout", "stage_timeout"),
                n,
                "deadline_exceeded",
            )
            return "stop"
        if outcome == "force_failed":
            self._force_fail(n)
            return "stop"
        if isinstance(outcome, tuple):
            self._fail(n, outcome[0], outcome[1])
            return "stop"
        self._mark("finalization")
        await self._capture(n)  # 9. capture result (before any cap can halt)
        self._completed.add(n)
        self.emit(ev.StageState(n=n, state="completed", rounds=tracker.rounds(n), escalations=tracker.escalations(n)))
        self._mark("identity_postflight")
        if self.auto_run and tracker.round_limit_reached(n):  # 10. round cap (auto-run only)
            self._halt(
                notices.round_cap(n, tracker.max_rounds, notices.rounds_breakdown(self._turn_kinds.get(n, []))),
                ("auto_run_round_cap", "stage_round_cap"),
                n,
                "budget_exhausted",
            )
            return "stop"
        if self._pending_go_all:  # a Go All queued during the stage takes effect at the boundary
            self._pending_go_all = False
            self.auto_run = True
            self._set_state("running")
        nxt = self._next_stage()
        if nxt is None:
            await self._complete()
            return "stop"
        if self.auto_run:
            return "continue"
        if self._pending_go:
            self._pending_go = False
            return "continue"
        self._notice("completion", notices.stage_complete(n, nxt, self.plan.stage(nxt).title), n)  # 11. Go row
        self._set_state("paused")
        return "stop"

    async def _turns(self, n: int, first: _Turn) -> Any:
        """Run a stage's turns: the first, then queued continuations and guidance.

        Returns "completed", "timeout", "force_failed", "cancelled" or a
        (reason, failure_kind) tuple for a failed stage.
        """
        tracker = self.tracker
        assert tracker is not None
        queue: deque[_Turn] = deque([first])
        try:
            session = await self._ensure_session()
        except Exception as exc:
            return (_reason(exc), getattr(exc, "kind", "internal_error"))
        while queue:
            if self._cancelled:
                return "cancelled"
            turn = queue.popleft()
            self.emit(ev.TurnStarted(stage=n, kind=turn.kind, text=redact(turn.text)[:PROMPT_JOURNAL_CAP]))  # type: ignore[arg-type]
            try:
                result = await self._prompt_with_deadline(session, n, turn.text)
            except Exception as exc:
                if self._cancelled:
                    return "cancelled"
                self.emit(
                    ev.TurnEnded(stage=n, stop_reason="error", rounds=tracker.rounds(n), answered=False, blocked=0)
                )
                return (_reason(exc), getattr(exc, "kind", "internal_error"))
            if result is TIMEOUT:
                self.emit(
                    ev.TurnEnded(stage=n, stop_reason="timeout", rounds=tracker.rounds(n), answered=False, blocked=0)
                )
                return "timeout"
            if self._cancelled:
                return "cancelled"
            at_cap = tracker.record_round(n)  # rounds are recorded when a turn completes
            if self.observer is not None:
                self.observer.round_completed()
            self._turn_kinds.setdefault(n, []).append(turn.kind)
            parts = self._stage_parts.setdefault(n, [])
            if parts and result.text_parts:
                parts.append("\n\n")  # keep turns apart in the result
            parts.extend(result.text_parts)
            stop = result.stop_reason
            self.emit(
                ev.TurnEnded(
                    stage=n,
                    stop_reason=stop if stop in _STOP_REASONS else "error",  # type: ignore[arg-type]
                    rounds=tracker.rounds(n),
                    answered=result.answered,
                    blocked=len(result.refusals),
                )
            )
            if stop in ("refusal", "max_turn_requests"):
                return (f"the agent ended its turn with stop reason {stop!r}", "policy_refused")
            if stop not in ("end_turn", "max_tokens", "cancelled"):
                return (f"the agent ended its turn with an unknown stop reason {stop[:40]!r}", "protocol_error")
            if stop == "cancelled" and not result.refusals:
                return ("the agent cancelled its own turn", "protocol_error")
            if at_cap and tracker.is_force_failed(n):
                return "force_failed"
            # Automatic continuations stop once the stage is at its cap. The
            # decision uses the operator's live stop signal, never stopReason.
            queue_recovery = result.refusals and should_queue(
                len(result.refusals),
                operator_stopped=self._cancelled or tracker.stopped,
                steering_confirmed=result.steering_confirmed,
                steering_pending=result.steering_pending,
            )
            if queue_recovery and not at_cap:
                body = build_refusal_recovery_prompt(result.refusals, answered=result.answered)
                self.emit(
                    ev.RecoveryQueued(stage=n, answered=result.answered, blocked_count=len(result.refusals), body=body)
                )
                queue.append(_Turn("recovery", body))
            elif stop == "max_tokens" and not at_cap:
                queue.append(_Turn("continuation", CONTINUE_PROMPT))
            if not queue and self._pending_guidance:
                text = self._pending_guidance.popleft()
                self._rearm_for_guidance(n)
                queue.append(_Turn("guidance", text))
        return "completed"

    def _rearm_for_guidance(self, n: int) -> None:
        tracker = self.tracker
        assert tracker is not None
        if tracker.reset_after_guidance(n):
            esc = tracker.escalations(n)
            self.emit(ev.StageState(n=n, state="running", rounds=0, escalations=esc))
            self._notice(
                "guidance", f"Stage {n} re-armed by guidance (escalation {esc} of {tracker.max_escalations}).", n
            )

    async def _prompt_with_deadline(self, session: Any, n: int, text: str) -> Any:
        tracker = self.tracker
        assert tracker is not None
        task = asyncio.get_running_loop().create_task(session.prompt(text, stage=n))
        try:
            done, _ = await asyncio.wait({task}, timeout=tracker.stage_remaining())
        except asyncio.CancelledError:
            task.cancel()
            raise
        if task in done:
            return task.result()
        # The stage timeout is enforced during the turn: cancel it, then make sure it ends.
        await session.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(task), self._cancel_grace)
        except Exception:
            await session.kill()
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        return TIMEOUT

    async def _cancel_turn(self) -> None:
        session = self.session
        if session is None:
            return
        await session.cancel()
        task = self._task
        if task is None:
            return
        done, _ = await asyncio.wait({task}, timeout=self._cancel_grace)
        if not done:
            await session.kill()

    async def _stage_prompt(self, n: int) -> str:
        plan = self.plan
        stage = plan.stage(n)
        previous = await asyncio.to_thread(previous_results_block, self.run_dir, sorted(self._completed))
        status = []
        for st in plan.stages:
            word = "completed" if st.n in self._completed else ("execute now" if st.n == n else "pending")
            status.append(f"  Stage {st.n}: {st.title} — {word}")
        tasks = "\n".join(f"  - {t}" for t in stage.tasks) or "  (no task list: use the title)"
        parts = [
            f"Goal: {plan.goal}",
            "Plan status:\n" + "\n".join(status),
        ]
        if previous:
            parts.append("Previous stage results:\n" + previous)
        parts.append(f"Current stage — Stage {n} of {plan.total}: {stage.title}\nTasks:\n{tasks}")
        parts.append(
            f"Execute Stage {n} of {plan.total} now. Work only on this stage. When it is done, end with a short "
            "summary of what you did; its first line is kept as the stage's result headline."
        )
        return "\n\n".join(parts)

    async def _capture(self, n: int) -> None:
        parts = tuple(self._stage_parts.get(n, ()))  # immutable, collected on the loop
        path, size = await asyncio.to_thread(write_result, self.run_dir, n, parts)  # redaction + I/O off the loop
        self.emit(ev.StageResult(n=n, path=path, bytes=size))

    async def _complete(self) -> None:
        lines = []
        for st in self.plan.stages:
            first = await asyncio.to_thread(first_line_of, result_path(self.run_dir, st.n))
            lines.append((st.n, st.title, first))
        self.auto_run = False
        self._notice("completion", notices.all_complete(self.plan.total, lines))
        self._audit("auto_run_completed", "auto_run_terminal", "completed")
        self._set_state("completed")

    def _halt(self, text: str, pair: tuple[str, str], n: int, failure_kind: str) -> None:
        self.auto_run = False
        self._pending_go_all = self._pending_go = False
        self.failure_kind = failure_kind
        self._notice("halt", text, n)
        self._audit(pair[0], pair[1], "stopped", n)
        self._set_state("halted")

    def _fail(self, n: int, reason: str, failure_kind: str) -> None:
        self.auto_run = False
        self.failure_kind = failure_kind
        if self.tracker is not None:
            self.emit(
                ev.StageState(
                    n=n, state="failed", rounds=self.tracker.rounds(n), escalations=self.tracker.escalations(n)
                )
            )
        self._notice("failure", notices.stage_failed(n, reason), n)
        self._audit("auto_run_stage_error", "stage_error", "error", n)
        self._set_state("failed")

    def _force_fail(self, n: int) -> None:
        tracker = self.tracker
        assert tracker is not None
        self.auto_run = False
        self.failure_kind = "budget_exhausted"
        self.emit(ev.StageState(n=n, state="failed", rounds=tracker.rounds(n), escalations=tracker.escalations(n)))
        self._notice("failure", notices.stage_force_failed(n, tracker.escalations(n)), n)
        self._audit("stage_force_failed", "escalation_cap", "error", n)
        self._set_state("failed")

    # -- shutdown --------------------------------------------------------------------------------
    async def close(self, reason: str = "the controller stopped") -> None:
        """Stop whatever runs, close the agent, and end the journal."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        if self.session is not None:
            with contextlib.suppress(Exception):
                await self.session.close()
        code = self.exit_code
        self.emit(ev.RunClosed(exit_code=code if code is not None else 0, reason=reason[:200]))
        self.journal.close()


_STOP_REASONS = frozenset({"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"})


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return redact(text)[:300]
