"""Textual messages carrying core views into the UI."""

from __future__ import annotations

from pathlib import Path

from textual.message import Message

from core.projection import RunView
from core.verdict import Verdict


class RunUpdated(Message):
    """A new immutable view of one run (one message per batch of events)."""

    def __init__(self, run_dir: Path, view: RunView) -> None:
        super().__init__()
        self.run_dir = run_dir
        self.view = view


class RunsListed(Message):
    """The set of run directories under the runs root changed."""

    def __init__(self, run_dirs: list[Path]) -> None:
        super().__init__()
        self.run_dirs = run_dirs


class VerdictShown(Message):
    """An operator action was answered."""

    def __init__(self, action: str, verdict: Verdict) -> None:
        super().__init__()
        self.action = action
        self.verdict = verdict


class ObservationsChanged(Message):
    """Files in the watched observation directory changed."""
