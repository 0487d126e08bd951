"""The append-only run journal: one JSON event per line (SPEC §9.3).

Writer: every event is encoded to one complete line and handed to the kernel in
one `write` on an O_APPEND descriptor, so a crash loses at most the event being
written and readers never see half of an earlier one.

Reader: incremental from a saved byte offset. A last line without its newline is
*torn* (the writer may still be writing it): it is held back, reported, and read
again next time. Malformed or unknown lines are reported with their 1-based line
number and skipped. Reading never raises on content.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import msgspec

from core import events as ev

JOURNAL_NAME = "journal.jsonl"
_CHUNK = 4 * 1024 * 1024


class JournalWriter:
    """Sole writer of one run's journal. Not thread-safe: call from one thread."""

    def __init__(self, path: Path, *, wall: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self._wall = wall
        self._seq = 0
        self._subscribers: list[Callable[[ev.Event], None]] = []
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
        self._fd: int | None = os.open(self.path, flags, 0o600)

    def subscribe(self, callback: Callable[[ev.Event], None]) -> Callable[[], None]:
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback) if callback in self._subscribers else None

    @property
    def closed(self) -> bool:
        return self._fd is None

    def append(self, event: ev.Event) -> ev.Event:
        if self._fd is None:
            raise RuntimeError("journal is closed")
        self._seq += 1
        stamped = msgspec.structs.replace(event, seq=self._seq, ts=round(self._wall(), 6))
        data = ev.encode(stamped) + b"\n"
        written = os.write(self._fd, data)
        while written < len(data):  # a regular file short-writes only when the disk is full
            written += os.write(self._fd, data[written:])
        for callback in list(self._subscribers):
            callback(stamped)
        return stamped

    def sync(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            try:
                os.fsync(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None


@dataclass(frozen=True, slots=True)
class Defect:
    line: int
    reason: str


@dataclass(frozen=True, slots=True)
class TornTail:
    line: int
    size: int


@dataclass(slots=True)
class Batch:
    events: list[ev.Event] = field(default_factory=list)
    defects: list[Defect] = field(default_factory=list)
    torn: TornTail | None = None
    more: bool = False


class JournalSource(Protocol):
    """What the projection side needs from a journal; a mirrored log fits here too."""

    def poll(self) -> Batch: ...


def _describe(exc: Exception, line: bytes) -> str:
    text = str(exc)[:200]
    if not isinstance(exc, msgspec.ValidationError):
        return f"malformed JSON ({text})"
    try:
        raw = msgspec.json.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return f"invalid value ({text})"
    if not isinstance(raw, dict):
        return "not a JSON object"
    kind = raw.get("type")
    if kind is None:
        return "event has no type"
    if not isinstance(kind, str) or kind not in ev.EVENT_TYPES:
        return f"unknown event type {str(kind)[:40]!r}"
    return f"invalid {kind} event: {text}"


class JournalReader:
    """Incremental, defect-tolerant reader of one journal file."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.offset = 0
        self.lines = 0  # complete lines consumed so far
        self.last_seq = 0
        self.torn: TornTail | None = None

    def poll(self, max_bytes: int = _CHUNK) -> Batch:
        """Read what was appended since the last poll (at most about max_bytes)."""
        batch = Batch()
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read(max_bytes)
                at_eof = len(data) < max_bytes or fh.read(1) == b""
        except FileNotFoundError:
            return batch
        if not data:
            batch.torn = self.torn
            return batch
        end = data.rfind(b"\n")
        if end < 0:
            if at_eof:
                self.torn = TornTail(self.lines + 1, len(data))
                batch.torn = self.torn
                return batch
            # One line longer than the chunk: read it whole.
            return self.poll(max_bytes * 2)
        complete = data[: end + 1]
        self.offset += len(complete)
        self._decode_lines(complete, batch)
        rest = len(data) - len(complete)
        self.torn = TornTail(self.lines + 1, rest) if (rest and at_eof) else None
        batch.torn = self.torn
        batch.more = not at_eof
        return batch

    def _decode_lines(self, blob: bytes, batch: Batch) -> None:
        decode = ev.DECODER.decode
        append = batch.events.append
        last_seq = self.last_seq
        line_no = self.lines
        for line in blob.split(b"\n")[:-1]:  # the replay hot path
            line_no += 1
            try:
                event = decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                reason = "blank line" if not line.strip() else _describe(exc, line)
                batch.defects.append(Defect(line_no, reason))
                continue
            seq = event.seq
            if seq <= last_seq:
                batch.defects.append(
                    Defect(line_no, f"sequence {seq} does not follow {last_seq} (duplicate or reordered)")
                )
                continue
            last_seq = seq
            append(event)
        self.lines = line_no
        self.last_seq = last_seq

    def read_all(self) -> Batch:
        """Everything from the current offset to EOF, as one batch."""
        total = Batch()
        while True:
            batch = self.poll()
            total.events.extend(batch.events)
            total.defects.extend(batch.defects)
            total.torn = batch.torn
            if not batch.more:
                return total
