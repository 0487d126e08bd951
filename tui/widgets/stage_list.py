"""The stage list: status icon, title, rounds as pips, escalations, overall progress."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from core.projection import RunView

ICONS = {"pending": "·", "running": "▶", "completed": "✔", "failed": "✖", "halted": "■"}


class StageList(Static):
    """Renders only from a RunView."""

    DEFAULT_CLASSES = "panel"
    COMPONENT_CLASSES = {
        "stage--pending",
        "stage--running",
        "stage--completed",
        "stage--failed",
        "stage--halted",
        "stage--pips",
        "stage--escalation",
        "stage--progress",
        "stage--current",
    }

    def __init__(self, **kwargs) -> None:
        super().__init__("", **kwargs)
        self.border_title = "Stages"
        self._key: tuple | None = None
        self._view: RunView | None = None

    def notify_style_update(self) -> None:
        super().notify_style_update()
        if self._key is not None and self._view is not None:  # a theme change: recolour
            self._key = None
            self.call_after_refresh(self.update_view, self._view)

    def on_resize(self) -> None:
        if self._view is not None:
            self._key = None
            self.update_view(self._view)

    def update_view(self, view: RunView) -> None:
        self._view = view
        key = (view.stages, view.current_stage, view.max_rounds, view.status)
        if key == self._key:  # diffed: nothing to redraw
            return
        self._key = key
        style = self.get_component_rich_style
        pip_width = view.max_rounds + 4  # pips, overflow and an escalation mark
        width = max(8, (self.content_size.width or 36) - 6 - pip_width)
        text = Text()
        done = sum(1 for s in view.stages if s.status == "completed")
        for s in view.stages:
            running = s.status == "running"
            line = Text()
            line.append(f"{ICONS.get(s.status, '?')} ", style=style(f"stage--{s.status}", partial=True))
            label = f"{s.n}. {s.title}"
            label = label if len(label) <= width else label[: width - 1] + "…"
            line.append(label.ljust(width), style="bold" if running else "")
            pips = "●" * min(s.rounds, view.max_rounds) + "○" * max(0, view.max_rounds - s.rounds)
            line.append(f" {pips}", style=style("stage--pips", partial=True))
            if s.rounds > view.max_rounds:
                line.append(f"+{s.rounds - view.max_rounds}", style=style("stage--pips", partial=True))
            if s.escalations:
                line.append(f" ↺{s.escalations}", style=style("stage--escalation", partial=True))
            if running:
                line.stylize(style("stage--current", partial=True))
            text.append_text(line)
            text.append("\n")
        if not view.stages:
            text.append("(no stages)\n", style=style("stage--pending", partial=True))
        total = len(view.stages)
        bar_width = 16
        filled = round(bar_width * done / total) if total else 0
        text.append("█" * filled + "░" * (bar_width - filled), style=style("stage--progress", partial=True))
        text.append(f" {done}/{total} stages done")
        self.update(text)
