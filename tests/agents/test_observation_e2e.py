"""Refusal observations written by real runs (SPEC §8, issue: engine integration)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core import observation as obs
from tests.conftest import read_until, run_cli, write

pytestmark = pytest.mark.timeout(90)

CANARY = "CANARY-7f3a9e1d-unique"


def records(directory: Path) -> list[dict]:
    if not directory.exists():
        return []
    out = []
    for p in sorted(directory.glob("*.json")):
        rec, problems = obs.read_record(p)
        assert not problems, problems
        out.append(rec)
    return out


def headless(*args: str) -> subprocess.CompletedProcess:
    return run_cli(*args)


def test_canaries_never_reach_the_observation_or_the_audit_log(tmp_path, scenario, workspace):
    plan = write(
        tmp_path / "plan.toml",
        f'goal = "Investigate {CANARY} in the goal"\n[[stages]]\ntitle = "Look at {CANARY}"\ntasks = ["task {CANARY}"]\n',
    )
    agent = scenario(
        f"""
        [[turns]]
        actions = [
          {{ say = "model prose about {CANARY}" }},
          {{ tool = "Read notes", kind = "read", input = {{ path = "notes.md" }}, output = "tool output {CANARY}" }},
          {{ stderr = "fatal: exception message {CANARY}" }},
          {{ crash = 9 }},
        ]
        """
    )
    observe = tmp_path / "observations"
    out = headless(
        "run",
        str(plan),
        "--agent",
        f"scripted:{agent}",
        "--headless",
        "--go-all",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--workspace",
        str(workspace),
        "--observe-refusals",
        str(observe),
    )
    assert out.returncode == 4, out.stdout + out.stderr
    assert CANARY in out.stdout  # the operator sees the exception text (with the canary) …
    (rec,) = records(observe)
    raw = next(observe.glob("*.json")).read_text()
    assert CANARY not in raw  # … the observation never does
    assert rec["outcome"] == "refused" and rec["failure_kind"] == "agent_crashed" and rec["exit_code"] == 4
    assert rec["phase"] == "inference" and rec["complete"] is False
    assert rec["counters"]["requests_started"] >= 3  # initialize, session/new, set_mode, prompt
    assert rec["in_flight"] is True and rec["server_completion"] == "unknown"
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert CANARY not in (run_dir / "audit.jsonl").read_text()


def test_a_successful_run_writes_nothing(tmp_path, scenario, plan_file, workspace):
    observe = tmp_path / "observations"
    ok = scenario('[[turns]]\nactions = [{ say = "ok" }]\n')
    out = headless(
        "run",
        str(plan_file("A")),
        "--agent",
        f"scripted:{ok}",
        "--headless",
        "--go-all",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--workspace",
        str(workspace),
        "--observe-refusals",
        str(observe),
    )
    assert out.returncode == 0, out.stderr
    assert records(observe) == []
    assert obs.WRITE_DIAGNOSTIC not in out.stderr and obs.CUSTODY_DIAGNOSTIC not in out.stderr  # not even attempted


HANG = "[[turns]]\nactions = [{ hang = true }]\n"


def test_an_unsafe_directory_does_not_change_the_exit_code(tmp_path, scenario, plan_file, workspace):
    loose = tmp_path / "loose"
    loose.mkdir()
    os.chmod(loose, 0o755)
    out = headless(
        "run",
        str(plan_file("A", "B")),
        "--agent",
        f"scripted:{scenario(HANG)}",
        "--headless",
        "--go-all",
        "--stage-timeout",
        "1",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--workspace",
        str(workspace),
        "--observe-refusals",
        str(loose),
    )
    assert out.returncode == 3, out.stdout + out.stderr
    assert "⏱️ Stage 1 timed out after 1s." in out.stdout
    assert out.stderr.strip().splitlines()[-1] == obs.CUSTODY_DIAGNOSTIC
    assert list(loose.iterdir()) == []


@pytest.mark.parametrize(
    ("scenario_text", "extra", "code", "phase", "kind"),
    [
        (HANG, ["--stage-timeout", "1"], 3, "inference", "deadline_exceeded"),
        (
            '[[turns]]\nactions = [{ say = "x" }, { tool = "Read ~/.aws/credentials", kind = "read", input = { path = "~/.aws/credentials" } }]\n',
            [],
            3,
            "identity_postflight",
            "budget_exhausted",
        ),
        ("[agent]\nauth_required = true\n[[turns]]\nactions = []\n", [], 4, "inference", "auth_required"),
        (
            '[agent]\nexit_during = "initialize"\n[[turns]]\nactions = []\n',
            [],
            4,
            "identity_preflight",
            "agent_crashed",
        ),
        (
            '[agent]\nrefuse_mode_switch = true\ninitial_mode = "auto"\n[[turns]]\nactions = []\n',
            [],
            4,
            "model_metadata",
            "policy_refused",
        ),
    ],
    ids=["stage-timeout", "round-cap", "auth", "crash-in-initialize", "no-asking-mode"],
)
def test_the_phase_and_kind_follow_where_the_run_stopped(
    tmp_path, scenario, plan_file, workspace, scenario_text, extra, code, phase, kind
):
    observe = tmp_path / "observations"
    out = headless(
        "run",
        str(plan_file("A", "B")),
        "--agent",
        f"scripted:{scenario(scenario_text)}",
        "--headless",
        "--go-all",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--workspace",
        str(workspace),
        "--observe-refusals",
        str(observe),
        *extra,
    )
    assert out.returncode == code, out.stdout + out.stderr
    (rec,) = records(observe)
    assert (rec["phase"], rec["failure_kind"], rec["exit_code"], rec["outcome"]) == (phase, kind, code, "refused")
    if "--stage-timeout" in extra:  # explicit budgets are the observation's limits too
        assert rec["limits"]["stage_timeout_seconds"] == float(extra[extra.index("--stage-timeout") + 1])


def test_bad_input_is_observed_at_input_validation(tmp_path):
    observe = tmp_path / "observations"
    out = headless("run", str(tmp_path / "missing.toml"), "--headless", "--observe-refusals", str(observe))
    assert out.returncode == 2
    (rec,) = records(observe)
    assert (rec["phase"], rec["exit_code"], rec["server_completion"]) == ("input_validation", 2, "not_started")


def test_a_dead_plan_refusal_is_observed(tmp_path, scenario, workspace):
    observe = tmp_path / "observations"
    vague = scenario('[[turns]]\nactions = [{ say = "no plan from me" }]\n')
    out = headless(
        "plan",
        "Goal",
        "--agent",
        f"scripted:{vague}",
        "--headless",
        "--go",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--workspace",
        str(workspace),
        "--observe-refusals",
        str(observe),
    )
    assert out.returncode == 5
    (rec,) = records(observe)
    assert (rec["phase"], rec["failure_kind"], rec["exit_code"]) == ("review_preflight", "policy_refused", 5)


def test_an_operator_cancel_is_observed_as_cancelled(tmp_path, scenario, plan_file, workspace):
    observe = tmp_path / "observations"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tui.cli",
            "run",
            str(plan_file("A")),
            "--agent",
            f"scripted:{scenario(HANG)}",
            "--headless",
            "--go-all",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--workspace",
            str(workspace),
            "--observe-refusals",
            str(observe),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    read_until(proc, "Stage 1")
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(30) == 130
    (rec,) = records(observe)
    assert (rec["outcome"], rec["failure_kind"], rec["exit_code"]) == ("cancelled", "cancelled", 130)
    assert json.dumps(rec).count("Stage") == 0
