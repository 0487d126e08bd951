"""Opening the TUI: demo, run (in-process), watch (attached), overview, observations.

Inputs are validated before the UI starts, so bad input is exit 2 with a
message on the terminal, never a screen that cannot do anything.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from core import observation as obs
from core.agents.registry import bundled_scenario, scripted_spec
from core.config import data_dir, load_settings, runs_dir
from tui import headless as h

DEMO_STAGE_TIMEOUT = 20.0
DEMO_PLAN_BUDGET = 30.0


def _app(**kwargs: Any):
    from tui.app import PlandeckApp

    return PlandeckApp(**kwargs)


def run_in_tui(args: Any, goal: str | None = None) -> int:
    observer = obs.RefusalObserver()
    observer.begin()
    observer.mark("input_validation")
    plan, opts, settings = h.run_options(args, observer, plan_required=goal is None)

    async def opener():
        handle = await h.open_prepared(plan, opts, goal)
        if args.go_all:
            handle.controller.go_all(origin="cli")
        elif args.go:
            handle.controller.go(origin="cli")
        return handle

    app = _app(runs_root=opts.runs_dir, settings=settings, opener=opener)
    code = app.run() or 0
    if code != 0 and args.observe_refusals:
        failure = next(iter(app.handles.values())).controller.failure_kind if app.handles else None
        h.write_observation(args.observe_refusals, observer, exit_code=code, failure_kind=failure or "cancelled")
    return code


def run_demo() -> int:
    """The bundled demo plan on the scripted agent, with short budgets."""
    from core.plan import load_plan_file
    from core.runner import RunOptions, open_run
    from core.tracker import Budgets

    settings = load_settings()
    workspace = Path(tempfile.mkdtemp(prefix="plandeck-demo-"))
    plan = load_plan_file(bundled_scenario("demo.plan.toml"))
    policy = h.load_policy(None, settings, workspace)
    opts = RunOptions(
        agent=scripted_spec(),
        policy=policy,
        workspace=workspace,
        runs_dir=runs_dir(settings),
        budgets=Budgets(DEMO_STAGE_TIMEOUT, DEMO_PLAN_BUDGET),
    )

    async def opener():
        return await open_run(plan, opts)

    app = _app(runs_root=opts.runs_dir, settings=settings, opener=opener)
    return app.run() or 0


def run_watch(run_dir: Path) -> int:
    settings = load_settings()
    app = _app(runs_root=run_dir.parent, settings=settings, start="run", run_dir=run_dir)
    return app.run() or 0


def run_overview(runs: str | None) -> int:
    settings = load_settings()
    app = _app(runs_root=runs_dir(settings, runs), settings=settings)
    return app.run() or 0


def run_observations(directory: Path | None) -> int:
    settings = load_settings()
    app = _app(
        runs_root=runs_dir(settings),
        settings=settings,
        start="observations",
        observations_dir=directory or data_dir() / "observations",
    )
    return app.run() or 0
