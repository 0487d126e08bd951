"""Audit records (SPEC §10): one JSON object per line in `<run dir>/audit.jsonl`.

Records carry numbers, ids and fixed texts only. The event type / operation
pairs form a closed set, so no caller can put model text or a secret here.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import msgspec

AUDIT_NAME = "audit.jsonl"
Outcome = Literal["approved", "stopped", "refused", "error", "completed"]
OUTCOMES = frozenset({"approved", "stopped", "refused", "error", "completed"})

EVENTS: frozenset[tuple[str, str]] = frozenset(
    {
        ("stage_approved", "go"),
        ("auto_run_enabled", "go_all"),
        ("stage_guidance", "guidance"),
        ("auto_run_round_cap", "stage_round_cap"),
        ("auto_run_timeout", "plan_duration_exceeded"),
        ("auto_run_timeout", "stage_timeout"),
        ("auto_run_budget_warning", "plan_duration_warning"),
        ("auto_run_plan_expired", "plan_shape_absent"),
        ("auto_run_stage_error", "stage_error"),
        ("auto_run_completed", "auto_run_terminal"),
        ("plan_cancelled", "cancel"),
        ("stage_force_failed", "escalation_cap"),
        ("tool_call_blocked", "policy_deny"),
        ("permission_decided", "operator_allow"),
        ("permission_decided", "operator_deny"),
    }
)
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,80}$")


class AuditRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    event_id: str
    timestamp: str
    event_type: str
    operation: str
    outcome: str
    resources: str


def rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def record(
    event_type: str,
    operation: str,
    outcome: Outcome,
    *,
    run_id: str,
    stage: int | None = None,
    wall: float | None = None,
) -> AuditRecord:
    if (event_type, operation) not in EVENTS:
        raise ValueError(f"unknown audit event {event_type}/{operation}")
    if outcome not in OUTCOMES:
        raise ValueError(f"unknown audit outcome {outcome!r}")
    if not _RUN_ID.match(run_id):
        raise ValueError("run id is not a plain identifier")
    resources = f"run={run_id}" + (f",stage={int(stage)}" if stage is not None else "")
    return AuditRecord(
        event_id=uuid.uuid4().hex,
        timestamp=rfc3339(time.time() if wall is None else wall),
        event_type=event_type,
        operation=operation,
        outcome=outcome,
        resources=resources,
    )


def append(run_dir: Path | str, rec: AuditRecord) -> None:
    """Append one record with a single write on an O_APPEND descriptor."""
    path = os.path.join(os.fspath(run_dir), AUDIT_NAME)
    data = msgspec.json.encode(rec) + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read(run_dir: Path | str) -> list[AuditRecord]:
    """Valid records of a run's audit log; malformed lines are skipped."""
    path = os.path.join(os.fspath(run_dir), AUDIT_NAME)
    out: list[AuditRecord] = []
    try:
        with open(path, "rb") as fh:
            for line in fh:
                try:
                    out.append(msgspec.json.decode(line, type=AuditRecord))
                except (msgspec.DecodeError, msgspec.ValidationError):
                    continue
    except FileNotFoundError:
        pass
    return out
