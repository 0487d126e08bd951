"""The observation inspector: records in a directory, validated; never shows a field
outside the schema (SPEC §8.7)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from core import observation as obs
from tui.messages import ObservationsChanged


def detail(record: dict[str, Any] | None, problems: list[obs.Problem], name: str) -> Text:
    text = Text()
    if record is None:
        text.append(f"{name}\n", style="bold")
        text.append("INVALID — not shown; the rules it broke:\n")
        for p in problems[:20]:
            text.append(f"  • {p.field}: {p.rule}\n")
        return text
    # Only schema fields, each from the validated record.
    text.append(f"{name}\n", style="bold")
    for field in (
        "outcome",
        "phase",
        "failure_kind",
        "exit_code",
        "observed_at",
        "elapsed_seconds",
        "in_flight",
        "server_completion",
        "request_hash",
    ):
        text.append(f"{field:<18} {record[field]}\n")
    text.append("\ncounters\n", style="bold")
    for key in obs.COUNTERS:
        text.append(f"  {key:<20} {record['counters'][key]}\n")
    text.append("\nlimits\n", style="bold")
    limits = record["limits"]
    if not limits:
        text.append("  (none recorded)\n")
    for key in (*obs.LIMIT_SECONDS, *obs.LIMIT_COUNTS):
        if key in limits:
            text.append(f"  {key:<20} {limits[key]}\n")
    text.append("\ncomplete: false — a refusal record is never a success.", style="italic")
    return text


class ObservationsScreen(Screen):
    BINDINGS = [
        Binding("r", "reload", "Reload"),
        Binding("escape", "app.overview", "Runs"),
        Binding("question_mark", "app.help", "Help"),
    ]

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.directory = directory
        self.entries: dict[str, tuple[dict[str, Any] | None, list[obs.Problem]]] = {}

    def compose(self) -> ComposeResult:
        yield Static(f" Refusal observations · {self.directory}", id="obs-title", markup=False)
        with Horizontal(id="obs-body"):
            table = DataTable(cursor_type="row", id="obs-table")
            for key, label in (
                ("time", "Observed"),
                ("phase", "Phase"),
                ("kind", "Failure kind"),
                ("outcome", "Outcome"),
                ("exit", "Exit"),
                ("file", "File"),
            ):
                table.add_column(label, key=key)
            yield table
            yield Static("Select a record.", id="obs-detail", classes="panel", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.action_reload()

    def on_observations_changed(self, _message: ObservationsChanged) -> None:
        self.action_reload()

    @work(thread=True, exclusive=True, group="observations", exit_on_error=False)
    def action_reload(self) -> None:
        if not self.directory.is_dir():
            self.app.call_from_thread(self._missing)
            return
        listing = obs.list_records(self.directory)
        self.app.call_from_thread(self._show, listing)

    def _missing(self) -> None:
        self.query_one("#obs-detail", Static).update(f"{self.directory} does not exist (yet).")

    def _show(self, listing: list[tuple[Path, dict[str, Any] | None, list[obs.Problem]]]) -> None:
        table = self.query_one(DataTable)
        for path, record, problems in listing:
            name = path.name
            if name in self.entries and self.entries[name] == (record, problems):
                continue
            if name in self.entries:
                table.remove_row(name)
            self.entries[name] = (record, problems)
            if record is None:
                first = problems[0] if problems else obs.Problem("(file)", "unreadable")
                table.add_row("INVALID", f"{first.field}: {first.rule}"[:40], "", "", "", name, key=name)
            else:
                table.add_row(
                    record["observed_at"],
                    record["phase"],
                    record["failure_kind"],
                    record["outcome"],
                    str(record["exit_code"]),
                    name,
                    key=name,
                )
        if table.row_count and table.cursor_row < 0:
            table.move_cursor(row=0)
        self._detail(table.cursor_row)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._detail(event.cursor_row)

    def _detail(self, index: int) -> None:
        table = self.query_one(DataTable)
        if index < 0 or index >= table.row_count:
            return
        row_key, _ = table.coordinate_to_cell_key((index, 0))
        name = str(row_key.value)
        record, problems = self.entries[name]
        self.query_one("#obs-detail", Static).update(detail(record, problems, name))
