"""The help screen: what every key does."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """\
[b]plandeck[/b] — supervise an agent's plan, stage by stage

[b]On a run[/b]
  [b]g[/b]        Go — run the next stage, then pause with a Go row
  [b]G[/b]        Go All — hand the remaining stages to auto-run
  [b]c[/b]        Cancel — stop the plan (the running turn is cancelled)
  [b]i[/b]        guidance — type a message for the current stage, Enter sends it
  [b]b[/b]        blocked calls — move through them to read each remediation
  [b]Enter[/b]    on a recovery card: expand or collapse its exact text
  [b]Esc[/b]      back to the runs overview

[b]Everywhere[/b]
  [b]?[/b]        this help
  [b]o[/b] / [b]O[/b]    runs overview / observation inspector
  [b]ctrl+p[/b]   command palette: actions and themes
  [b]q[/b]        quit

Every press answers: accepted, queued or refused — never silence.
A run whose process is gone refuses Go out loud; its results stay on disk.
Ceilings: 3 rounds per stage, the stage timeout, and the plan budget
(auto-run only, one ⏳ warning at 75 %).
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            yield Static(HELP, id="help-text")
            yield Static("Esc closes", classes="dim")
