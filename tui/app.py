"""PlandeckApp: screens, bindings, themes, the command palette and the live-data plumbing.

The app renders only RunViews (folds of journals) and acts only through a
controller port: the in-process controller, a remote one over its control
socket, or the dead-plan port when no live process owns the run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import App
from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider

from core.config import Settings
from core.control import DeadPlanPort, RemotePort, probe_live
from core.notices import DEAD_PLAN_PREFIX
from core.projection import RunView
from core.verdict import Verdict
from themes import THEME_NAMES, THEMES, app_variable_defaults, stylesheet_path
from tui.live import InProcessFeed, RunTail, list_run_dirs, watch_dir, watch_runs
from tui.messages import ObservationsChanged, RunUpdated
from tui.screens.help import HelpScreen
from tui.screens.observations import ObservationsScreen
from tui.screens.run import RunScreen
from tui.screens.runs import RunsScreen

if TYPE_CHECKING:
    from core.runner import RunHandle

VerdictCallback = Callable[[str, Verdict, bool], None]


class PlandeckCommands(Provider):
    """Command palette entries for the plan actions, the screens and the themes."""

    def _commands(self) -> list[tuple[str, str, Callable[[], object]]]:
        app = self.app
        assert isinstance(app, PlandeckApp)
        out: list[tuple[str, str, Callable[[], object]]] = []
        screen = app.screen
        if isinstance(screen, RunScreen):
            out += [
                ("Go", "run the next stage", screen.action_go),
                ("Go All", "auto-run the remaining stages", screen.action_go_all),
                ("Cancel plan", "stop the plan; the running turn is cancelled", screen.action_cancel_plan),
                ("Send guidance", "type guidance for the current stage", screen.action_guidance),
            ]
        out += [
            ("Runs overview", "every run, live", app.action_overview),
            ("Observation inspector", "refusal observations", app.action_observations),
            ("Help", "keys and what they do", app.action_help),
        ]
        for name in [*THEME_NAMES, *sorted(n for n in app.available_themes if n not in THEME_NAMES)]:
            out.append((f"Theme: {name}", "switch the colour theme", partial(setattr, app, "theme", name)))
        return out

    async def discover(self) -> Hits:
        for name, help_text, callback in self._commands():
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, callback in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)


class PlandeckApp(App[int]):
    TITLE = "plandeck"
    CSS_PATH = stylesheet_path()
    COMMANDS = App.COMMANDS | {PlandeckCommands}
    BINDINGS = [
        Binding("question_mark", "help", "Help"),
        Binding("o", "overview", "Runs", show=False),
        Binding("O", "observations", "Observations", show=False),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        *,
        runs_root: Path,
        settings: Settings | None = None,
        start: str = "overview",
        run_dir: Path | None = None,
        opener: Callable[[], Awaitable[RunHandle]] | None = None,
        observations_dir: Path | None = None,
        clock: Callable[[], float] = time.time,
        watch: bool = True,
        blink: bool = True,
        probe_interval: float = 2.0,
        probe: Callable[[Path], bool] = probe_live,
    ) -> None:
        super().__init__()
        self.settings = settings or Settings()
        self.runs_root = runs_root
        self.start = start
        self.start_run_dir = run_dir
        self.opener = opener
        self.observations_dir = observations_dir
        self.clock = clock
        self.watching = watch
        self.blink = blink
        self.probe_interval = probe_interval
        self.probe = probe
        self.tails: dict[Path, RunTail] = {}
        self.views: dict[Path, RunView] = {}
        self.handles: dict[Path, RunHandle] = {}
        self._stop = asyncio.Event()
        self.exit_code = 0
        for theme in THEMES:
            self.register_theme(theme)
        wanted = self.settings.ui.theme
        self.theme = wanted if wanted in self.available_themes else "plandeck-dark"

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return app_variable_defaults(self.current_theme)

    # -- start-up -----------------------------------------------------------------------------
    async def on_mount(self) -> None:
        if self.opener is not None:
            handle = await self.opener()
            self.adopt(handle)
            self.push_screen(RunScreen(handle.run_dir))
        elif self.start == "run" and self.start_run_dir is not None:
            self.open_run(self.start_run_dir)
        elif self.start == "observations":
            self.action_observations()
        else:
            self.action_overview()
        if self.watching:
            self.run_worker(self._watch(), group="watch", description="runs watcher", exit_on_error=False)
            self.set_interval(self.probe_interval, self._probe)
            self.call_after_refresh(self._probe)

    def adopt(self, handle: RunHandle) -> None:
        """Follow an in-process run through its controller's subscription."""
        tail = RunTail(handle.run_dir)
        tail.poll()  # what was written before we subscribed
        feed = InProcessFeed(tail, self._publish)
        handle.journal.subscribe(feed)
        self.tails[handle.run_dir] = tail
        self.handles[handle.run_dir] = handle
        self._publish(tail)

    def tail_for(self, run_dir: Path) -> RunTail:
        tail = self.tails.get(run_dir)
        if tail is None:
            tail = self.tails[run_dir] = RunTail(run_dir, self.probe)
            tail.poll()
            tail.probe()
        return tail

    # -- live data ------------------------------------------------------------------------------
    def _publish(self, tail: RunTail) -> None:
        view = tail.view(now=self.clock())
        self.views[tail.run_dir] = view
        for screen in self.screen_stack:  # one message per batch, to the screens that show this run
            if isinstance(screen, RunsScreen) or (isinstance(screen, RunScreen) and screen.run_dir == tail.run_dir):
                screen.post_message(RunUpdated(tail.run_dir, view))

    def view_of(self, run_dir: Path) -> RunView | None:
        return self.views.get(run_dir)

    def known_views(self) -> list[tuple[Path, RunView]]:
        for run_dir in list_run_dirs(self.runs_root):
            if run_dir not in self.tails:
                self.tail_for(run_dir)
                self.views[run_dir] = self.tails[run_dir].view(now=self.clock())
        return sorted(self.views.items(), key=lambda kv: str(kv[0]), reverse=True)

    async def _watch(self) -> None:
        def changed(dirs: set[Path]) -> None:
            for run_dir in dirs:
                existing = self.tails.get(run_dir)
                if existing is not None and existing.in_process:
                    continue
                interested = existing is not None or any(isinstance(s, RunsScreen) for s in self.screen_stack)
                if not interested or not (run_dir / "journal.jsonl").exists():
                    continue
                tail = self.tail_for(run_dir)
                if tail.poll() or existing is None:
                    self._publish(tail)

        await watch_runs(self.runs_root, changed, self._stop)

    def _probe(self) -> None:
        self.run_worker(self._probe_all, thread=True, group="probe", exclusive=True, exit_on_error=False)

    def _probe_all(self) -> None:
        for tail in list(self.tails.values()):
            if tail.in_process:
                continue
            view = self.views.get(tail.run_dir)
            if view is not None and view.status in ("completed", "cancelled", "failed") and not tail.live:
                continue
            before = tail.live
            if tail.probe() != before:
                self.call_from_thread(self._publish, tail)

    # -- acting -----------------------------------------------------------------------------------
    def act(self, run_dir: Path, action: str, *args: str, on_verdict: VerdictCallback) -> None:
        handle = self.handles.get(run_dir)
        if handle is not None and not handle.journal.closed:
            verdict = _call(handle.controller, action, args, origin="ui")
            self._verdict(action, verdict, True, on_verdict)
            return
        tail = self.tail_for(run_dir)
        if not tail.live:
            # No live controller owns it: the dead-plan refusal, out loud, never silence.
            verdict = _call(DeadPlanPort(run_dir), action, args)
            self._verdict(action, verdict, False, on_verdict)
            return

        def remote() -> None:
            verdict = _call(RemotePort(run_dir), action, args)
            # A controller that answered journaled its verdict; one that vanished meanwhile did not.
            journaled = not verdict.text.startswith(DEAD_PLAN_PREFIX)
            self.call_from_thread(self._verdict, action, verdict, journaled, on_verdict)

        self.run_worker(remote, thread=True, group="actions", exit_on_error=False)

    def _verdict(self, action: str, verdict: Verdict, from_journal: bool, on_verdict: VerdictCallback) -> None:
        names = {"go": "Go", "go_all": "Go All", "cancel": "Cancel", "guidance": "Guidance", "permission": "Permission"}
        severity = {"accepted": "information", "queued": "information", "refused": "error"}[verdict.kind]
        self.notify(verdict.text, title=f"{names.get(action, action)}: {verdict.kind}", severity=severity, timeout=6)  # type: ignore[arg-type]
        if verdict.kind == "refused":
            self._bell()
        on_verdict(action, verdict, from_journal)

    def announce(self, text: str, *, severity: str = "information", bell: bool = False) -> None:
        if self.settings.ui.notifications:
            self.notify(text, severity=severity, timeout=8)  # type: ignore[arg-type]
        if bell:
            self._bell()

    def _bell(self) -> None:
        if self.settings.ui.bell:
            self.bell()

    # -- navigation ---------------------------------------------------------------------------------
    def open_run(self, run_dir: Path) -> None:
        tail = self.tail_for(run_dir)
        self.views[run_dir] = tail.view(now=self.clock())
        self.push_screen(RunScreen(run_dir))

    def action_overview(self) -> None:
        for screen in self.screen_stack:
            if isinstance(screen, RunsScreen):
                while self.screen is not screen:
                    self.pop_screen()
                return
        self.push_screen(RunsScreen(self.runs_root))

    def action_observations(self) -> None:
        from core.config import data_dir

        directory = self.observations_dir or data_dir() / "observations"
        if self.watching and directory.is_dir():
            self.run_worker(
                watch_dir(directory, self._observations_changed, self._stop),
                group="watch-observations",
                exclusive=True,
                exit_on_error=False,
            )
        self.push_screen(ObservationsScreen(directory))

    def _observations_changed(self) -> None:
        for screen in self.screen_stack:
            if isinstance(screen, ObservationsScreen):
                screen.post_message(ObservationsChanged())

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        self._stop.set()
        for handle in list(self.handles.values()):
            code = handle.controller.exit_code
            self.exit_code = code if code is not None else self.exit_code
            await handle.close("the UI was closed")
        self.exit(self.exit_code)


def _call(port, action: str, args: tuple[str, ...], origin: str | None = None) -> Verdict:
    kwargs = {"origin": origin} if origin else {}
    if action == "guidance":
        return port.guidance(args[0], **kwargs)
    if action == "permission":
        return port.permission(args[0], args[1], **kwargs)
    return getattr(port, action)(**kwargs)
