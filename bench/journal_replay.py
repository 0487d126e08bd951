"""Replay + fold of a 1,000,000-event journal vs a bare orjson.loads loop.

    python bench/journal_replay.py [--events N] [--repeats R]

Each measurement runs in a fresh subprocess so peak RSS is that run's own.
Printed: wall time, events/s, peak RSS for both, and the ratio bare/ours
(target: ours ≤ 3 s, ratio ≥ 0.5, ≤ 300 MB). Medians over R alternating runs.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def generate(path: Path, n: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from core import events as ev
    from core.journal import JournalWriter

    w = JournalWriter(path)
    w.append(
        ev.RunStarted(
            run_id="bench",
            goal="benchmark",
            agent="scripted",
            stages=tuple(ev.StageSpec(i, f"Stage {i}") for i in range(1, 11)),
            source="file",
            workspace="/tmp",
            pid=1,
        )
    )
    text = "The agent streams a sentence of ordinary length into the transcript. "
    for i in range(1, n):
        stage = 1 + (i * 10) // n
        r = i % 20
        if r < 12:
            e = ev.AgentText(stage=stage, text=text)
        elif r < 14:
            e = ev.ToolCall(
                stage=stage,
                id=f"t{i}",
                title="Read src/module.py",
                kind="read",
                status="pending",
                input='{"path": "src/module.py"}',
            )
        elif r < 16:
            e = ev.ToolUpdate(stage=stage, id=f"t{i - 2}", status="completed")
        elif r < 17:
            e = ev.AgentThought(stage=stage, text="considering the next step")
        elif r < 18:
            e = ev.Usage(used=i, size=200000, cost=0.01, currency="USD")
        elif r < 19:
            e = ev.TurnEnded(stage=stage, stop_reason="end_turn", rounds=1, answered=True, blocked=0)
        else:
            e = ev.StageState(n=stage, state="running", rounds=1, escalations=0)
        w.append(e)
    w.close()


def run_bare(path: Path) -> float:
    import orjson

    t = time.perf_counter()
    with open(path, "rb") as fh:
        for line in fh:
            orjson.loads(line)
    return time.perf_counter() - t


def run_ours(path: Path) -> float:
    from core.journal import JournalReader
    from core.projection import Folder, replay

    t = time.perf_counter()
    folder = replay(JournalReader(path), Folder(path.parent))
    view = folder.view(live=False)
    elapsed = time.perf_counter() - t
    assert view.events > 0 and not view.defects, "the benchmark journal must fold cleanly"
    return elapsed


def child(kind: str, path: str) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    fn = run_bare if kind == "bare" else run_ours
    elapsed = fn(Path(path))
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"elapsed": elapsed, "rss_mb": rss_mb}))


def measure(kind: str, path: Path) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(path)], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--child", nargs=2)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "journal.jsonl"
        t = time.perf_counter()
        generate(path, args.events)
        size = path.stat().st_size
        print(f"journal: {args.events:,} events, {size / 1e6:.0f} MB (generated in {time.perf_counter() - t:.1f}s)")
        bare, ours = [], []
        for _ in range(args.repeats):
            bare.append(measure("bare", path))
            ours.append(measure("ours", path))
        b = statistics.median(r["elapsed"] for r in bare)
        o = statistics.median(r["elapsed"] for r in ours)
        b_rss = statistics.median(r["rss_mb"] for r in bare)
        o_rss = statistics.median(r["rss_mb"] for r in ours)
        print(f"bare orjson.loads loop : {b:.2f} s  {args.events / b / 1e6:.2f} M events/s  peak RSS {b_rss:.0f} MB")
        print(f"plandeck replay + fold : {o:.2f} s  {args.events / o / 1e6:.2f} M events/s  peak RSS {o_rss:.0f} MB")
        print(f"ratio (bare / ours)    : {b / o:.2f}×   (target ≥ 0.5×; ours ≤ 3 s; ≤ 300 MB)")
        runs = ", ".join(f"{r['elapsed']:.2f}" for r in ours)
        print(f"runs (ours, s)         : {runs}")


if __name__ == "__main__":
    main()
