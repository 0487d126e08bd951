"""Live data for the UI: journal tails, one watcher over the runs root, in-process feeds.

Every source ends in the same place — a Folder and a new immutable RunView —
and the UI receives one message per batch, never one per event.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

import watchfiles

from core import events as ev
from core.control import probe_live
from core.journal import JOURNAL_NAME, JournalReader
from core.projection import Folder, RunView, replay

UI_WINDOW = 120  # transcript rows a screen keeps (each is a widget); the journal keeps everything
WATCH_STEP_MS = 15


class RunTail:
    """One run's journal, followed from its saved offset and folded."""

    def __init__(self, run_dir: Path, probe: Callable[[Path], bool] = probe_live) -> None:
        self.run_dir = run_dir
        self._probe = probe
        self.reader = JournalReader(run_dir / JOURNAL_NAME)
        self.folder = Folder(run_dir, window=UI_WINDOW)
        self.live = False
        self.in_process = False

    def poll(self) -> bool:
        """Read what was appended; True when the view changed."""
        before = (self.folder.count, self.folder.defects_total, self.folder.torn)
        replay(self.reader, self.folder)
        return (self.folder.count, self.folder.defects_total, self.folder.torn) != before

    def view(self, now: float | None = None) -> RunView:
        return self.folder.view(live=self.live, now=now)

    def probe(self) -> bool:
        """Refresh the live flag from the control socket (blocking: call from a thread)."""
        if not self.in_process:
            self.live = self._probe(self.run_dir)
        return self.live


class InProcessFeed:
    """Feeds a RunTail from the controller's journal subscription, coalesced per loop turn."""

    def __init__(self, tail: RunTail, on_batch: Callable[[RunTail], None]) -> None:
        self.tail = tail
        self.tail.in_process = True
        self.tail.live = True
        self._on_batch = on_batch
        self._pending: list[ev.Event] = []
        self._scheduled = False

    def __call__(self, event: ev.Event) -> None:
        self._pending.append(event)
        if isinstance(event, ev.RunClosed):
            self.tail.live = False
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._scheduled = False
        batch, self._pending = self._pending, []
        self.tail.folder.apply_all(batch)
        self._on_batch(self.tail)


def list_run_dirs(runs_root: Path) -> list[Path]:
    try:
        entries = list(os.scandir(runs_root))
    except OSError:
        return []
    return sorted(
        (
            Path(e.path)
            for e in entries
            if e.is_dir(follow_symlinks=False) and os.path.exists(os.path.join(e.path, JOURNAL_NAME))
        ),
        reverse=True,
    )


async def watch_runs(runs_root: Path, on_change: Callable[[set[Path]], None], stop: asyncio.Event) -> None:
    """One recursive watcher over the runs root; reports the run dirs that changed."""
    runs_root.mkdir(parents=True, exist_ok=True)
    root = runs_root.resolve()
    async for changes in watchfiles.awatch(
        root, step=WATCH_STEP_MS, debounce=WATCH_STEP_MS * 2, stop_event=stop, recursive=True
    ):
        dirs: set[Path] = set()
        for _change, path in changes:
            p = Path(path)
            if p.name == JOURNAL_NAME:
                dirs.add(p.parent)
            elif p.parent == root:
                dirs.add(p)  # a new run directory
        if dirs:
            on_change(dirs)


async def watch_dir(directory: Path, on_change: Callable[[], None], stop: asyncio.Event) -> None:
    """Watch one directory (observation records) for new or changed files."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    async for _changes in watchfiles.awatch(directory, step=50, stop_event=stop, recursive=False):
        on_change()
