"""Drive real runs (real controller loop, real scripted agent subprocess) from tests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

from core import audit
from core import events as ev
from core.agents.registry import scripted_spec
from core.journal import JournalReader
from core.plan import Plan, Stage
from core.policy import Policy
from core.projection import RunView, fold
from core.runner import RunHandle, RunOptions, open_run
from core.tracker import Budgets


class FakeClock:
    """A monotonic clock the test moves (tracker budgets never need real sleeping)."""

    def __init__(self) -> None:
        self.t = 10_000.0

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def plan_of(*titles: str, goal: str = "Test goal") -> Plan:
    return Plan(goal, tuple(Stage(i + 1, t, (f"do {t.lower()}",)) for i, t in enumerate(titles)))


def options(
    tmp: Path,
    scenario: Path,
    *,
    budgets: Budgets | None = Budgets(30, 600),
    loader: Callable[[], Budgets] | None = None,
    clock: Callable[[], float] | None = None,
    serve: bool = False,
    policy: Policy | None = None,
    max_escalations: int = 2,
) -> RunOptions:
    """Options for a run on the scripted agent in tmp (workspace tmp/ws, runs tmp/runs)."""
    ws = tmp / "ws"
    ws.mkdir(exist_ok=True)
    return RunOptions(
        agent=scripted_spec(scenario),
        policy=policy or Policy.default_policy(variables={"WORKSPACE": str(ws)}),
        workspace=ws,
        runs_dir=tmp / "runs",
        budgets=budgets,
        budget_loader=loader,
        serve=serve,
        max_escalations=max_escalations,
        **({"clock": clock} if clock is not None else {}),
    )


async def start(tmp: Path, plan: Plan, scenario: Path, **kw) -> RunHandle:
    return await open_run(plan, options(tmp, scenario, **kw))


async def settle(handle: RunHandle, timeout: float = 30.0) -> str:
    """Wait until the stage loop has stopped; returns the plan state."""

    async def idle() -> None:
        await asyncio.sleep(0)
        await handle.controller.wait_idle()

    await asyncio.wait_for(idle(), timeout)
    return handle.controller.state


def events(handle: RunHandle) -> list[ev.Event]:
    return JournalReader(handle.run_dir / "journal.jsonl").read_all().events


def view(handle: RunHandle) -> RunView:
    return fold(events(handle), run_dir=handle.run_dir, live=not handle.journal.closed)


def notices(handle: RunHandle, kind: str | None = None) -> list[str]:
    return [e.text for e in events(handle) if isinstance(e, ev.Notice) and (kind is None or e.kind == kind)]


def audit_pairs(handle: RunHandle) -> list[tuple[str, str, str]]:
    return [(r.event_type, r.operation, r.outcome) for r in audit.read(handle.run_dir)]


def recorded(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
