"""UI live-data figures: latency, burst smoothness, start-up, and watching 500 runs.

    python bench/ui_live.py [--events N]

1. journal append → row visible in an attached run screen (another process
   writes), and in-process (the controller's subscription): p50 / p95;
   targets p95 ≤ 50 ms attached, ≤ 20 ms in-process.
2. a 5,000-event burst appended by another process: the longest gap between
   event-loop ticks (no frame can be drawn in a gap); target ≤ 100 ms.
3. `plandeck ui` start → first paint, in a real pseudo-terminal; target ≤ 0.5 s.
4. 500 run directories under the runs root: inotify instances held by the app
   (target 1) and its idle CPU over 5 s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pty
import select
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core import events as ev  # noqa: E402
from core.journal import JOURNAL_NAME, JournalWriter  # noqa: E402

WRITER = r"""
import sys, time
sys.path.insert(0, {root!r})
from core import events as ev
from core.journal import JournalWriter
w = JournalWriter.__new__(JournalWriter)
import os
w.path = None; w._wall = time.time; w._seq = int(sys.argv[2]); w._subscribers = []
w._fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
mode, n, gap = sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
for i in range(n):
    stamp = repr(time.time())
    word = "probe" if mode == "latency" else "burst"
    w.append(ev.Notice(kind="info", text=f"{{word}} {{i}} {{stamp}}"))
    if gap:
        time.sleep(gap)
w.close()
"""


def percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def make_run(root: Path) -> Path:
    runs = root / "runs"
    run_dir = runs / "20261130-120000-bench"
    run_dir.mkdir(parents=True)
    w = JournalWriter(run_dir / JOURNAL_NAME)
    stages = tuple(ev.StageSpec(i, f"Stage {i}") for i in (1, 2, 3))
    w.append(
        ev.RunStarted(
            run_id=run_dir.name, goal="bench", agent="scripted", stages=stages, source="file", workspace="/tmp", pid=1
        )
    )
    w.append(ev.PlanState(state="running", auto_run=True))
    w.close()
    return run_dir


async def attached_latency(root: Path, n: int) -> tuple[list[float], float]:
    from tui.app import PlandeckApp
    from tui.widgets.transcript import Transcript

    run_dir = make_run(root)
    seen: list[float] = []
    app = PlandeckApp(
        runs_root=run_dir.parent, start="run", run_dir=run_dir, watch=True, blink=False, probe=lambda _p: True
    )
    original = Transcript.update_view

    def spy(self, view):
        original(self, view)
        now = time.time()

        def painted() -> None:
            t = time.time()
            for row in view.transcript[-50:]:
                if row.kind == "notice" and row.text.startswith("probe ") and row.key not in recorded:
                    recorded.add(row.key)
                    seen.append(t - float(row.text.split()[2]))

        self.call_after_refresh(painted)
        del now

    recorded: set[int] = set()
    Transcript.update_view = spy  # type: ignore[method-assign]
    gaps: list[float] = []
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.pause(0.5)
            script = WRITER.format(root=str(ROOT))
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", script, str(run_dir / JOURNAL_NAME), "2", "latency", str(n), "0.05"
            )
            await proc.wait()
            await pilot.pause(0.5)
            # the burst
            last = [time.perf_counter()]

            def tick() -> None:
                t = time.perf_counter()
                gaps.append(t - last[0])
                last[0] = t

            timer = app.set_interval(0.005, tick)
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", script, str(run_dir / JOURNAL_NAME), str(2 + n), "burst", "5000", "0"
            )
            await proc.wait()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and app.views[run_dir].events < 2 + n + 5000:
                await pilot.pause(0.02)
            await pilot.pause(0.3)
            timer.stop()
    finally:
        Transcript.update_view = original  # type: ignore[method-assign]
    return seen, max(gaps) if gaps else float("nan")


async def in_process_latency(root: Path, n: int) -> list[float]:
    from tui.app import PlandeckApp
    from tui.widgets.transcript import Transcript

    run_dir = make_run(root / "inproc")
    seen: list[float] = []
    sent: dict[str, float] = {}
    app = PlandeckApp(
        runs_root=run_dir.parent, start="run", run_dir=run_dir, watch=False, blink=False, probe=lambda _p: True
    )
    original = Transcript.update_view

    def spy(self, view):
        original(self, view)

        def painted() -> None:
            t = time.perf_counter()
            for row in view.transcript[-20:]:
                if row.text in sent:
                    seen.append(t - sent.pop(row.text))

        self.call_after_refresh(painted)

    Transcript.update_view = spy  # type: ignore[method-assign]
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.pause(0.3)
            from tui.live import InProcessFeed

            tail = app.tails[run_dir]
            writer = JournalWriter(run_dir / "inproc.jsonl")
            writer._seq = 2
            writer.subscribe(InProcessFeed(tail, app._publish))
            for i in range(n):
                text = f"inproc {i}"
                sent[text] = time.perf_counter()
                writer.append(ev.Notice(kind="info", text=text))
                await pilot.pause(0.03)
            await pilot.pause(0.3)
            writer.close()
    finally:
        Transcript.update_view = original  # type: ignore[method-assign]
    return seen


def first_paint(runs: Path) -> float:
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="120", LINES="36")
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(sys.executable, [sys.executable, "-m", "tui.cli", "ui", "--runs-dir", str(runs)], env)
    start = time.perf_counter()
    buf = b""
    painted = None
    deadline = start + 10
    while time.perf_counter() < deadline:
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                buf += os.read(fd, 65536)
            except OSError:
                break
            if b"Runs" in buf:
                painted = time.perf_counter() - start
                break
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return painted if painted is not None else float("nan")


def watch_500(root: Path) -> tuple[int, float]:
    runs = root / "many" / "runs"
    for i in range(500):
        d = runs / f"20261130-1{i:05d}-x"
        d.mkdir(parents=True)
        w = JournalWriter(d / JOURNAL_NAME)
        w.append(
            ev.RunStarted(
                run_id=d.name,
                goal=f"plan {i}",
                agent="scripted",
                stages=(ev.StageSpec(1, "One"),),
                source="file",
                workspace="/tmp",
                pid=1,
            )
        )
        w.append(ev.PlanState(state="completed", auto_run=False))
        w.close()
    env = dict(os.environ, TERM="xterm-256color")
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(sys.executable, [sys.executable, "-m", "tui.cli", "ui", "--runs-dir", str(runs)], env)

    def drain(seconds: float) -> None:
        end = time.time() + seconds
        while time.time() < end:
            r, _, _ = select.select([fd], [], [], 0.05)
            if r:
                try:
                    os.read(fd, 65536)
                except OSError:
                    return

    drain(4.0)
    inotify = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}") == "anon_inode:inotify":
                inotify += 1
        except OSError:
            pass

    def cpu() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    c0, t0 = cpu(), time.time()
    drain(5.0)
    c1, t1 = cpu(), time.time()
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return inotify, 100 * (c1 - c0) / (t1 - t0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        attached, longest_gap = asyncio.run(attached_latency(root, args.events))
        inproc = asyncio.run(in_process_latency(root, args.events))
        paints = [first_paint(root / "runs") for _ in range(5)]
        inotify, idle_cpu = watch_500(root)
    ms = 1000
    print(
        f"attached  append→visible : p50 {statistics.median(attached) * ms:.1f} ms  p95 {percentile(attached, 95) * ms:.1f} ms  (n={len(attached)}; target p95 ≤ 50 ms)"
    )
    print(
        f"in-process append→visible: p50 {statistics.median(inproc) * ms:.1f} ms  p95 {percentile(inproc, 95) * ms:.1f} ms  (n={len(inproc)}; target p95 ≤ 20 ms)"
    )
    print(f"5,000-event burst        : longest gap without a frame {longest_gap * ms:.0f} ms  (target ≤ 100 ms)")
    print(
        f"start → first paint      : median {statistics.median(paints):.2f} s  (runs: {', '.join(f'{p:.2f}' for p in paints)}; target ≤ 0.5 s)"
    )
    print(f"500 runs watched         : {inotify} inotify instance(s)  (target 1); idle CPU {idle_cpu:.1f} %")


if __name__ == "__main__":
    main()
