"""`plandeck` — the command line (SPEC §12).

Textual is imported only by the commands that open a screen, so the headless
commands stay light.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from core.errors import InputError
from tui import headless as h


def _run_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--agent", help="agent name from config or presets, or scripted:FILE (default: scripted)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--go", action="store_true", help="run the first stage right away (attended)")
    mode.add_argument("--go-all", action="store_true", help="hand the whole plan to auto-run right away")
    p.add_argument("--headless", action="store_true", help="no UI: print progress, serve the control socket")
    p.add_argument("--runs-dir", help="where run directories live (default: XDG data dir)/runs")
    p.add_argument("--workspace", help="the agent's working directory (default: the current directory)")
    p.add_argument("--stage-timeout", type=_seconds, metavar="S", help="stage timeout in seconds (0 disables)")
    p.add_argument(
        "--plan-budget", type=_seconds, metavar="S", help="whole-plan budget in seconds for auto-run (0 disables)"
    )
    p.add_argument("--policy", help="a policy TOML file (default: the built-in policy)")
    p.add_argument(
        "--observe-refusals", metavar="DIR", help="write a refusal observation here if the run does not succeed"
    )


def _seconds(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not (0 <= number <= 7 * 24 * 3600):
        raise argparse.ArgumentTypeError(f"{value!r} must be between 0 and 604800 seconds")
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="plandeck", description="Supervise AI-agent plans from a terminal.")
    sub = parser.add_subparsers(dest="cmd")

    sub.add_parser("demo", help="the bundled demo plan on the scripted agent (TUI)")

    p = sub.add_parser("run", help="start a run of a plan file")
    p.add_argument("plan")
    _run_flags(p)

    p = sub.add_parser("plan", help="ask an agent for a plan, then run it")
    p.add_argument("goal")
    _run_flags(p)

    p = sub.add_parser("ui", help="the runs overview")
    p.add_argument("--runs-dir")

    p = sub.add_parser("watch", help="follow one run live")
    p.add_argument("run_dir")

    p = sub.add_parser("show", help="print a run's projection")
    p.add_argument("run_dir")
    p.add_argument("--json", action="store_true")
    p.add_argument("--transcript", action="store_true", help="include the transcript window in --json")

    for name, helptext in (
        ("go", "run the next stage"),
        ("go-all", "auto-run the rest"),
        ("cancel", "cancel the plan"),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("run_dir")
    p = sub.add_parser("guide", help="send guidance to the current stage")
    p.add_argument("run_dir")
    p.add_argument("text")
    for name in ("allow", "deny"):
        p = sub.add_parser(name, help=f"{name} a pending permission request")
        p.add_argument("run_dir")
        p.add_argument("request_id")

    p = sub.add_parser("observations", help="inspect refusal observations (TUI), or: validate FILE… | list DIR")
    p.add_argument("rest", nargs="*")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("agents", help="list agents, or: check NAME")
    p.add_argument("rest", nargs="*")
    p.add_argument("--workspace")

    p = sub.add_parser("policy", help="explain policy decisions: check [options] | default")
    p.add_argument("action", choices=["check", "default"])
    p.add_argument("--policy")
    p.add_argument("--kind", default="other", help="ACP tool kind: read, edit, delete, move, execute, fetch, other")
    p.add_argument("--title")
    p.add_argument("--command", help="command text, as an agent would run it")
    p.add_argument("--path", action="append", help="a path the call touches (repeatable)")
    p.add_argument("--url")
    p.add_argument("--origin", default="permission", choices=["permission", "fs_read", "fs_write", "terminal"])
    p.add_argument("--workspace")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _dispatch(args)
    except InputError as exc:
        h.err(str(exc))
        return h.EXIT_USAGE
    except KeyboardInterrupt:
        return h.EXIT_CANCELLED


def _dispatch(args: argparse.Namespace) -> int:
    from core.config import load_settings

    cmd = args.cmd
    if cmd in ("run", "plan"):
        goal = args.goal if cmd == "plan" else None
        if args.headless:
            return h.cmd_run(args, goal=goal)
        from tui.launch import run_in_tui

        return run_in_tui(args, goal=goal)
    if cmd == "show":
        return h.cmd_show(args.run_dir, args.json, args.transcript)
    if cmd in ("go", "go-all", "cancel"):
        return h.cmd_action(args.run_dir, cmd.replace("-", "_"))
    if cmd == "guide":
        return h.cmd_action(args.run_dir, "guidance", args.text)
    if cmd in ("allow", "deny"):
        return h.cmd_action(args.run_dir, cmd, args.request_id)
    if cmd == "observations":
        rest = args.rest
        if rest and rest[0] == "validate":
            if len(rest) < 2:
                raise InputError("observations validate", "give at least one FILE")
            return h.cmd_observations_validate(rest[1:])
        if rest and rest[0] == "list":
            if len(rest) != 2:
                raise InputError("observations list", "give exactly one DIR")
            return h.cmd_observations_list(rest[1], args.json)
        if len(rest) > 1:
            raise InputError("observations", "give at most one DIR")
        from tui.launch import run_observations

        return run_observations(Path(rest[0]).expanduser() if rest else None)
    if cmd == "agents":
        settings = load_settings()
        if not args.rest:
            return h.cmd_agents(settings)
        if args.rest[0] == "check" and len(args.rest) == 2:
            return h.cmd_agents_check(args.rest[1], settings, args.workspace)
        raise InputError("agents", "usage: plandeck agents [check NAME]")
    if cmd == "policy":
        if args.action == "default":
            from core.policy import default_policy_text

            print(default_policy_text(), end="")
            return 0
        return h.cmd_policy_check(args, load_settings())
    from tui.launch import run_demo, run_overview, run_watch

    if cmd == "demo":
        return run_demo()
    if cmd == "watch":
        return run_watch(h.require_run_dir(args.run_dir))
    return run_overview(getattr(args, "runs_dir", None))


if __name__ == "__main__":
    sys.exit(main())
