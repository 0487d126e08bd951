"""Go, Go All, Cancel and the guidance input. Always visible: on a run nobody owns,
pressing them shows the refusal — they are never silently disabled."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Button, Input


class PlanControls(Horizontal):
    class Action(Message):
        def __init__(self, action: str, text: str = "") -> None:
            super().__init__()
            self.action = action
            self.text = text

    def __init__(self, *, blink: bool = True, **kwargs) -> None:
        super().__init__(**kwargs)
        self._blink = blink

    def compose(self) -> ComposeResult:
        yield Button("Go", id="go", variant="primary", tooltip="Run the next stage (g)")
        yield Button("Go All", id="go_all", variant="warning", tooltip="Auto-run the rest (G)")
        yield Button("Cancel", id="cancel", variant="error", tooltip="Cancel the plan (c)")
        guidance = Input(placeholder="guidance for the current stage — Enter sends (i)", id="guidance")
        guidance.cursor_blink = self._blink
        yield guidance

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.post_message(self.Action(event.button.id or ""))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(self.Action("guidance", event.value))
        event.input.value = ""
