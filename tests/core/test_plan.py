"""SPEC §1: plan files and the plan-text format."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.errors import InputError
from core.plan import OPTION_ROW, Plan, Stage, load_plan_file, parse_plan_text, render_plan_text, validate_plan_text
from tests.conftest import write


def test_plan_file_loads_with_numbered_stages(tmp_path):
    path = write(
        tmp_path / "p.toml",
        """
        goal = "Ship it"
        [[stages]]
        title = "One"
        tasks = ["a", "b"]
        [[stages]]
        title = "Two"
        """,
    )
    plan = load_plan_file(path)
    assert plan == Plan("Ship it", (Stage(1, "One", ("a", "b")), Stage(2, "Two", ())))


@pytest.mark.parametrize(
    ("body", "needle", "line"),
    [
        ('goal = "g"\n[[stages]]\ntitle = 3\n', "stages[0].title", 3),
        ('goal = "g"\n[[stages]]\ntitle = "x"\n[[stages]]\ntitle = "y"\ncolour = "red"\n', "unknown key", 6),
        ('goal = "g"\nstages = []\n', "at least one", None),
        ('[[stages]]\ntitle = "x"\n', "goal: required key is missing", None),
        ('goal = "g"\n[[stages]]\ntitle = "x"\ntasks = "not a list"\n', "stages[0].tasks", 4),
        ('goal = "g"\n[[stages\ntitle = "x"\n', "invalid TOML", 2),
        ('goal = "g"\n[[stages]]\ntitle = "   "\n', "must not be blank", 3),
    ],
)
def test_bad_plan_files_name_file_key_and_line(tmp_path, body, needle, line):
    path = tmp_path / "bad.toml"
    path.write_text(body)
    with pytest.raises(InputError) as info:
        load_plan_file(path)
    message = str(info.value)
    assert str(path) in message
    assert needle in message
    if line is not None:
        assert info.value.line == line


def test_missing_plan_file_is_a_clear_error(tmp_path):
    with pytest.raises(InputError, match="plan file not found"):
        load_plan_file(tmp_path / "nope.toml")


PLAN_TEXT = """Sure, here is the plan.
📋 Plan for: "Write docs"
Stage 1: Survey
  - list files
  - read README
Stage 2: Write
  - write docs/index.md
[OPTION: Go | Go All | Cancel]
"""


def test_plan_text_parses_goal_stages_tasks_and_option_row():
    parsed = parse_plan_text(PLAN_TEXT)
    assert parsed.has_plan and parsed.valid
    assert parsed.goal == "Write docs"
    assert parsed.stages == (
        Stage(1, "Survey", ("list files", "read README")),
        Stage(2, "Write", ("write docs/index.md",)),
    )
    assert parsed.option_row == OPTION_ROW
    assert parsed.issues == ()


def test_two_option_row_is_upgraded_to_three():
    parsed = parse_plan_text(PLAN_TEXT.replace("[OPTION: Go | Go All | Cancel]", "[OPTION: Go | Cancel]"))
    assert parsed.option_row == "[OPTION: Go | Go All | Cancel]"


def test_stage_numbers_must_run_one_to_n():
    has_plan, valid, issues = validate_plan_text(PLAN_TEXT.replace("Stage 2:", "Stage 3:"))
    assert has_plan and not valid
    assert any("must run 1..2" in i for i in issues)


def test_text_without_a_plan_has_no_plan():
    assert validate_plan_text("I could not make a plan, sorry.") == (
        False,
        False,
        ("no plan found (no header and no Stage lines)",),
    )


def test_header_without_stages_parses_zero_stages():
    parsed = parse_plan_text('📋 Plan for: "x"\n[OPTION: Go | Go All | Cancel]')
    assert parsed.has_plan and not parsed.valid
    assert parsed.to_plan().stages == ()


def test_render_round_trips():
    plan = Plan("G", (Stage(1, "A", ("t",)), Stage(2, "B", ())))
    assert parse_plan_text(render_plan_text(plan)).stages == plan.stages


@given(st.text(max_size=2000))
def test_parser_never_raises(text):
    parsed = parse_plan_text(text)
    if parsed.valid:
        assert [s.n for s in parsed.stages] == list(range(1, len(parsed.stages) + 1))
