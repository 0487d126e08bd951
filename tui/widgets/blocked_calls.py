"""The blocked calls panel: every blocked call; the highlighted one shows its remediation."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from core.projection import BlockedView, RunView
from core.recovery import guidance_for


def detail_text(call: BlockedView) -> Text:
    text = Text()
    text.append(f"Stage {call.stage} · {call.title}\n", style="bold")
    text.append(f"{call.reason}\n")
    if call.cause:
        text.append(f"why: {call.cause}\n")
    text.append(f"class: {call.klass or 'unclassified'}   pattern: {call.pattern}\n")
    if call.input:
        text.append(f"input: {call.input}\n")
    guidance = guidance_for(call.klass)
    text.append("\nHow to do this properly:\n" if guidance else "\nNo remediation for an unclassified deny.")
    if guidance:
        text.append(guidance)
    return text


class BlockedCalls(Vertical):
    DEFAULT_CLASSES = "panel"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.border_title = "Blocked calls"
        self._calls: tuple[BlockedView, ...] = ()

    def compose(self) -> ComposeResult:
        table = DataTable(cursor_type="row", zebra_stripes=False, id="blocked-table")
        table.add_column("St", key="stage", width=2)
        table.add_column("Tool", key="tool", width=20)
        table.add_column("Class", key="klass", width=14)
        yield table
        yield Static("Nothing blocked so far.", id="blocked-detail", markup=False)

    def update_view(self, view: RunView) -> None:
        calls = view.blocked_calls
        if calls == self._calls:
            return
        table = self.query_one(DataTable)
        for i, call in enumerate(calls[len(self._calls) :], start=len(self._calls)):
            title = call.title if len(call.title) <= 20 else call.title[:19] + "…"
            table.add_row(str(call.stage), title, call.klass or "unclassified", key=str(i))
        self._calls = calls
        self.border_title = f"Blocked calls ({view.blocked_total})"
        if calls and table.cursor_row < 0:
            table.move_cursor(row=0)
        self._show(table.cursor_row)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show(event.cursor_row)

    def _show(self, index: int) -> None:
        detail = self.query_one("#blocked-detail", Static)
        if 0 <= index < len(self._calls):
            detail.update(detail_text(self._calls[index]))
        elif not self._calls:
            detail.update("Nothing blocked so far.")
