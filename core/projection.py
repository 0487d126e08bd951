"""The projection: a pure fold of journal events into an immutable RunView.

One rendering path for every run: in-process (events from the controller's
subscription), attached (events tailed from another process's journal) and
finished (a journal read from disk). `Folder.apply` is the hot path of a replay;
`Folder.view()` builds an immutable snapshot, reusing unchanged rows.

Persisted data is untrusted: a result path is shown only if it is exactly the
path the writer produces for that run and stage (SPEC §7.3), and every list
the view carries is bounded (the journal keeps everything).
"""

from __future__ import annotations

import gc
import itertools
import time
from collections.abc import Iterable
from pathlib import Path

import msgspec

from core import events as ev
from core.journal import Defect, JournalSource, TornTail
from core.notices import stage_separator
from core.plan import Plan, Stage, render_plan_text
from core.results import confine_result_path

TRANSCRIPT_WINDOW = 500
MAX_BLOCKED = 1000
MAX_CARDS = 200
MAX_NOTICES = 1000
MAX_DEFECTS = 1000
TERMINAL = frozenset({"completed", "failed", "cancelled"})


class StageView(msgspec.Struct, frozen=True):
    n: int
    title: str
    tasks: tuple[str, ...]
    status: str
    rounds: int
    escalations: int
    result_path: str | None
    result_bytes: int | None = None


class BudgetView(msgspec.Struct, frozen=True):
    elapsed_seconds: float | None
    budget_seconds: float | None
    warned: bool
    stage_timeout_seconds: float | None = None
    stage_elapsed_seconds: float | None = None
    started_at: float | None = None
    stage_started_at: float | None = None


class BlockedView(msgspec.Struct, frozen=True):
    stage: int
    title: str
    reason: str
    klass: str | None
    pattern: str
    kind: str = ""
    input: str = ""
    cause: str = ""
    rule_id: str | None = None
    origin: str = "permission"
    ts: float = 0.0


class CardView(msgspec.Struct, frozen=True):
    stage: int
    answered: bool
    blocked_count: int
    body: str
    seq: int = 0


class NoticeView(msgspec.Struct, frozen=True):
    kind: str
    text: str
    stage: int | None = None
    seq: int = 0


class DefectView(msgspec.Struct, frozen=True):
    line: int
    reason: str


class AskView(msgspec.Struct, frozen=True):
    request_id: str
    stage: int
    title: str
    kind: str
    input: str
    rule: str


class Row(msgspec.Struct, frozen=True):
    """One transcript row. `key` is stable across snapshots (the seq that made it)."""

    key: int
    kind: str  # separator agent thought tool blocked notice action prompt recovery guidance ask turn steer
    text: str
    stage: int | None = None
    status: str | None = None
    sub: str | None = None  # notice kind, tool kind, turn kind …
    ts: float = 0.0
    detail: str = ""  # tool input, for example


class UsageView(msgspec.Struct, frozen=True):
    used: int
    size: int
    cost: float | None = None
    currency: str | None = None


class RunView(msgspec.Struct, frozen=True):
    run_id: str
    goal: str
    agent: str
    live: bool
    auto_run: bool
    status: str
    stages: tuple[StageView, ...]
    budget: BudgetView
    blocked_calls: tuple[BlockedView, ...]
    recovery_cards: tuple[CardView, ...]
    notices: tuple[NoticeView, ...]
    defects: tuple[DefectView, ...]
    transcript: tuple[Row, ...] = ()
    pending_asks: tuple[AskView, ...] = ()
    state: str = "awaiting_go"
    current_stage: int | None = None
    closed: bool = False
    exit_code: int | None = None
    pid: int | None = None
    workspace: str = ""
    source: str = ""
    plan_issues: tuple[str, ...] = ()
    usage: UsageView | None = None
    agent_plan: tuple[ev.PlanItem, ...] = ()
    agent_name: str = ""
    agent_mode: str | None = None
    steering: bool = False
    blocked_total: int = 0
    cards_total: int = 0
    last_verdict: str | None = None
    events: int = 0
    last_seq: int = 0
    last_ts: float = 0.0
    torn_tail: dict[str, int] | None = None
    defects_total: int = 0
    max_rounds: int = 3

    @property
    def needs_input(self) -> bool:
        return bool(self.pending_asks) or (self.live and self.status in ("awaiting_go", "paused", "halted"))

    @property
    def completed_stages(self) -> int:
        return sum(1 for s in self.stages if s.status == "completed")

    @property
    def budget_fraction(self) -> float | None:
        b = self.budget
        if not b.budget_seconds or b.elapsed_seconds is None:
            return None
        return b.elapsed_seconds / b.budget_seconds


# Mutable rows are plain lists (the replay hot path creates hundreds of
# thousands): [key, kind, text-or-parts, stage, status, sub, ts, frozen, detail].
# The text slot holds a str until a second chunk arrives, then a list of parts.
_KEY, _KIND, _PARTS, _STAGE, _STATUS, _SUB, _TS, _FROZEN, _DETAIL = range(9)
_MRow = list


def _freeze(row: list) -> Row:
    frozen = row[_FROZEN]
    if frozen is None:
        parts = row[_PARTS]
        if type(parts) is not str:
            row[_PARTS] = parts = "".join(parts)
        frozen = row[_FROZEN] = Row(
            row[_KEY], row[_KIND], parts, row[_STAGE], row[_STATUS], row[_SUB], row[_TS], row[_DETAIL]
        )
    return frozen


class _MStage:
    __slots__ = ("escalations", "n", "result_bytes", "result_path", "rounds", "started_at", "status", "tasks", "title")

    def __init__(self, n: int, title: str, tasks: tuple[str, ...]):
        self.n = n
        self.title = title
        self.tasks = tasks
        self.status = "pending"
        self.rounds = 0
        self.escalations = 0
        self.result_path: str | None = None
        self.result_bytes: int | None = None
        self.started_at: float | None = None


class Folder:
    """Accumulates events; `view()` snapshots. Apply is total: it never raises."""

    def __init__(self, run_dir: Path | str | None = None, *, window: int = TRANSCRIPT_WINDOW) -> None:
        self.run_dir = None if run_dir is None else str(run_dir)
        self.window = window
        self._trim_at = window + max(window, 2048)
        self.run_id = ""
        self.goal = ""
        self.agent = ""
        self.source = ""
        self.workspace = ""
        self.pid: int | None = None
        self.plan_issues: tuple[str, ...] = ()
        self.stages: list[_MStage] = []
        self.state = "awaiting_go"
        self.auto_run = False
        self.current: int | None = None
        self.closed = False
        self.exit_code: int | None = None
        self.budget_s: float | None = None
        self.max_rounds = 3
        self.stage_timeout_s: float | None = None
        self.clock_started: float | None = None
        self.ended_at: float | None = None
        self.warned = False
        self.blocked: list[BlockedView] = []
        self.blocked_total = 0
        self.cards: list[CardView] = []
        self.cards_total = 0
        self.notices: list[NoticeView] = []
        self.defects: list[DefectView] = []
        self.defects_total = 0
        self.rows: list[_MRow] = []
        self.tools: dict[str, _MRow] = {}
        self.asks: dict[str, AskView] = {}
        self.ask_rows: dict[str, _MRow] = {}
        self.usage: ev.Usage | None = None
        self.agent_plan: tuple[ev.PlanItem, ...] = ()
        self.agent_name = ""
        self.agent_mode: str | None = None
        self.steering = False
        self.last_verdict: str | None = None
        self.count = 0
        self.last_seq = 0
        self.last_ts = 0.0
        self.torn: TornTail | None = None
        self._open_text: list | None = None
        self._dispatch = {
            ev.AgentText: self._agent_text,
            ev.AgentThought: self._agent_thought,
            ev.ToolCall: self._tool_call,
            ev.ToolUpdate: self._tool_update,
            ev.RunStarted: self._run_started,
            ev.PlanReady: self._plan_ready,
            ev.BudgetsSet: self._budgets_set,
            ev.PlanState: self._plan_state,
            ev.ActionTaken: self._action,
            ev.PlanClockStarted: self._clock_started,
            ev.BudgetWarned: self._budget_warned,
            ev.StageStarted: self._stage_started,
            ev.StageState: self._stage_state,
            ev.TurnStarted: self._turn_started,
            ev.TurnEnded: self._turn_ended,
            ev.AgentPlan: self._agent_plan,
            ev.Usage: self._usage,
            ev.AgentConnected: self._agent_connected,
            ev.ModeChanged: self._mode_changed,
            ev.PermissionAsked: self._permission_asked,
            ev.PermissionDecided: self._permission_decided,
            ev.BlockedCall: self._blocked_call,
            ev.SteeringSent: self._steering,
            ev.RecoveryQueued: self._recovery,
            ev.StageResult: self._stage_result,
            ev.Notice: self._notice,
            ev.RunClosed: self._run_closed,
        }

    # -- feeding -------------------------------------------------------------------------
    def apply_all(self, events: Iterable[ev.Event]) -> None:
        dispatch = self._dispatch
        agent_text = ev.AgentText
        last = None
        count = 0
        for last in events:  # the replay hot path
            count += 1
            if type(last) is agent_text:  # most events: coalesce into the open text row
                row = self._open_text
                if row is not None and row[_STAGE] == last.stage:
                    parts = row[_PARTS]
                    if type(parts) is str:
                        row[_PARTS] = [parts, last.text]
                    else:
                        parts.append(last.text)
                    row[_FROZEN] = None
                else:
                    self._open_text = self._row(last, "agent", last.text, last.stage)
                continue
            dispatch[type(last)](last)
        if last is not None:
            self.count += count
            self.last_seq = last.seq
            self.last_ts = last.ts

    def apply(self, event: ev.Event) -> None:
        self.apply_all((event,))

    def add_defects(self, defects: Iterable[Defect]) -> None:
        for d in defects:
            self.defects_total += 1
            if len(self.defects) < MAX_DEFECTS:
                self.defects.append(DefectView(d.line, d.reason))

    def set_torn(self, torn: TornTail | None) -> None:
        self.torn = torn

    # -- rows ------------------------------------------------------------------------------
    def _row(
        self,
        event: ev.Event,
        kind: str,
        text: str,
        stage: int | None = None,
        status: str | None = None,
        sub: str | None = None,
    ) -> _MRow:
        row = [event.seq, kind, text, stage, status, sub, event.ts, None, ""]
        rows = self.rows
        rows.append(row)
        self._open_text = None
        if len(rows) > self._trim_at:
            del rows[: len(rows) - self.window]
        return row

    def _remember(self, index: dict[str, list], key: str, row: list) -> None:
        """Rows by id for later updates; past the limit only the newest ids are kept."""
        index[key] = row
        if len(index) > self._trim_at:
            newest = dict(itertools.islice(index.items(), len(index) - self.window, None))
            index.clear()
            index.update(newest)

    def _agent_text(self, e: ev.AgentText) -> None:
        self.apply_all((e,))  # handled inline in apply_all

    def _agent_thought(self, e: ev.AgentThought) -> None:
        self._row(e, "thought", e.text, e.stage)

    def _tool_call(self, e: ev.ToolCall) -> None:
        row = self._row(e, "tool", e.title, e.stage, e.status, e.kind)
        row[_DETAIL] = e.input
        self._remember(self.tools, e.id, row)

    def _tool_update(self, e: ev.ToolUpdate) -> None:
        row = self.tools.get(e.id)
        if row is None:
            return
        if row[_STATUS] != "blocked":  # the agent reports a refused call as failed; blocked says why
            row[_STATUS] = e.status
        if e.title:
            row[_PARTS] = e.title
        row[_FROZEN] = None

    # -- plan and stages ------------------------------------------------------------------
    def _run_started(self, e: ev.RunStarted) -> None:
        self.run_id = e.run_id
        self.goal = e.goal
        self.agent = e.agent
        self.source = e.source
        self.workspace = e.workspace
        self.pid = e.pid
        self.plan_issues = e.plan_issues
        self.stages = [_MStage(s.n, s.title, s.tasks) for s in e.stages]
        if e.stages:
            self._row(e, "plan", _plan_text(e.goal, e.stages))

    def _plan_ready(self, e: ev.PlanReady) -> None:
        self.stages = [_MStage(s.n, s.title, s.tasks) for s in e.stages]
        self.plan_issues = e.issues
        if e.stages:
            self._row(e, "plan", _plan_text(self.goal, e.stages))

    def _stage(self, n: int) -> _MStage | None:
        if 1 <= n <= len(self.stages) and self.stages[n - 1].n == n:
            return self.stages[n - 1]
        return None

    def _budgets_set(self, e: ev.BudgetsSet) -> None:
        self.budget_s = e.plan_budget_s
        self.stage_timeout_s = e.stage_timeout_s
        self.max_rounds = e.max_rounds

    def _plan_state(self, e: ev.PlanState) -> None:
        self.state = e.state
        self.auto_run = e.auto_run
        if e.stage is not None:
            self.current = e.stage
        if e.state in TERMINAL and self.ended_at is None:
            self.ended_at = e.ts

    def _action(self, e: ev.ActionTaken) -> None:
        names = {
            "go": "Go",
            "go_all": "Go All",
            "cancel": "Cancel",
            "guidance": "Guidance",
            "allow": "Allow",
            "deny": "Deny",
        }
        self.last_verdict = f"{names.get(e.action, e.action)} → {e.verdict}"
        self._row(e, "action", e.text, self.current, e.verdict, e.action)

    def _clock_started(self, e: ev.PlanClockStarted) -> None:
        if self.clock_started is None:
            self.clock_started = e.ts

    def _budget_warned(self, e: ev.BudgetWarned) -> None:
        self.warned = True

    def _stage_started(self, e: ev.StageStarted) -> None:
        self.current = e.n
        st = self._stage(e.n)
        if st is not None:
            st.started_at = e.ts
        self._row(e, "separator", stage_separator(e.n, e.title), e.n)

    def _stage_state(self, e: ev.StageState) -> None:
        st = self._stage(e.n)
        if st is None:
            return
        if e.state == "running" and st.status != "running":
            st.started_at = e.ts
        st.status = e.state
        st.rounds = e.rounds
        st.escalations = e.escalations

    def _turn_started(self, e: ev.TurnStarted) -> None:
        if e.kind == "recovery":
            self._row(e, "recovery", e.text, e.stage, sub="recovery")
        elif e.kind == "guidance":
            self._row(e, "guidance", e.text, e.stage)
        else:
            self._row(e, "prompt", e.text, e.stage, sub=e.kind)

    def _turn_ended(self, e: ev.TurnEnded) -> None:
        st = self._stage(e.stage)
        if st is not None:
            st.rounds = e.rounds
        self._row(e, "turn", e.stop_reason, e.stage, sub=str(e.rounds))

    def _stage_result(self, e: ev.StageResult) -> None:
        st = self._stage(e.n)
        if st is None or self.run_dir is None:
            return
        path = confine_result_path(e.path, self.run_dir, e.n)
        if path is not None:
            st.result_path = path
            st.result_bytes = e.bytes

    # -- agent, permissions, policy ----------------------------------------------------------
    def _agent_plan(self, e: ev.AgentPlan) -> None:
        self.agent_plan = e.entries[:100]

    def _usage(self, e: ev.Usage) -> None:
        self.usage = e

    def _agent_connected(self, e: ev.AgentConnected) -> None:
        self.agent_name = f"{e.name} {e.version}".strip()
        self.agent_mode = e.mode
        self.steering = e.steering

    def _mode_changed(self, e: ev.ModeChanged) -> None:
        self.agent_mode = e.mode

    def _permission_asked(self, e: ev.PermissionAsked) -> None:
        self.asks[e.request_id] = AskView(e.request_id, e.stage, e.title, e.kind, e.input, e.rule)
        self._remember(self.ask_rows, e.request_id, self._row(e, "ask", e.title, e.stage, "pending", e.kind))

    def _permission_decided(self, e: ev.PermissionDecided) -> None:
        self.asks.pop(e.request_id, None)
        row = self.ask_rows.pop(e.request_id, None)
        if row is not None:
            row[_STATUS] = e.decision
            row[_FROZEN] = None

    def _blocked_call(self, e: ev.BlockedCall) -> None:
        self.blocked_total += 1
        self.blocked.append(
            BlockedView(
                e.stage, e.title, e.reason, e.klass, e.pattern, e.kind, e.input, e.cause, e.rule_id, e.origin, e.ts
            )
        )
        if len(self.blocked) > MAX_BLOCKED:
            del self.blocked[0]
        row = self.tools.get(e.tool_id)
        if row is not None:
            row[_STATUS] = "blocked"
            row[_FROZEN] = None
        self._row(e, "blocked", f"{e.title}: {e.reason}", e.stage, sub=e.klass)

    def _steering(self, e: ev.SteeringSent) -> None:
        self._row(e, "steer", "confirmed" if e.confirmed else "not confirmed", e.stage)

    def _recovery(self, e: ev.RecoveryQueued) -> None:
        self.cards_total += 1
        self.cards.append(CardView(e.stage, e.answered, e.blocked_count, e.body, e.seq))
        if len(self.cards) > MAX_CARDS:
            del self.cards[0]

    def _notice(self, e: ev.Notice) -> None:
        self.notices.append(NoticeView(e.kind, e.text, e.stage, e.seq))
        if len(self.notices) > MAX_NOTICES:
            del self.notices[0]
        self._row(e, "notice", e.text, e.stage, sub=e.kind)

    def _run_closed(self, e: ev.RunClosed) -> None:
        self.closed = True
        self.exit_code = e.exit_code
        if self.ended_at is None:
            self.ended_at = e.ts

    # -- snapshot ------------------------------------------------------------------------------------
    def status(self, live: bool) -> str:
        if self.state in TERMINAL:
            return self.state
        if live:
            return self.state
        if self.closed and self.state == "halted":
            return "halted"  # ended cleanly at a ceiling
        return "dead"

    def view(self, *, live: bool = False, now: float | None = None) -> RunView:
        now = time.time() if now is None else now
        status = self.status(live)
        if self.clock_started is None:
            elapsed = None
        else:
            end = self.ended_at if self.ended_at is not None else (now if live else self.last_ts)
            elapsed = max(0.0, end - self.clock_started)
        stage_elapsed = None
        cur = self._stage(self.current) if self.current else None
        if cur is not None and cur.status == "running" and cur.started_at is not None:
            stage_elapsed = max(0.0, (now if live else self.last_ts) - cur.started_at)
        rows = self.rows[-self.window :]
        return RunView(
            run_id=self.run_id,
            goal=self.goal,
            agent=self.agent,
            live=live,
            auto_run=self.auto_run,
            status=status,
            stages=tuple(
                StageView(s.n, s.title, s.tasks, s.status, s.rounds, s.escalations, s.result_path, s.result_bytes)
                for s in self.stages
            ),
            budget=BudgetView(
                elapsed_seconds=None if elapsed is None else round(elapsed, 3),
                budget_seconds=self.budget_s,
                warned=self.warned,
                stage_timeout_seconds=self.stage_timeout_s,
                stage_elapsed_seconds=None if stage_elapsed is None else round(stage_elapsed, 3),
                started_at=self.clock_started,
                stage_started_at=cur.started_at if cur is not None and cur.status == "running" else None,
            ),
            blocked_calls=tuple(self.blocked),
            recovery_cards=tuple(self.cards),
            notices=tuple(self.notices),
            defects=tuple(self.defects),
            transcript=tuple(_freeze(r) for r in rows),
            pending_asks=tuple(self.asks.values()),
            state=self.state,
            current_stage=self.current,
            closed=self.closed,
            exit_code=self.exit_code,
            pid=self.pid,
            workspace=self.workspace,
            source=self.source,
            plan_issues=self.plan_issues,
            usage=None if (u := self.usage) is None else UsageView(u.used, u.size, u.cost, u.currency),
            agent_plan=self.agent_plan,
            agent_name=self.agent_name,
            agent_mode=self.agent_mode,
            steering=self.steering,
            blocked_total=self.blocked_total,
            cards_total=self.cards_total,
            last_verdict=self.last_verdict,
            events=self.count,
            last_seq=self.last_seq,
            last_ts=self.last_ts,
            torn_tail=None if self.torn is None else {"line": self.torn.line, "bytes": self.torn.size},
            defects_total=self.defects_total,
            max_rounds=self.max_rounds,
        )


def _plan_text(goal: str, stages: tuple[ev.StageSpec, ...]) -> str:
    return render_plan_text(Plan(goal, tuple(Stage(s.n, s.title, s.tasks) for s in stages)))


def replay(reader: JournalSource, folder: Folder) -> Folder:
    """Fold everything a source has, chunk by chunk (memory stays bounded).

    The cyclic garbage collector is paused meanwhile: the fold builds many
    small acyclic containers, and collecting them mid-replay doubles its cost.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        while True:
            batch = reader.poll()
            folder.apply_all(batch.events)
            folder.add_defects(batch.defects)
            folder.set_torn(batch.torn)
            if not batch.more:
                return folder
    finally:
        if was_enabled:
            gc.enable()


def fold(
    events: Iterable[ev.Event], *, run_dir: Path | str | None = None, live: bool = False, now: float | None = None
) -> RunView:
    folder = Folder(run_dir)
    folder.apply_all(events)
    return folder.view(live=live, now=now)


SHOW_KEYS = (
    "run_id",
    "goal",
    "agent",
    "live",
    "auto_run",
    "status",
    "stages",
    "budget",
    "blocked_calls",
    "recovery_cards",
    "notices",
    "defects",
    "pending_asks",
    "current_stage",
    "closed",
    "exit_code",
    "pid",
    "workspace",
    "source",
    "plan_issues",
    "usage",
    "agent_name",
    "agent_mode",
    "blocked_total",
    "cards_total",
    "events",
    "torn_tail",
    "defects_total",
)


def view_to_json(view: RunView, *, transcript: bool = False) -> dict:
    """The `plandeck show --json` document (SPEC §13)."""
    data = msgspec.to_builtins(view)
    out = {k: data[k] for k in SHOW_KEYS}
    out["needs_input"] = view.needs_input
    if transcript:
        out["transcript"] = data["transcript"]
    return out
