"""Controller overhead: one scripted turn streaming 10,000 message chunks.

    python bench/controller_overhead.py [--chunks N] [--repeats R]

Side by side in one run, alternating: (a) a bare ACP client (the SDK's own
spawn_agent_process, a no-op session_update) consuming the turn; (b) plandeck
running the same turn as a one-stage plan through the real controller, session,
journal and an in-process projection subscriber. Reported: median turn time of
each (prompt sent → turn ended) and the ratio plandeck / bare (target ≤ 1.3×).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SCENARIO = '[[turns]]\nactions = [{{ say = "token ", repeat = {n} }}]\n'


async def bare(scenario: Path, workspace: Path) -> float:
    import acp
    from acp import schema as s

    class Client:
        async def session_update(self, session_id, update, **_):
            return None

        async def request_permission(self, session_id, tool_call, options, **_):
            return s.RequestPermissionResponse(outcome=s.DeniedOutcome(outcome="cancelled"))

    async with acp.spawn_agent_process(
        Client(), sys.executable, "-m", "core.agents.scripted", str(scenario), cwd=workspace
    ) as (conn, _proc):
        await conn.initialize(protocol_version=1)
        sess = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        t = time.perf_counter()
        await conn.prompt(session_id=sess.session_id, prompt=[acp.text_block("go")])
        return time.perf_counter() - t


async def plandeck(scenario: Path, workspace: Path, runs: Path) -> float:
    from core import events as ev
    from core.agents.registry import scripted_spec
    from core.plan import Plan, Stage
    from core.policy import Policy
    from core.projection import Folder
    from core.runner import RunOptions, open_run
    from core.tracker import Budgets

    opts = RunOptions(
        agent=scripted_spec(scenario),
        policy=Policy.default_policy(),
        workspace=workspace,
        runs_dir=runs,
        budgets=Budgets(600, 0),
        serve=False,
    )
    handle = await open_run(Plan("bench", (Stage(1, "Stream"),)), opts)
    folder = Folder(handle.run_dir)
    handle.journal.subscribe(folder.apply)  # what an in-process UI does with every event
    marks: dict[str, float] = {}
    handle.journal.subscribe(
        lambda e: (
            marks.setdefault("start", time.perf_counter())
            if isinstance(e, ev.TurnStarted)
            else (marks.setdefault("end", time.perf_counter()) if isinstance(e, ev.TurnEnded) else None)
        )
    )
    handle.controller.go_all()
    await handle.wait(lambda c: c.terminal or c.state == "halted")
    await handle.close()
    assert handle.controller.state == "completed", handle.controller.state
    assert folder.view().events > 0
    return marks["end"] - marks["start"]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        scenario = root / "stream.toml"
        scenario.write_text(SCENARIO.format(n=args.chunks))
        ws = root / "ws"
        ws.mkdir()
        a, b = [], []
        for i in range(args.repeats):
            a.append(await bare(scenario, ws))
            b.append(await plandeck(scenario, ws, root / f"runs{i}"))
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"chunks per turn        : {args.chunks:,}")
        print(f"bare ACP client        : {ma:.3f} s (median of {args.repeats}: {', '.join(f'{x:.3f}' for x in a)})")
        print(f"plandeck controller    : {mb:.3f} s (median of {args.repeats}: {', '.join(f'{x:.3f}' for x in b)})")
        print(f"ratio plandeck / bare  : {mb / ma:.2f}×  (target ≤ 1.3×)")


if __name__ == "__main__":
    asyncio.run(main())
