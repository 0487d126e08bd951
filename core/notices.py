"""The texts plandeck posts. Markers marked (exact) in SPEC are kept byte-for-byte here."""

from __future__ import annotations

from core.durations import human_duration
from core.plan import OPTION_ROW

DEAD_PLAN_PREFIX = "⚠️ This plan is no longer active"  # (exact prefix, SPEC §6)
PLAN_CANCELLED = "🛑 Plan cancelled."  # (exact, SPEC §2.3)


def stage_separator(n: int, title: str) -> str:
    return f"───── Stage {n}: {title} ─────"


def stage_complete(n: int, next_n: int, next_title: str) -> str:
    return f"✅ Stage {n} complete.\nNext: Stage {next_n}: {next_title}\n{OPTION_ROW}"


def all_complete(total: int, lines: list[tuple[int, str, str]]) -> str:
    rows = [f"✅ All {total} stages complete."]
    for n, title, first in lines:
        rows.append(f"Stage {n}: {title}" + (f" — {first}" if first else ""))
    return "\n".join(rows)


def stage_failed(n: int, reason: str) -> str:
    return f"❌ Stage {n} failed: {reason}. Auto-run stopped."


def stage_force_failed(n: int, escalations: int) -> str:
    return (
        f"❌ Stage {n} failed: it reached its round cap again after {escalations} guidance re-arms "
        "(the escalation limit). Auto-run stopped; nothing will retry it."
    )


def round_cap(n: int, max_rounds: int, rounds: str) -> str:
    return (
        f"⚠️ Stage {n} has used all {max_rounds} of its rounds ({rounds}). Auto-run stopped — send guidance to continue."
    )


def plan_exceeded(budget: float, elapsed: float, n: int) -> str:
    return (
        f"⏱️ Plan exceeded its total budget of {human_duration(budget)} "
        f"(elapsed {human_duration(elapsed)}) before Stage {n}. Auto-run stopped."
    )


def budget_warning(elapsed: float, budget: float) -> str:
    pct = int(100 * elapsed / budget) if budget else 0
    return (
        f"⏳ Plan has used {pct}% of its {human_duration(budget)} budget ({human_duration(elapsed)} elapsed). "
        f"Auto-run will stop at the first stage boundary past {human_duration(budget)}."
    )


def stage_timed_out(n: int, timeout: float) -> str:
    return f"⏱️ Stage {n} timed out after {human_duration(timeout)}. Auto-run stopped."


def already_cancelled() -> str:
    return "This plan was already cancelled — ask for a new plan. Nothing was run."


def dead_plan(why: str, results_at: str) -> str:
    return (
        f"{DEAD_PLAN_PREFIX}: its stages are not in memory ({why}). Nothing was run. "
        f"Ask for the plan again to plan it afresh; finished stage results remain on disk at {results_at}."
    )


def rounds_breakdown(kinds: list[str]) -> str:
    """'stage turn, 2 recovery turns' from the kinds of the turns a stage spent."""
    order = ["stage", "recovery", "continuation", "guidance"]
    names = {
        "stage": "stage turn",
        "recovery": "recovery turn",
        "continuation": "continuation",
        "guidance": "guidance turn",
    }
    parts = []
    for kind in order:
        count = kinds.count(kind)
        if count == 1:
            parts.append(names[kind])
        elif count > 1:
            parts.append(f"{count} {names[kind]}{'s' if not names[kind].endswith('s') else ''}")
    return ", ".join(parts) or f"{len(kinds)} turns"
