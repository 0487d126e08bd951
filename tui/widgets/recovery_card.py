"""A recovery card (SPEC §5.9): collapsed by default, Enter or a click shows the exact body."""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import Static

from core.recovery import parse_recovery_card


class RecoveryCard(Static, can_focus=True):
    BINDINGS = [Binding("enter,space", "toggle", "Expand", show=False)]
    COMPONENT_CLASSES = {"card--title", "card--chip", "card--detail", "card--body"}

    def __init__(self, text: str, **kwargs) -> None:
        super().__init__("", **kwargs)
        self.text = text
        self.card = parse_recovery_card(text)
        self.expanded = False

    def on_mount(self) -> None:
        self._draw()

    def set_text(self, text: str) -> None:
        if text != self.text:
            self.text = text
            self.card = parse_recovery_card(text)
            self._draw()

    def action_toggle(self) -> None:
        self.expanded = not self.expanded
        self.set_class(self.expanded, "-expanded")
        self._draw()

    def on_click(self) -> None:
        self.action_toggle()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        if self.is_mounted:
            self.call_after_refresh(self._draw)

    def _draw(self) -> None:
        card = self.card
        style = self.get_component_rich_style
        text = Text()
        if card is None:  # not a card after all: show the row as it is
            text.append(self.text)
            self.update(text)
            return
        text.append("▾ " if self.expanded else "▸ ")
        text.append(f"⛔ {card.title}", style=style("card--title", partial=True))
        if card.chip:
            text.append("  ")
            text.append(f" {card.chip} ", style=style("card--chip", partial=True))
        text.append(f"  {card.detail}", style=style("card--detail", partial=True))
        if self.expanded:
            text.append("\n")
            text.append(card.body, style=style("card--body", partial=True))
        self.update(text)


def is_card(widget: Widget) -> bool:
    return isinstance(widget, RecoveryCard)
