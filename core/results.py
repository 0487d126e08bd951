"""Stage results: capture, redaction, atomic write, confinement, injection (SPEC §7).

The split matters: the controller collects a stage's text on the event loop as
an immutable tuple of strings; `write_result` (redaction + disk I/O) runs on a
worker thread and never sees live state.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from core.redact import redact

RESULT_CAP_BYTES = 512_000
RESULT_HEAD_FRACTION = 0.20
PREVIOUS_FULL_STAGES = 3
PREVIOUS_CAP_BYTES = 2_000
PREVIOUS_HEAD_FRACTION = 0.30
_TRUNCATION_MARK = "\n\n[… {n} bytes omitted …]\n\n"


def result_path(run_dir: Path | str, n: int) -> str:
    """The one path the writer produces for stage n of this run, as a string."""
    return os.path.join(os.fspath(run_dir), f"stage_{n}_result.md")


def confine_result_path(value: object, run_dir: Path | str, n: int) -> str | None:
    """Accept a persisted result path only if it is exactly the writer's own.

    Compared as strings on purpose: Path equality folds different spellings of
    one location together, and for a whitelist the only tolerable error is
    being too strict. Anything else (other runs, traversal, system paths,
    non-strings) is dropped.
    """
    if type(value) is not str or type(n) is not int or n < 1:
        return None
    expected = result_path(run_dir, n)
    return value if value == expected else None


def _head_tail(data: bytes, cap: int, head_fraction: float) -> bytes:
    if len(data) <= cap:
        return data
    head = int(cap * head_fraction)
    tail = cap - head
    omitted = len(data) - head - tail
    mark = _TRUNCATION_MARK.format(n=omitted).encode()
    head_bytes = data[:head].decode("utf-8", "ignore").encode()
    tail_bytes = data[len(data) - tail :].decode("utf-8", "ignore").encode()
    return head_bytes + mark + tail_bytes


def render_result(parts: tuple[str, ...]) -> bytes:
    """Redact and cap a stage's collected text (pure; safe on any thread)."""
    text = "".join(parts).strip() + "\n"
    return _head_tail(redact(text).encode("utf-8"), RESULT_CAP_BYTES, RESULT_HEAD_FRACTION)


def atomic_write(path: str, data: bytes, mode: int = 0o600) -> None:
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_result(run_dir: Path | str, n: int, parts: tuple[str, ...]) -> tuple[str, int]:
    """Redact, cap and atomically write stage n's result. Run it off the event loop."""
    data = render_result(parts)
    path = result_path(run_dir, n)
    atomic_write(path, data)
    return path, len(data)


def _first_meaningful_line(text: str) -> str:
    for line in text.splitlines():
        stripped = line.strip().lstrip("#>*-• ").strip()
        if stripped and not set(stripped) <= set("-=_*`~"):
            return stripped[:200]
    return ""


def first_line_of(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return _first_meaningful_line(fh.read(8192))
    except OSError:
        return ""


def previous_results_block(run_dir: Path | str, completed: Iterable[int]) -> str:
    """Previous results for the next stage's prompt, bounded however long the plan.

    The last 3 completed stages in full up to 2 000 bytes (30 % head / 70 %
    tail), older ones as their first line only; each names its file. Only the
    writer's own paths are read. Run it off the event loop.
    """
    stages = sorted(set(completed))
    if not stages:
        return ""
    recent = set(stages[-PREVIOUS_FULL_STAGES:])
    blocks = []
    for n in stages:
        path = result_path(run_dir, n)
        if n in recent:
            try:
                with open(path, "rb") as fh:
                    data = fh.read(RESULT_CAP_BYTES + 4096)
            except OSError:
                blocks.append(f"Stage {n} result ({path}): (missing)")
                continue
            body = _head_tail(data, PREVIOUS_CAP_BYTES, PREVIOUS_HEAD_FRACTION).decode("utf-8", "replace")
            blocks.append(f"Stage {n} result ({path}):\n{body.strip()}")
        else:
            blocks.append(f"Stage {n} result ({path}): {first_line_of(path) or '(empty)'}")
    return "\n\n".join(blocks)
