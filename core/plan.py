"""Plans and their two sources: plan files (TOML) and plan text (SPEC §1).

A plan's shape lives only in the memory of the process that runs it; nothing
here restores one from a journal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints

from core import tomlfile

OPTION_ROW = "[OPTION: Go | Go All | Cancel]"
_SHORT_OPTION_ROW = "[OPTION: Go | Cancel]"
PLAN_HEADER = "📋 Plan for:"


@dataclass(frozen=True, slots=True)
class Stage:
    n: int
    title: str
    tasks: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Plan:
    goal: str
    stages: tuple[Stage, ...]

    @property
    def total(self) -> int:
        return len(self.stages)

    def stage(self, n: int) -> Stage:
        return self.stages[n - 1]


# -- plan files ------------------------------------------------------------------

NonEmpty = Annotated[str, StringConstraints(strip_whitespace=False, min_length=1, max_length=2000)]


class _StageModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    title: NonEmpty
    tasks: list[Annotated[str, StringConstraints(max_length=4000)]] = []


class _PlanModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    goal: NonEmpty
    stages: list[_StageModel]


MAX_STAGES = 200


def load_plan_file(path: Path) -> Plan:
    """Load and validate a TOML plan file. Raises InputError naming file and line."""
    text = tomlfile.read_text(path, "plan file")
    data = tomlfile.parse_toml(text, str(path))
    model = tomlfile.validate(_PlanModel, data, text, str(path))
    if not model.stages:
        raise tomlfile.InputError(str(path), "stages: a plan needs at least one [[stages]] entry")
    if len(model.stages) > MAX_STAGES:
        raise tomlfile.InputError(str(path), f"stages: at most {MAX_STAGES} stages")
    for i, stage in enumerate(model.stages):
        if not stage.title.strip():
            raise tomlfile.InputError(
                str(path), f"stages[{i}].title: must not be blank", tomlfile.locate(text, ["stages", i, "title"])
            )
    return Plan(
        goal=model.goal.strip(),
        stages=tuple(
            Stage(i + 1, s.title.strip(), tuple(t.strip() for t in s.tasks if t.strip()))
            for i, s in enumerate(model.stages)
        ),
    )


# -- plan text ---------------------------------------------------------------------

_HEADER_RE = re.compile(r'^\s*(?:[#>*\s]*)📋\s*Plan for:\s*"?(?P<goal>.*?)"?\s*$')
_STAGE_RE = re.compile(r"^\s*(?:#{1,6}\s*)?(?:\*\*)?Stage\s+(?P<n>\d{1,4})\s*[:.)-]\s*(?P<title>.*?)(?:\*\*)?\s*$")
_TASK_RE = re.compile(r"^\s*[-*•]\s+(?P<task>\S.*?)\s*$")
_OPTION_RE = re.compile(r"^\s*\[OPTION:\s*(?P<opts>[^\]]*)\]\s*$")


@dataclass(frozen=True, slots=True)
class ParsedPlan:
    goal: str
    stages: tuple[Stage, ...]
    has_plan: bool
    valid: bool
    issues: tuple[str, ...] = field(default_factory=tuple)
    option_row: str | None = None

    def to_plan(self) -> Plan:
        """The plan as parsed; zero stages when invalid (a plan with no shape, §1.4)."""
        return Plan(self.goal, self.stages if self.valid else ())


def parse_plan_text(text: str) -> ParsedPlan:
    goal = ""
    header = False
    stages: list[tuple[int, str, list[str]]] = []
    option_row: str | None = None
    issues: list[str] = []
    for line in text.splitlines():
        if m := _HEADER_RE.match(line):
            header = True
            goal = m.group("goal").strip()
            continue
        if m := _STAGE_RE.match(line):
            stages.append((int(m.group("n")), m.group("title").strip(), []))
            continue
        if m := _OPTION_RE.match(line):
            opts = [o.strip() for o in m.group("opts").split("|")]
            if opts == ["Go", "Go All", "Cancel"]:
                option_row = OPTION_ROW
            elif opts == ["Go", "Cancel"]:
                option_row = OPTION_ROW  # upgraded to the three-option row (§1.3)
            else:
                issues.append(f"unknown option row {line.strip()!r}")
            continue
        if stages and (m := _TASK_RE.match(line)):
            stages[-1][2].append(m.group("task"))
    has_plan = header or bool(stages)
    if not has_plan:
        return ParsedPlan("", (), False, False, ("no plan found (no header and no Stage lines)",), None)
    if not header:
        issues.append(f"missing the header line '{PLAN_HEADER} \"<goal>\"'")
    elif not goal:
        issues.append("the plan header names no goal")
    if not stages:
        issues.append("the plan has no Stage lines")
    numbers = [n for n, _, _ in stages]
    if stages and numbers != list(range(1, len(stages) + 1)):
        issues.append(f"stage numbers must run 1..{len(stages)}, got {', '.join(map(str, numbers))}")
    for n, title, _ in stages:
        if not title:
            issues.append(f"Stage {n} has no title")
    if option_row is None:
        issues.append(f"missing the option row {OPTION_ROW}")
    blocking = [i for i in issues if not i.startswith("missing the option row")]
    valid = bool(stages) and not blocking
    parsed = tuple(Stage(i + 1, title, tuple(tasks)) for i, (_, title, tasks) in enumerate(stages))
    return ParsedPlan(goal, parsed if valid else (), True, valid, tuple(issues), option_row)


def validate_plan_text(text: str) -> tuple[bool, bool, tuple[str, ...]]:
    parsed = parse_plan_text(text)
    return parsed.has_plan, parsed.valid, parsed.issues


def render_plan_text(plan: Plan) -> str:
    lines = [f'{PLAN_HEADER} "{plan.goal}"']
    for stage in plan.stages:
        lines.append(f"Stage {stage.n}: {stage.title}")
        lines.extend(f"  - {task}" for task in stage.tasks)
    lines.append(OPTION_ROW)
    return "\n".join(lines)


def planning_prompt(goal: str) -> str:
    return (
        "You are planning work that an operator will approve stage by stage.\n"
        f"Goal: {goal}\n\n"
        "Do not start the work. Answer with a plan in exactly this format and nothing else:\n\n"
        f'{PLAN_HEADER} "<the goal in one line>"\n'
        "Stage 1: <title>\n"
        "  - <task>\n"
        "  - <task>\n"
        "Stage 2: <title>\n"
        "  - <task>\n"
        f"{OPTION_ROW}\n\n"
        "Number stages from 1 without gaps; keep each stage small enough to review."
    )
