"""The transcript: keyed rows, diffed against each new view, windowed, follow-the-tail."""

from __future__ import annotations

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from core.projection import Row, RunView
from core.recovery import parse_recovery_card
from tui.widgets.recovery_card import RecoveryCard

TOOL_ICONS = {"pending": "…", "in_progress": "⟳", "completed": "✓", "failed": "✗", "blocked": "⛔"}
THOUGHT_CHARS = 400
MOUNT_SLICE = 24  # rows mounted per frame


def render_row(row: Row, max_rounds: int = 3) -> Text:
    kind = row.kind
    if kind == "separator":
        return Text(row.text)
    if kind == "agent":
        return Text(row.text.rstrip("\n"))
    if kind == "thought":
        body = row.text if len(row.text) <= THOUGHT_CHARS else row.text[: THOUGHT_CHARS - 1] + "…"
        return Text(f"💭 {body}")
    if kind == "tool":
        icon = TOOL_ICONS.get(row.status or "", "·")
        text = Text(f"{icon} {row.text}  [{row.status}]")
        if row.detail:
            detail = row.detail if len(row.detail) <= 160 else row.detail[:159] + "…"
            text.append(f"\n   {detail}")
        return text
    if kind == "blocked":
        return Text(f"⛔ blocked: {row.text}")
    if kind == "notice":
        return Text(row.text)
    if kind == "action":
        names = {
            "go": "Go",
            "go_all": "Go All",
            "cancel": "Cancel",
            "guidance": "Guidance",
            "allow": "Allow",
            "deny": "Deny",
        }
        return Text(f"▸ {names.get(row.sub or '', row.sub)} → {row.status}: {row.text}")
    if kind == "prompt":
        what = {"stage": "stage prompt", "planning": "planning prompt", "continuation": "continuation"}.get(
            row.sub or "", "prompt"
        )
        return Text(f"→ {what} sent ({len(row.text):,} characters)")
    if kind == "guidance":
        return Text(f"✎ guidance: {row.text}")
    if kind == "turn":
        return Text(f"· turn ended: {row.text} · round {row.sub} of {max_rounds}")
    if kind == "ask":
        state = {"pending": "waiting for you", "allow": "allowed", "deny": "denied", "cancelled": "cancelled"}
        return Text(f"? permission: {row.text} — {state.get(row.status or '', row.status)}")
    if kind == "steer":
        return Text(f"↪ block reason sent in-band ({row.text})")
    if kind == "local":
        return Text(row.text)
    return Text(row.text)


class TranscriptRow(Static):
    def __init__(self, row: Row, max_rounds: int) -> None:
        super().__init__(render_row(row, max_rounds), markup=False)
        self.row = row
        self.add_class(f"-{row.kind}")
        if row.sub and row.kind in ("notice", "action"):
            self.add_class(f"-{row.kind}-{row.sub}")
        if row.kind == "tool" and row.status:
            self.add_class(f"-tool-{row.status}")

    def set_row(self, row: Row, max_rounds: int) -> None:
        if row == self.row:
            return
        if self.row.kind == "tool":
            self.remove_class(f"-tool-{self.row.status}")
            self.add_class(f"-tool-{row.status}")
        self.row = row
        self.update(render_row(row, max_rounds))


class Transcript(VerticalScroll):
    """Renders the view's transcript window plus UI-only rows (e.g. a dead-plan refusal)."""

    DEFAULT_CLASSES = "panel"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.border_title = "Transcript"
        self._widgets: dict[int, Static] = {}
        self._local: list[Row] = []
        self._view: RunView | None = None
        self._pending: list[Row] = []
        self._following = True
        self._pinned_y = 0.0

    def add_local(self, row: Row) -> None:
        self._local.append(row)
        if self._view is not None:
            self.update_view(self._view)

    def update_view(self, view: RunView) -> None:
        self._view = view
        rows = list(view.transcript) + self._local
        # Follow the tail unless the operator scrolled up since we last went there.
        following = self.scroll_y >= min(self.max_scroll_y, self._pinned_y) - 1
        keys = {r.key for r in rows}
        with self.app.batch_update():
            stale = [self._widgets.pop(k) for k in [k for k in self._widgets if k not in keys]]
            if stale:
                self.remove_children(stale)  # one removal, not one per row
            for row in rows:
                widget = self._widgets.get(row.key)
                if isinstance(widget, TranscriptRow):
                    widget.set_row(row, view.max_rounds)
                elif isinstance(widget, RecoveryCard):
                    widget.set_text(row.text)
        self._pending = [r for r in rows if r.key not in self._widgets]
        self._following = following
        self._mount_some()

    def _mount_some(self) -> None:
        """Mount new rows a slice at a time, so a burst never freezes a frame."""
        if not self._pending or self._view is None:
            return
        batch, self._pending = self._pending[:MOUNT_SLICE], self._pending[MOUNT_SLICE:]
        fresh = []
        for row in batch:
            if row.key in self._widgets:
                continue
            widget = self._row_widget(row, self._view.max_rounds)
            self._widgets[row.key] = widget
            fresh.append(widget)
        if fresh:
            self.mount_all(fresh)
        if self._following:
            self.call_after_refresh(self._to_end)
        if self._pending:
            self.call_after_refresh(self._mount_some)

    def _to_end(self) -> None:
        self.scroll_end(animate=False, immediate=True)
        self._pinned_y = self.max_scroll_y

    @staticmethod
    def _row_widget(row: Row, max_rounds: int) -> Static:
        if row.kind == "recovery" and parse_recovery_card(row.text) is not None:
            return RecoveryCard(row.text, classes="-recovery")
        return TranscriptRow(row, max_rounds)
