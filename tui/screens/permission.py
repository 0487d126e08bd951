"""The permission prompt for `ask` decisions: allow once, or deny."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from core.projection import AskView


class PermissionScreen(ModalScreen[str | None]):
    BINDINGS = [
        Binding("a", "answer('allow')", "Allow once"),
        Binding("d", "answer('deny')", "Deny"),
        Binding("escape", "dismiss(None)", "Decide later"),
    ]

    def __init__(self, ask: AskView) -> None:
        super().__init__()
        self.ask = ask

    def compose(self) -> ComposeResult:
        ask = self.ask
        details = Text()
        details.append("The agent asks to run a tool call that the policy leaves to you.\n\n")
        details.append(f"Stage {ask.stage} · {ask.kind}\n", style="bold")
        details.append(f"{ask.title}\n")
        if ask.input:
            details.append(f"\ninput: {ask.input}\n")
        if ask.rule:
            details.append(f"policy rule: {ask.rule}\n")
        details.append("\nThe stage clock keeps running while you decide.")
        with Vertical(id="permission-box"):
            yield Static("Permission needed", id="permission-title")
            yield Static(details, id="permission-details")
            with Horizontal(id="permission-buttons"):
                yield Button("Allow once (a)", id="allow", variant="success")
                yield Button("Deny (d)", id="deny", variant="error")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id)

    def action_answer(self, decision: str) -> None:
        self.dismiss(decision)
