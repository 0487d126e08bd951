"""Refusal observations: schema `projectbuddy/assisted-review-refusal@1` (SPEC §8).

A minimized, explicitly requested record of a run that ended refused or
cancelled. It holds host-defined enums, numbers, a hash and a timestamp —
never prompts, model prose, paths, tool output or exception text — and can
never be read as success (`complete` is always false).

Three parts:
- `validate_observation`: strict, non-coercing validation; every problem names
  its field and the rule it broke.
- `RefusalObserver`: begun per run, marks phases, counts requests and rounds,
  and samples a snapshot on failure (sampling only: it never reruns work,
  extends deadlines or claims the server completed anything).
- `write_private_observation`: private custody — 0700 directory owned by the
  current user, a new 0600 file created exclusively without following links,
  fsynced, never overwritten. Unsafe custody fails closed with one fixed line.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SCHEMA = "projectbuddy/assisted-review-refusal@1"
OUTCOMES = ("refused", "cancelled")
PHASES = (
    "input_validation",
    "orchestration_context",
    "capture_preparation",
    "review_preflight",
    "identity_preflight",
    "model_metadata",
    "inference",
    "identity_postflight",
    "finalization",
)
FAILURE_KINDS = (
    "deadline_exceeded",
    "cancelled",
    "transport_error",
    "protocol_error",
    "auth_required",
    "identity_mismatch",
    "budget_exhausted",
    "policy_refused",
    "agent_crashed",
    "internal_error",
)
SERVER_COMPLETION = ("unknown", "not_started")
LIMIT_SECONDS = ("deadline_seconds", "stage_timeout_seconds", "plan_budget_seconds")
LIMIT_COUNTS = ("max_rounds", "max_retries", "max_requests")
COUNTERS = ("requests_started", "requests_completed", "retries", "rounds")
FIELDS = (
    "schema",
    "complete",
    "outcome",
    "phase",
    "failure_kind",
    "exit_code",
    "limits",
    "counters",
    "elapsed_seconds",
    "in_flight",
    "request_hash",
    "server_completion",
    "observed_at",
)
COUNTER_MAX = 1_000_000
SECONDS_MAX = 1e9
MAX_RECORD_BYTES = 64 * 1024
_HASH = re.compile(r"^[0-9a-f]{64}$")
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z$")
CUSTODY_DIAGNOSTIC = "plandeck: refusal observation not written: unsafe or unsupported custody"
WRITE_DIAGNOSTIC = "plandeck: refusal observation not written: it could not be finalized"


@dataclass(frozen=True, slots=True)
class Problem:
    field: str
    rule: str

    def __str__(self) -> str:
        return f"{self.field}: {self.rule}"


class ObservationError(Exception):
    """A record that would not validate; carries the problems."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("; ".join(map(str, problems)))


class CustodyError(Exception):
    """Unsafe or unsupported custody. Its message is always the fixed diagnostic."""

    def __init__(self) -> None:
        super().__init__(CUSTODY_DIAGNOSTIC)


# -- validation --------------------------------------------------------------------


def _is_int(value: object) -> bool:
    return type(value) is int


def _is_number(value: object) -> bool:
    return type(value) in (int, float)


def _check_seconds(field: str, value: object, out: list[Problem], *, nullable: bool = False) -> None:
    if value is None and nullable:
        return
    if not _is_number(value):
        kind = "a boolean" if isinstance(value, bool) else type(value).__name__
        out.append(Problem(field, f"must be a number{' or null' if nullable else ''}, not {kind}"))
    elif not math.isfinite(value):  # type: ignore[arg-type]
        out.append(Problem(field, "must be finite (NaN and infinity are not allowed)"))
    elif value < 0:  # type: ignore[operator]
        out.append(Problem(field, "must be ≥ 0"))
    elif value > SECONDS_MAX:  # type: ignore[operator]
        out.append(Problem(field, f"must be ≤ {SECONDS_MAX:.0e}"))


def _check_count(field: str, value: object, out: list[Problem]) -> None:
    if not _is_int(value):
        kind = "a boolean" if isinstance(value, bool) else type(value).__name__
        out.append(Problem(field, f"must be an integer, not {kind}"))
    elif not 0 <= value <= COUNTER_MAX:  # type: ignore[operator]
        out.append(Problem(field, f"must be between 0 and {COUNTER_MAX}"))


def _check_enum(field: str, value: object, allowed: tuple[str, ...], out: list[Problem]) -> None:
    if type(value) is not str or value not in allowed:
        out.append(Problem(field, f"must be one of {', '.join(allowed)}"))


def validate_observation(record: object) -> list[Problem]:
    """Every problem with a record; an empty list means valid. Never raises."""
    out: list[Problem] = []
    if not isinstance(record, dict):
        return [Problem("(record)", "must be a JSON object")]
    for key in record:
        if key not in FIELDS:
            out.append(Problem(str(key)[:60], "unknown field (not allowed)"))
    for key in FIELDS:
        if key not in record:
            out.append(Problem(key, "required field is missing"))
    get = record.get
    if "schema" in record and get("schema") != SCHEMA:
        out.append(Problem("schema", f"must be {SCHEMA!r}"))
    if "complete" in record and get("complete") is not False:
        out.append(Problem("complete", "must be the boolean false"))
    if "outcome" in record:
        _check_enum("outcome", get("outcome"), OUTCOMES, out)
    if "phase" in record:
        _check_enum("phase", get("phase"), PHASES, out)
    if "failure_kind" in record:
        _check_enum("failure_kind", get("failure_kind"), FAILURE_KINDS, out)
    if "exit_code" in record:
        code = get("exit_code")
        if not _is_int(code):
            kind = "a boolean" if isinstance(code, bool) else type(code).__name__
            out.append(Problem("exit_code", f"must be an integer, not {kind}"))
        elif not 1 <= code <= 255:
            out.append(Problem("exit_code", "must be between 1 and 255"))
    if "limits" in record:
        limits = get("limits")
        if not isinstance(limits, dict):
            out.append(Problem("limits", "must be an object"))
        else:
            for key, value in limits.items():
                if key in LIMIT_SECONDS:
                    _check_seconds(f"limits.{key}", value, out)
                elif key in LIMIT_COUNTS:
                    _check_count(f"limits.{key}", value, out)
                else:
                    out.append(Problem(f"limits.{str(key)[:60]}", "unknown limit (not allowed)"))
    if "counters" in record:
        counters = get("counters")
        if not isinstance(counters, dict):
            out.append(Problem("counters", "must be an object"))
        else:
            for key in counters:
                if key not in COUNTERS:
                    out.append(Problem(f"counters.{str(key)[:60]}", "unknown counter (not allowed)"))
            for key in COUNTERS:
                if key not in counters:
                    out.append(Problem(f"counters.{key}", "required counter is missing"))
                else:
                    _check_count(f"counters.{key}", counters[key], out)
    if "elapsed_seconds" in record:
        _check_seconds("elapsed_seconds", get("elapsed_seconds"), out, nullable=True)
    if "in_flight" in record:
        value = get("in_flight")
        if not (value is True or value is False or (value == "unknown" and type(value) is str)):
            out.append(Problem("in_flight", 'must be true, false or "unknown"'))
    if "request_hash" in record:
        value = get("request_hash")
        if value is not None and (type(value) is not str or not _HASH.match(value)):
            out.append(Problem("request_hash", "must be 64 lowercase hex characters (SHA-256) or null"))
    if "server_completion" in record:
        _check_enum("server_completion", get("server_completion"), SERVER_COMPLETION, out)
    if "observed_at" in record:
        value = get("observed_at")
        if type(value) is not str or not _TIMESTAMP.match(value) or not _parses(value):
            out.append(Problem("observed_at", "must be a UTC RFC 3339 timestamp ending in Z"))
    return out


def _parses(value: str) -> bool:
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
        return True
    except ValueError:
        return False


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key[:60]!r}")
        out[key] = value
    return out


def parse_record(data: bytes) -> tuple[dict[str, Any] | None, list[Problem]]:
    """Decode and validate one record's bytes; never raises."""
    if len(data) > MAX_RECORD_BYTES:
        return None, [Problem("(file)", f"larger than {MAX_RECORD_BYTES} bytes")]
    try:
        record = json.loads(data.decode("utf-8"), parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)
    except UnicodeDecodeError:
        return None, [Problem("(file)", "not UTF-8")]
    except (ValueError, RecursionError) as exc:
        return None, [Problem("(file)", f"not valid JSON: {str(exc)[:120]}")]
    problems = validate_observation(record)
    return (record if not problems else None), problems


def read_record(path: Path) -> tuple[dict[str, Any] | None, list[Problem]]:
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_RECORD_BYTES + 1)
    except OSError as exc:
        return None, [Problem("(file)", f"cannot read: {exc.strerror}")]
    return parse_record(data)


# -- the observer ---------------------------------------------------------------------


def utc_stamp(ts: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if ts is None else ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class RefusalObserver:
    """Samples a run's lifecycle so a failure can be described without its content."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time):
        self._clock = clock
        self._wall = wall
        self.begun = False
        self._reset()

    def _reset(self) -> None:
        self.phase = "input_validation"
        self.requests_started = 0
        self.requests_completed = 0
        self.retries = 0
        self.rounds = 0
        self.limits: dict[str, float | int] = {}
        self._started: float | None = None
        self._hash: str | None = None

    def begin(self, *, limits: Mapping[str, float | int] | None = None) -> None:
        """Start a fresh run: nothing from a previous run survives."""
        self._reset()
        self.begun = True
        self._started = self._clock()
        if limits:
            self.bind_limits(limits)

    def bind_limits(self, limits: Mapping[str, float | int]) -> None:
        for key, value in limits.items():
            if key in LIMIT_SECONDS and _is_number(value) and math.isfinite(value) and value >= 0:
                self.limits[key] = float(value)
            elif key in LIMIT_COUNTS and _is_int(value) and value >= 0:
                self.limits[key] = int(value)

    def mark(self, phase: str) -> None:
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}")
        self.phase = phase

    def request_started(self, payload: str | None = None) -> None:
        self.requests_started += 1
        if payload is not None:
            self._hash = hashlib.sha256(payload.encode("utf-8", "replace")).hexdigest()

    def request_completed(self) -> None:
        self.requests_completed += 1

    def retried(self) -> None:
        self.retries += 1

    def round_completed(self) -> None:
        self.rounds += 1

    def snapshot(self, *, outcome: str, failure_kind: str, exit_code: int) -> dict[str, Any]:
        """Sample the current state into a validated record. Pure: starts nothing."""
        elapsed = None if self._started is None else max(0.0, self._clock() - self._started)
        in_flight: bool | str = self.requests_started > self.requests_completed
        record: dict[str, Any] = {
            "schema": SCHEMA,
            "complete": False,
            "outcome": outcome,
            "phase": self.phase,
            "failure_kind": failure_kind,
            "exit_code": exit_code,
            "limits": dict(self.limits),
            "counters": {
                "requests_started": min(self.requests_started, COUNTER_MAX),
                "requests_completed": min(self.requests_completed, COUNTER_MAX),
                "retries": min(self.retries, COUNTER_MAX),
                "rounds": min(self.rounds, COUNTER_MAX),
            },
            "elapsed_seconds": None if elapsed is None else round(min(elapsed, SECONDS_MAX), 3),
            "in_flight": in_flight,
            "request_hash": self._hash,
            # Never a claim of completion: a request that was sent may or may not
            # have finished on the other side.
            "server_completion": "not_started" if self.requests_started == 0 else "unknown",
            "observed_at": utc_stamp(self._wall()),
        }
        problems = validate_observation(record)
        if problems:
            raise ObservationError(problems)
        return record


# -- private custody ------------------------------------------------------------------


def _check_dir_stat(st: os.stat_result) -> None:
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise CustodyError()


def _custody_dir_fd(directory: Path) -> int:
    if os.name != "posix" or not hasattr(os, "O_NOFOLLOW") or not hasattr(os, "O_DIRECTORY"):
        raise CustodyError()
    directory = Path(os.path.abspath(directory))
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        try:
            directory.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.mkdir(directory, 0o700)
        except OSError:
            raise CustodyError() from None
        st = os.lstat(directory)
    except OSError:
        raise CustodyError() from None
    if stat.S_ISLNK(st.st_mode):
        raise CustodyError()
    _check_dir_stat(st)
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        raise CustodyError() from None
    try:
        _check_dir_stat(os.fstat(fd))  # the directory we opened is the one we checked
    except CustodyError:
        os.close(fd)
        raise
    return fd


def record_name(record: Mapping[str, Any]) -> str:
    stamp = str(record.get("observed_at", "")).replace("-", "").replace(":", "")
    return f"refusal-{stamp}-{uuid.uuid4().hex[:12]}.json"


def write_private_observation(directory: Path, record: dict[str, Any], *, name: str | None = None) -> Path:
    """Write a validated record into private custody; never overwrites.

    Raises ObservationError for an invalid record and CustodyError (with the
    fixed diagnostic) for unsafe custody or any failure to write; in both cases
    nothing is left behind.
    """
    problems = validate_observation(record)
    if problems:
        raise ObservationError(problems)
    name = name or record_name(record)
    if "/" in name or name in (".", "..") or not name:
        raise CustodyError()
    data = (json.dumps(record, sort_keys=True, allow_nan=False) + "\n").encode()
    dir_fd = _custody_dir_fd(directory)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
        except OSError:
            raise CustodyError() from None  # a collision is an error, not an overwrite
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
                raise CustodyError()
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(name, dir_fd=dir_fd)
            except OSError:
                pass
            raise
        os.close(fd)
        os.fsync(dir_fd)
    except CustodyError:
        raise
    except OSError:
        raise CustodyError() from None
    finally:
        os.close(dir_fd)
    return Path(os.path.abspath(directory)) / name


def list_records(directory: Path) -> list[tuple[Path, dict[str, Any] | None, list[Problem]]]:
    """Every *.json file in a directory with its record or its problems."""
    out = []
    try:
        entries = sorted(p for p in Path(directory).iterdir() if p.suffix == ".json" and not p.is_symlink())
    except OSError:
        return out
    for path in entries:
        if not path.is_file():
            continue
        record, problems = read_record(path)
        out.append((path, record, problems))
    return out
