"""Journals of runs in known states, written the way a controller writes them.

Used by the snapshot tests: every timestamp comes from a controlled clock, so
what the screen shows (elapsed times, budgets) is the same on every machine.
"""

from __future__ import annotations

from pathlib import Path

from core import events as ev
from core.recovery import Refusal, build_refusal_recovery_prompt
from tests.tui.helpers import T0, JournalBuilder

STAGES = [
    "Survey the repository",
    "Check how deploys authenticate",
    "Write the runbook",
    "Check the CI configuration",
    "Summarise",
]
AWS = Refusal("Read ~/.aws/credentials", "Blocked by security policy: ~/.aws/**", "aws_credential")


def blocked(
    b: JournalBuilder, n: int, title: str, path: str, pattern: str, klass: str | None, rule: str, cause: str
) -> None:
    tool_id = f"tool-{b.w._seq}"
    b.add(ev.ToolCall(stage=n, id=tool_id, title=title, kind="read", status="pending", input=f'{{"path": "{path}"}}'))
    b.add(
        ev.BlockedCall(
            stage=n,
            tool_id=tool_id,
            title=title,
            kind="read",
            input=f'{{"path": "{path}"}}',
            reason=f"Blocked by security policy: {pattern}",
            cause=cause,
            klass=klass,
            pattern=pattern,
            rule_id=rule,
        )
    )
    b.add(ev.ToolUpdate(stage=n, id=tool_id, status="failed"))


def awaiting_go(runs: Path, run_id: str = "20261130-090000-a001") -> Path:
    b = JournalBuilder(runs, run_id, goal="Document how this project deploys", stages=STAGES)
    return b.leave_open()


def running(runs: Path, run_id: str = "20261130-090500-a002") -> Path:
    b = JournalBuilder(runs, run_id, goal="Document how this project deploys", stages=STAGES).connect()
    b.budgets(stage=1800, plan=7200).go()
    b.stage(1, "Surveyed the layout: a src/ package, a deploy/ folder and a Makefile.\n", after=40)
    b.add(
        ev.Notice(
            kind="completion",
            text="✅ Stage 1 complete.\nNext: Stage 2: Check how deploys authenticate\n[OPTION: Go | Go All | Cancel]",
            stage=1,
        )
    )
    b.add(ev.PlanState(state="paused", auto_run=False, stage=1))
    b.add(ev.ActionTaken(action="go", verdict="accepted", text="Go: Stage 2 is starting.", origin="ui"), after=30)
    b.add(ev.PlanState(state="running", auto_run=False, stage=1))
    b.stage(
        2,
        "Checking how the deploy step authenticates. ",
        "The deploy step reads the profile named in DEPLOY_PROFILE",
        complete=False,
        after=8,
    )
    b.add(
        ev.ToolCall(
            stage=2,
            id="t-9",
            title="Read deploy/push.sh",
            kind="read",
            status="in_progress",
            input='{"path": "deploy/push.sh"}',
        )
    )
    b.add(ev.Usage(used=9100, size=200000, cost=0.02, currency="USD"))
    return b.leave_open()


def warned(runs: Path, run_id: str = "20261130-091000-a003") -> Path:
    b = JournalBuilder(runs, run_id, goal="Document how this project deploys", stages=STAGES).connect()
    b.budgets(stage=20, plan=40).go(auto=True)
    b.stage(1, "Surveyed the layout.\n", after=6)
    b.stage(2, "Deploys authenticate through DEPLOY_PROFILE.\n", rounds=2, after=8)
    b.stage(3, "Wrote RUNBOOK.md.\n", after=9)
    b.add(
        ev.Notice(
            kind="warning",
            text="⏳ Plan has used 80% of its 40s budget (32s elapsed). Auto-run will stop at the first stage boundary past 40s.",
            stage=4,
        ),
        after=9,
    )
    b.add(ev.BudgetWarned(elapsed_s=32, budget_s=40))
    b.stage(4, "Reading the CI workflow. ", complete=False, after=1)
    return b.leave_open()


def halted_at_cap(runs: Path, run_id: str = "20261130-091500-a004") -> Path:
    b = JournalBuilder(runs, run_id, goal="Rotate the deploy key", stages=STAGES[:3]).connect()
    b.budgets().go(auto=True)
    b.add(ev.PlanClockStarted())
    b.add(ev.StageStarted(n=1, title=STAGES[0]))
    b.add(ev.StageState(n=1, state="running", rounds=0, escalations=0))
    for r in (1, 2, 3):
        kind = "stage" if r == 1 else "recovery"
        body = "Goal …" if r == 1 else build_refusal_recovery_prompt([AWS], answered=True)
        b.add(ev.TurnStarted(stage=1, kind=kind, text=body), after=5)
        b.add(ev.AgentText(stage=1, text="Trying to read the deploy credentials again.\n"))
        blocked(
            b,
            1,
            "Read ~/.aws/credentials",
            "~/.aws/credentials",
            "~/.aws/**",
            "aws_credential",
            "aws-credentials",
            "AWS credential and config files hold access keys",
        )
        b.add(ev.TurnEnded(stage=1, stop_reason="end_turn", rounds=r, answered=True, blocked=1))
        if r < 3:
            b.add(
                ev.RecoveryQueued(
                    stage=1, answered=True, blocked_count=1, body=build_refusal_recovery_prompt([AWS], answered=True)
                )
            )
    (b.run_dir / "stage_1_result.md").write_text("Trying to read the deploy credentials again.\n")
    b.add(ev.StageResult(n=1, path=str(b.run_dir / "stage_1_result.md"), bytes=45))
    b.add(ev.StageState(n=1, state="completed", rounds=3, escalations=0))
    b.add(
        ev.Notice(
            kind="halt",
            text="⚠️ Stage 1 has used all 3 of its rounds (stage turn, 2 recovery turns). Auto-run stopped — send guidance to continue.",
            stage=1,
        )
    )
    b.add(ev.PlanState(state="halted", auto_run=False, stage=1))
    return b.leave_open()


def with_recovery(runs: Path, run_id: str = "20261130-092000-a005") -> Path:
    b = JournalBuilder(runs, run_id, goal="Audit secrets handling", stages=STAGES[:2]).connect()
    b.budgets().go()
    b.add(ev.PlanClockStarted())
    b.add(ev.StageStarted(n=1, title=STAGES[0]))
    b.add(ev.StageState(n=1, state="running", rounds=0, escalations=0))
    b.add(ev.TurnStarted(stage=1, kind="stage", text="Goal …"))
    b.add(ev.AgentText(stage=1, text="The deploy uses the prod profile.\n"), after=3)
    blocked(
        b,
        1,
        "Read ~/.aws/credentials",
        "~/.aws/credentials",
        "~/.aws/**",
        "aws_credential",
        "aws-credentials",
        "AWS credential and config files hold access keys",
    )
    blocked(
        b,
        1,
        "Read ~/.ssh/id_ed25519",
        "~/.ssh/id_ed25519",
        "~/.ssh/**",
        "secret_file",
        "ssh-keys",
        "SSH keys and SSH configuration are credential material",
    )
    blocked(
        b,
        1,
        "Run rm -rf /tmp/cache/..",
        "/",
        "rm -*r* /",
        None,
        "rm-recursive-root",
        "recursive delete of the filesystem root",
    )
    b.add(ev.TurnEnded(stage=1, stop_reason="end_turn", rounds=1, answered=True, blocked=3))
    refusals = [
        AWS,
        Refusal("Read ~/.ssh/id_ed25519", "Blocked by security policy: ~/.ssh/**", "secret_file"),
        Refusal("Run rm -rf /tmp/cache/..", "Blocked by security policy: rm -*r* /", None),
    ]
    body = build_refusal_recovery_prompt(refusals, answered=True)
    b.add(ev.RecoveryQueued(stage=1, answered=True, blocked_count=3, body=body))
    b.add(ev.TurnStarted(stage=1, kind="recovery", text=body))
    b.add(ev.AgentText(stage=1, text="Noted; continuing without those files.\n"), after=2)
    b.add(ev.TurnEnded(stage=1, stop_reason="end_turn", rounds=2, answered=True, blocked=0))
    (b.run_dir / "stage_1_result.md").write_text("The deploy uses the prod profile.\n")
    b.add(ev.StageResult(n=1, path=str(b.run_dir / "stage_1_result.md"), bytes=34))
    b.add(ev.StageState(n=1, state="completed", rounds=2, escalations=0))
    b.add(
        ev.Notice(
            kind="completion",
            text=f"✅ Stage 1 complete.\nNext: Stage 2: {STAGES[1]}\n[OPTION: Go | Go All | Cancel]",
            stage=1,
        )
    )
    b.add(ev.PlanState(state="paused", auto_run=False, stage=1))
    return b.leave_open()


def finished(runs: Path, run_id: str, state: str, goal: str) -> Path:
    b = JournalBuilder(runs, run_id, goal=goal, stages=STAGES[:2]).connect()
    b.budgets(plan=3600).go(auto=True)
    b.stage(1, "done\n", after=120)
    if state == "completed":
        b.stage(2, "done\n", after=60)
        b.add(ev.Notice(kind="completion", text="✅ All 2 stages complete."))
    elif state == "failed":
        b.stage(2, "crash\n", complete=False, after=30)
        b.add(ev.StageState(n=2, state="failed", rounds=0, escalations=0))
        b.add(
            ev.Notice(
                kind="failure",
                text="❌ Stage 2 failed: the agent process exited with code 3 during the prompt turn. Auto-run stopped.",
            )
        )
    elif state == "cancelled":
        b.add(ev.Notice(kind="cancel", text="🛑 Plan cancelled."))
    b.add(ev.PlanState(state=state, auto_run=False, stage=2))  # type: ignore[arg-type]
    b.add(ev.RunClosed(exit_code={"completed": 0, "failed": 4, "cancelled": 130}[state], reason="headless run ended"))
    return b.close()


def mixed_runs(runs: Path) -> dict[str, Path]:
    out = {
        "completed": finished(runs, "20261130-080000-b001", "completed", "Add a CHANGELOG"),
        "failed": finished(runs, "20261130-081000-b002", "failed", "Migrate the test runner"),
        "cancelled": finished(runs, "20261130-082000-b003", "cancelled", "Bump the SDK"),
        "awaiting": awaiting_go(runs),
        "running": running(runs),
        "halted": halted_at_cap(runs),
    }
    return out


CLOCK_AT = T0 + 600
