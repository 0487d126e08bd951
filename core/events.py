"""The journal's event types: a closed, tagged union of immutable records.

Every line of `journal.jsonl` is one of these, tagged by `type`. Decoding is
strict (msgspec does not coerce: `"3"` is not 3, `true` is not 1) and unknown
fields or types are rejected, because a journal is persisted data and therefore
untrusted input (SPEC §9.5).

`seq` and `ts` are stamped by the JournalWriter; producers leave them at 0.
"""

from __future__ import annotations

from typing import Literal

import msgspec

PlanStateName = Literal["awaiting_go", "running", "paused", "halted", "failed", "completed", "cancelled"]
StageStateName = Literal["pending", "running", "completed", "failed", "halted"]
TurnKind = Literal["planning", "stage", "recovery", "continuation", "guidance"]
StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled", "timeout", "error"]
NoticeKind = Literal["completion", "warning", "halt", "failure", "refusal", "cancel", "info", "guidance"]
ActionName = Literal["go", "go_all", "cancel", "guidance", "allow", "deny"]
VerdictName = Literal["accepted", "queued", "refused"]
Origin = Literal["permission", "fs_read", "fs_write", "terminal"]


# gc=False: events hold only strings, numbers and tuples of other events' parts,
# so they can never form a cycle — untracked, a million of them cost the
# garbage collector nothing during a replay.
class _Event(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag_field="type", gc=False):
    seq: int = 0
    ts: float = 0.0


class StageSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    n: int
    title: str
    tasks: tuple[str, ...] = ()


class PlanItem(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    content: str
    status: str
    priority: str = "medium"


class RunStarted(_Event, tag="run_started"):
    run_id: str
    goal: str
    agent: str
    stages: tuple[StageSpec, ...]
    source: Literal["file", "planning"]
    workspace: str
    pid: int
    version: int = 1
    plan_issues: tuple[str, ...] = ()


class PlanReady(_Event, tag="plan_ready"):
    """The stages a planning turn produced (none when it parsed no valid plan)."""

    stages: tuple[StageSpec, ...]
    issues: tuple[str, ...] = ()


class BudgetsSet(_Event, tag="budgets_set"):
    stage_timeout_s: float
    plan_budget_s: float
    max_rounds: int
    max_escalations: int
    source: Literal["explicit", "config", "defaults"]


class PlanState(_Event, tag="plan_state"):
    state: PlanStateName
    auto_run: bool
    stage: int | None = None


class ActionTaken(_Event, tag="action"):
    action: ActionName
    verdict: VerdictName
    text: str
    origin: str = "local"


class PlanClockStarted(_Event, tag="plan_clock_started"):
    pass


class BudgetWarned(_Event, tag="budget_warned"):
    elapsed_s: float
    budget_s: float


class StageStarted(_Event, tag="stage_started"):
    n: int
    title: str


class StageState(_Event, tag="stage_state"):
    n: int
    state: StageStateName
    rounds: int
    escalations: int


class TurnStarted(_Event, tag="turn_started"):
    stage: int
    kind: TurnKind
    text: str


class TurnEnded(_Event, tag="turn_ended"):
    stage: int
    stop_reason: StopReason
    rounds: int
    answered: bool
    blocked: int


class AgentText(_Event, tag="agent_text"):
    stage: int
    text: str


class AgentThought(_Event, tag="agent_thought"):
    stage: int
    text: str


class ToolCall(_Event, tag="tool_call"):
    stage: int
    id: str
    title: str
    kind: str
    status: str
    input: str = ""


class ToolUpdate(_Event, tag="tool_update"):
    stage: int
    id: str
    status: str
    title: str | None = None


class AgentPlan(_Event, tag="agent_plan"):
    entries: tuple[PlanItem, ...]


class Usage(_Event, tag="usage"):
    used: int
    size: int
    cost: float | None = None
    currency: str | None = None


class AgentConnected(_Event, tag="agent_connected"):
    name: str
    version: str
    protocol_version: int
    steering: bool
    modes: tuple[str, ...] = ()
    mode: str | None = None


class ModeChanged(_Event, tag="mode_changed"):
    mode: str
    confirmed: bool


class PermissionAsked(_Event, tag="permission_asked"):
    stage: int
    request_id: str
    tool_id: str
    title: str
    kind: str
    input: str
    rule: str = ""


class PermissionDecided(_Event, tag="permission_decided"):
    request_id: str
    decision: Literal["allow", "deny", "cancelled"]
    by: Literal["policy", "operator", "cancel"]


class BlockedCall(_Event, tag="blocked_call"):
    stage: int
    tool_id: str
    title: str
    kind: str
    input: str
    reason: str
    cause: str
    klass: str | None
    pattern: str
    rule_id: str | None = None
    origin: Origin = "permission"


class SteeringSent(_Event, tag="steering_sent"):
    stage: int
    confirmed: bool


class RecoveryQueued(_Event, tag="recovery_queued"):
    stage: int
    answered: bool
    blocked_count: int
    body: str


class StageResult(_Event, tag="stage_result"):
    n: int
    path: str
    bytes: int


class Notice(_Event, tag="notice"):
    kind: NoticeKind
    text: str
    stage: int | None = None


class RunClosed(_Event, tag="run_closed"):
    exit_code: int
    reason: str


Event = (
    RunStarted
    | PlanReady
    | BudgetsSet
    | PlanState
    | ActionTaken
    | PlanClockStarted
    | BudgetWarned
    | StageStarted
    | StageState
    | TurnStarted
    | TurnEnded
    | AgentText
    | AgentThought
    | ToolCall
    | ToolUpdate
    | AgentPlan
    | Usage
    | AgentConnected
    | ModeChanged
    | PermissionAsked
    | PermissionDecided
    | BlockedCall
    | SteeringSent
    | RecoveryQueued
    | StageResult
    | Notice
    | RunClosed
)

EVENT_TYPES: frozenset[str] = frozenset(
    cls.__struct_config__.tag
    for cls in Event.__args__  # type: ignore[attr-defined]
)

_encoder = msgspec.json.Encoder()
DECODER = msgspec.json.Decoder(Event)


def encode(event: Event) -> bytes:
    return _encoder.encode(event)


def decode(line: bytes) -> Event:
    """Decode one journal line. Raises msgspec.DecodeError / ValidationError."""
    return DECODER.decode(line)
