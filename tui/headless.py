"""The headless commands: run/plan without a UI, show, the port from a shell, checks.

Nothing here imports textual; the TUI commands live in tui.app and are
imported only when a screen is opened.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core import events as ev
from core import observation as obs
from core.agents import registry
from core.config import Settings, load_settings, runs_dir
from core.errors import InputError
from core.journal import JOURNAL_NAME, JournalReader
from core.projection import RunView, view_to_json
from core.tracker import Budgets

EXIT_OK, EXIT_USAGE, EXIT_HALTED, EXIT_FAILED, EXIT_REFUSED, EXIT_CANCELLED = 0, 2, 3, 4, 5, 130


def err(message: str) -> None:
    print(f"plandeck: {message}", file=sys.stderr)


# -- run directories ----------------------------------------------------------------------


def require_run_dir(value: str) -> Path:
    path = Path(value).expanduser()
    if not path.is_dir():
        raise InputError(value, "not a directory")
    if not (path / JOURNAL_NAME).is_file():
        raise InputError(value, f"not a plandeck run directory (no {JOURNAL_NAME})")
    return path.resolve()


def load_view(run_dir: Path, *, live: bool | None = None) -> RunView:
    from core.control import probe_live
    from core.projection import Folder, replay

    folder = replay(JournalReader(run_dir / JOURNAL_NAME), Folder(run_dir))
    return folder.view(live=probe_live(run_dir) if live is None else live)


# -- show --------------------------------------------------------------------------------------

_ICONS = {"pending": "·", "running": "▶", "completed": "✔", "failed": "✖", "halted": "■"}


def render_view(view: RunView) -> str:
    from core.durations import human_duration

    lines = [f"Run {view.run_id} · {view.goal}"]
    live = "yes" if view.live else "no"
    lines.append(
        f"agent {view.agent} · status {view.status} · auto-run {'on' if view.auto_run else 'off'} · live {live}"
    )
    b = view.budget
    if b.budget_seconds is not None:
        if b.budget_seconds == 0:
            lines.append("plan budget: disabled")
        else:
            used = b.elapsed_seconds or 0.0
            lines.append(
                f"plan budget: {human_duration(used)} of {human_duration(b.budget_seconds)} "
                f"({int(100 * used / b.budget_seconds)}%){' · 75% warning posted' if b.warned else ''}"
            )
    lines.append("Stages:")
    for s in view.stages:
        esc = f" · escalations {s.escalations}" if s.escalations else ""
        res = f" · {s.result_path}" if s.result_path else ""
        lines.append(f"  {_ICONS.get(s.status, '?')} {s.n}. {s.title} [{s.status}] rounds {s.rounds}{esc}{res}")
    if not view.stages:
        lines.append("  (no stages)")
    if view.pending_asks:
        lines.append("Waiting for a permission decision:")
        for a in view.pending_asks:
            lines.append(f"  {a.request_id}: {a.title} — answer with: plandeck allow|deny RUN_DIR {a.request_id}")
    if view.blocked_calls:
        lines.append(f"Blocked calls ({view.blocked_total}):")
        for c in view.blocked_calls:
            lines.append(f"  stage {c.stage} · {c.title} · {c.reason} · {c.klass or 'unclassified'}")
    if view.recovery_cards:
        lines.append(f"Recovery turns sent: {view.cards_total}")
    if view.notices:
        lines.append("Notices:")
        for n in view.notices:
            first, *rest = n.text.splitlines() or [""]
            lines.append(f"  {first}")
            lines.extend(f"    {r}" for r in rest)
    if view.defects:
        lines.append(f"Journal defects ({view.defects_total}, skipped):")
        lines.extend(f"  line {d.line}: {d.reason}" for d in view.defects[:20])
    if view.torn_tail:
        lines.append(
            f"Journal: line {view.torn_tail['line']} is incomplete ({view.torn_tail['bytes']} bytes); held back"
        )
    return "\n".join(lines)


def cmd_show(run_dir: str, as_json: bool, transcript: bool) -> int:
    view = load_view(require_run_dir(run_dir))
    if as_json:
        print(json.dumps(view_to_json(view, transcript=transcript), ensure_ascii=False, indent=2))
    else:
        print(render_view(view))
    return EXIT_OK


# -- the port from a shell ---------------------------------------------------------------------


def cmd_action(run_dir: str, action: str, *args: str) -> int:
    from core.control import port_for

    port = port_for(require_run_dir(run_dir))
    if action == "guidance":
        verdict = port.guidance(args[0])
    elif action in ("allow", "deny"):
        verdict = port.permission(args[0], action)
    else:
        verdict = getattr(port, action)()
    print(f"{verdict.kind}: {verdict.text}")
    return EXIT_OK if verdict.ok else EXIT_REFUSED


# -- running a plan headless ---------------------------------------------------------------------


def _line(text: str) -> None:
    stamp = time.strftime("%H:%M:%S")
    for i, part in enumerate(text.splitlines() or [""]):
        print(f"[{stamp}] {part}" if i == 0 else f"           {part}", flush=True)


def printer(run_dir: Path) -> Callable[[ev.Event], None]:
    """What a headless run prints as it goes: the notices, actions and blocks."""

    def on_event(e: ev.Event) -> None:
        if isinstance(e, ev.Notice):
            _line(e.text)
        elif isinstance(e, ev.StageStarted):
            _line(f"───── Stage {e.n}: {e.title} ─────")
        elif isinstance(e, ev.ActionTaken):
            _line(f"{e.action} → {e.verdict}: {e.text}")
        elif isinstance(e, ev.BlockedCall):
            _line(f"⛔ blocked: {e.title} — {e.reason}")
        elif isinstance(e, ev.RecoveryQueued):
            _line(f"↻ recovery turn queued ({'awareness' if e.answered else 'continue'}, {e.blocked_count} blocked)")
        elif isinstance(e, ev.PermissionAsked):
            _line(f"? permission needed: {e.title} — plandeck allow|deny {run_dir} {e.request_id}")
        elif isinstance(e, ev.TurnEnded) and e.stop_reason not in ("end_turn",):
            _line(f"turn ended: {e.stop_reason}")

    return on_event


def budgets_from(args: Any, settings: Settings) -> Budgets | None:
    """Explicit budgets when a flag gives one (the other comes from config)."""
    if args.stage_timeout is None and args.plan_budget is None:
        return None
    base = settings.budgets
    return Budgets(
        base.stage_timeout_seconds if args.stage_timeout is None else args.stage_timeout,
        base.max_plan_duration_seconds if args.plan_budget is None else args.plan_budget,
    )


def load_policy(path: str | None, settings: Settings, workspace: Path):
    from core.policy import Policy

    variables = {"WORKSPACE": str(workspace)}
    chosen = path or settings.policy
    if chosen:
        return Policy.load(Path(chosen).expanduser(), variables=variables)
    return Policy.default_policy(variables=variables)


def write_observation(directory: str, observer: obs.RefusalObserver, *, exit_code: int, failure_kind: str) -> None:
    """Write the refusal observation; on any failure print only the fixed diagnostic."""
    try:
        outcome = "cancelled" if exit_code == EXIT_CANCELLED else "refused"
        record = observer.snapshot(outcome=outcome, failure_kind=failure_kind, exit_code=exit_code)
        obs.write_private_observation(Path(directory).expanduser(), record)
    except obs.CustodyError:
        print(obs.CUSTODY_DIAGNOSTIC, file=sys.stderr)
    except Exception:
        print(obs.WRITE_DIAGNOSTIC, file=sys.stderr)


def cmd_run(args: Any, *, goal: str | None = None) -> int:
    """`plandeck run … --headless` and `plandeck plan … --headless`."""
    observer = obs.RefusalObserver()
    observer.begin()
    observer.mark("input_validation")
    code = EXIT_USAGE
    failure_kind = "policy_refused"
    try:
        code, failure_kind = asyncio.run(_run_headless(args, goal, observer))
    except InputError as exc:
        err(str(exc))
        code, failure_kind = EXIT_USAGE, "policy_refused"
    except KeyboardInterrupt:
        code, failure_kind = EXIT_CANCELLED, "cancelled"
    if code != EXIT_OK and getattr(args, "observe_refusals", None):
        write_observation(args.observe_refusals, observer, exit_code=code, failure_kind=failure_kind)
    return code


def run_options(args: Any, observer: obs.RefusalObserver | None, *, plan_required: bool = True):
    """Validate a run's inputs (plan file, config, policy, agent) and build its options.

    Raises InputError naming what is wrong; nothing has started yet.
    """
    from core.config import budget_loader
    from core.plan import load_plan_file
    from core.runner import RunOptions

    settings = load_settings()
    plan = load_plan_file(Path(args.plan).expanduser()) if plan_required else None
    workspace = Path(args.workspace).expanduser().resolve() if args.workspace else Path.cwd()
    policy = load_policy(args.policy, settings, workspace)
    spec = registry.resolve(args.agent or settings.default_agent, settings)
    limits = settings.budgets
    opts = RunOptions(
        agent=spec,
        policy=policy,
        workspace=workspace,
        runs_dir=runs_dir(settings, args.runs_dir),
        budgets=budgets_from(args, settings),
        budget_loader=budget_loader(),
        max_rounds=limits.max_stage_rounds,
        max_escalations=limits.max_stage_escalations,
        observer=observer,
    )
    return plan, opts, settings


async def open_prepared(plan, opts, goal: str | None):
    from core.runner import open_planned_run, open_run

    if goal is not None:
        return await open_planned_run(goal, opts)
    return await open_run(plan, opts)


async def prepare_run(args: Any, goal: str | None, observer: obs.RefusalObserver | None):
    """Validate the inputs of run/plan and open the run."""
    plan, opts, _settings = run_options(args, observer, plan_required=goal is None)
    return await open_prepared(plan, opts, goal)


async def _run_headless(args: Any, goal: str | None, observer: obs.RefusalObserver) -> tuple[int, str]:
    handle = await prepare_run(args, goal, observer)
    controller = handle.controller
    print(f"run {handle.run_id} · {handle.run_dir}", flush=True)
    handle.journal.subscribe(printer(handle.run_dir))
    loop = asyncio.get_running_loop()
    interrupted = asyncio.Event()

    def on_signal() -> None:
        if not controller.terminal:
            controller.cancel(origin="signal")
        interrupted.set()
        handle.state_changed.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    refused = False
    try:
        if args.go_all:
            refused = not controller.go_all(origin="cli").ok
        elif args.go:
            refused = not controller.go(origin="cli").ok
        if refused:
            code, kind = EXIT_REFUSED, controller.failure_kind or "policy_refused"
        else:
            if args.go_all:
                # Auto-run: done when it stops (completed, halted, failed, cancelled).
                await handle.wait(lambda c: interrupted.is_set() or (not c.running and c.state != "running"))
            else:
                print(f"serving Go / Go All / Cancel / guidance on {handle.run_dir / 'control.sock'}", flush=True)
                await handle.wait(lambda c: interrupted.is_set() or c.terminal)
            await controller.wait_idle()
            code = controller.exit_code
            if code is None:
                code = EXIT_CANCELLED if interrupted.is_set() else EXIT_HALTED
            kind = controller.failure_kind or ("cancelled" if code == EXIT_CANCELLED else "internal_error")
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await handle.close("headless run ended")
    return code, kind


# -- agents ---------------------------------------------------------------------------------------


def cmd_agents(settings: Settings) -> int:
    for spec in registry.all_agents(settings):
        found = spec.resolved_command() is not None
        mark = "✔" if found else "✖"
        where = " ".join([spec.command, *spec.args]) if not spec.scripted else "built-in scripted agent (demo scenario)"
        print(f"{mark} {spec.name:<10} {where}")
        if not found and spec.install:
            print(f"             install: {spec.install}")
    return EXIT_OK


def cmd_agents_check(name: str, settings: Settings, workspace: str | None) -> int:
    from core.agents.check import check_agent

    spec = registry.resolve(name, settings)
    ws = Path(workspace).expanduser().resolve() if workspace else Path.cwd()
    ok, lines = asyncio.run(check_agent(spec, ws))
    for line in lines:
        print(line)
    return EXIT_OK if ok else EXIT_FAILED


# -- observations ------------------------------------------------------------------------------------


def cmd_observations_validate(files: list[str]) -> int:
    bad = 0
    for f in files:
        _, problems = obs.read_record(Path(f))
        if problems:
            bad += 1
            for p in problems:
                print(f"{f}: {p}")
        else:
            print(f"{f}: valid")
    return 1 if bad else 0


def cmd_observations_list(directory: str, as_json: bool) -> int:
    path = Path(directory).expanduser()
    if not path.is_dir():
        raise InputError(directory, "not a directory")
    rows = []
    for file, record, problems in obs.list_records(path):
        if record is None:
            rows.append({"file": file.name, "valid": False, "problems": [str(p) for p in problems]})
        else:
            rows.append({"file": file.name, "valid": True, **{k: record[k] for k in obs.FIELDS}})
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no observation records in {path}")
    for r in rows:
        if r["valid"]:
            when, outcome, phase, kind = r["observed_at"], r["outcome"], r["phase"], r["failure_kind"]
            print(f"{when}  {outcome:<9} {phase:<22} {kind:<18} exit {r['exit_code']}  {r['file']}")
        else:
            print(f"INVALID  {r['file']}: {'; '.join(r['problems'][:3])}")
    return 0


# -- policy ---------------------------------------------------------------------------------------------


def cmd_policy_check(args: Any, settings: Settings) -> int:
    from core.policy import ToolRequest

    workspace = Path(args.workspace).expanduser().resolve() if args.workspace else Path.cwd()
    policy = load_policy(args.policy, settings, workspace)
    raw: dict[str, Any] = {}
    if args.command:
        raw["command"] = args.command
    if args.url:
        raw["url"] = args.url
    request = ToolRequest.from_tool_call(
        title=args.title or args.command or (args.path[0] if args.path else "tool call"),
        kind=args.kind,
        raw_input=raw,
        locations=args.path or [],
        origin=args.origin,
    )
    decision = policy.decide(request, workspace=str(workspace))
    print(f"decision: {decision.action}")
    if decision.action != "allow" or decision.rule_id:
        print(f"rule:     {decision.rule_id or '(unnamed)'}")
        print(f"pattern:  {decision.pattern}")
        print(f"why:      {decision.cause}")
    if decision.action == "deny":
        from core.recovery import classify, guidance_for

        klass = classify(decision.rule_id, decision.klass, decision.cause, request.title)
        print(f"reason:   {decision.reason}")
        print(f"class:    {klass or 'unclassified (no guidance)'}")
        if guidance_for(klass):
            print(f"guidance: {guidance_for(klass)}")
    others = [
        (rule, pattern)
        for rule, pattern in policy.explain(request, workspace=str(workspace))
        if not (rule.id == decision.rule_id and pattern == decision.pattern)
    ]
    if others:
        print("also matched (lower precedence or later in the file):")
        for rule, pattern in others:
            print(f"  {rule.decision:<5} {rule.label()} ({pattern})")
    print(f"policy:   {policy.source}")
    return EXIT_OK
