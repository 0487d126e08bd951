"""The runs overview: every run under the runs directory, live; Enter opens one."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from core.projection import RunView
from tui.messages import RunUpdated

COLUMNS = (
    ("mark", " ", 2),
    ("status", "Status", 12),
    ("goal", "Goal", None),
    ("agent", "Agent", 14),
    ("stage", "Stage", 7),
    ("budget", "Budget", 7),
    ("blocked", "Blocked", 7),
    ("run", "Run", 20),
)


def cells(run_dir: Path, view: RunView, styles: dict[str, object]) -> dict[str, object]:
    total = len(view.stages)
    current = view.current_stage or (view.completed_stages if view.completed_stages else 0)
    frac = view.budget_fraction
    budget = "off" if view.budget.budget_seconds == 0 else ("—" if frac is None else f"{int(100 * frac)}%")
    mark = Text("●", style=styles["needs"]) if view.needs_input else Text(" ")
    status = Text(view.status.replace("_", " "), style=styles.get(view.status, ""))
    return {
        "mark": mark,
        "status": status,
        "goal": view.goal or "(planning…)",
        "agent": view.agent,
        "stage": f"{current}/{total}" if total else "—",
        "budget": budget,
        "blocked": str(view.blocked_total) if view.blocked_total else "",
        "run": run_dir.name,  # the directory name: known before the journal says anything
    }


class RunsScreen(Screen):
    BINDINGS = [
        Binding("enter", "open", "Open", show=True),
        Binding("O", "app.observations", "Observations"),
        Binding("question_mark", "app.help", "Help"),
    ]
    COMPONENT_CLASSES = {"runs--needs", "runs--failed", "runs--done", "runs--dead", "runs--halted"}

    def __init__(self, runs_root: Path) -> None:
        super().__init__()
        self.runs_root = runs_root
        self.rows: dict[Path, dict[str, object]] = {}

    def compose(self) -> ComposeResult:
        yield Static(f" Runs · {self.runs_root}", id="runs-title", markup=False)
        table = DataTable(cursor_type="row", id="runs-table")
        for key, label, width in COLUMNS:
            table.add_column(label, key=key, width=width)
        yield table
        yield Static("No runs yet. Try `plandeck demo`.", id="runs-empty", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        for run_dir, view in self.app.known_views():
            self._upsert(run_dir, view)

    def _styles(self) -> dict[str, object]:
        get = self.get_component_rich_style
        return {
            "needs": get("runs--needs", partial=True),
            "failed": get("runs--failed", partial=True),
            "cancelled": get("runs--failed", partial=True),
            "completed": get("runs--done", partial=True),
            "dead": get("runs--dead", partial=True),
            "halted": get("runs--halted", partial=True),
        }

    def on_run_updated(self, message: RunUpdated) -> None:
        self._upsert(message.run_dir, message.view)

    def _upsert(self, run_dir: Path, view: RunView) -> None:
        table = self.query_one(DataTable)
        new = cells(run_dir, view, self._styles())
        old = self.rows.get(run_dir)
        key = str(run_dir)
        if old is None:
            # newest first: runs are named by their start time
            index = sum(1 for other in self.rows if str(other) > key)
            table.add_row(*new.values(), key=key)
            if index < table.row_count - 1:
                self._resort(table)
        else:
            for column, value in new.items():
                if old.get(column) != value:
                    table.update_cell(key, column, value)
        self.rows[run_dir] = new
        self.query_one("#runs-empty").display = not self.rows

    @staticmethod
    def _resort(table: DataTable) -> None:
        table.sort("run", reverse=True)

    def action_open(self) -> None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return
        row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        if row_key.value:
            self.app.open_run(Path(row_key.value))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value:
            self.app.open_run(Path(event.row_key.value))
