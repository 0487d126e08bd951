"""The headless command line end to end: real processes, real sockets, real files."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core import audit
from core.control import socket_path
from tests.conftest import read_until, run_cli, write

pytestmark = pytest.mark.timeout(90)

QUICK = '[[turns]]\nactions = [{ say = "Stage done.\\nDetails follow." }]\n'


def run_dirs(runs: Path) -> list[Path]:
    return sorted(p for p in runs.iterdir() if p.is_dir()) if runs.exists() else []


def show_json(run_dir: Path) -> dict:
    out = run_cli("show", str(run_dir), "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_go_all_on_a_three_stage_plan_completes(tmp_path, scenario, plan_file, runs_dir, workspace):
    out = run_cli(
        "run",
        str(plan_file("Survey", "Write", "Review")),
        "--agent",
        f"scripted:{scenario(QUICK)}",
        "--headless",
        "--go-all",
        "--runs-dir",
        str(runs_dir),
        "--workspace",
        str(workspace),
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "✅ All 3 stages complete." in out.stdout
    (run_dir,) = run_dirs(runs_dir)
    assert sorted(p.name for p in run_dir.glob("stage_*_result.md")) == [f"stage_{n}_result.md" for n in (1, 2, 3)]
    doc = show_json(run_dir)
    assert doc["status"] == "completed" and doc["live"] is False
    assert [s["status"] for s in doc["stages"]] == ["completed"] * 3
    for key in ("run_id", "goal", "auto_run", "budget", "blocked_calls", "recovery_cards", "notices", "defects"):
        assert key in doc
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700


def test_a_hanging_stage_with_a_stage_timeout_exits_3(scenario, plan_file, runs_dir, workspace):
    hang = scenario('[[turns]]\nactions = [{ say = "thinking" }, { hang = true }]\n')
    started = time.monotonic()
    out = run_cli(
        "run",
        str(plan_file("Hangs", "Never")),
        "--agent",
        f"scripted:{hang}",
        "--headless",
        "--go-all",
        "--stage-timeout",
        "2",
        "--runs-dir",
        str(runs_dir),
        "--workspace",
        str(workspace),
    )
    assert out.returncode == 3, out.stdout + out.stderr
    assert "⏱️ Stage 1 timed out after 2s. Auto-run stopped." in out.stdout
    assert time.monotonic() - started < 20


def test_a_round_cap_under_go_all_exits_3_after_writing_the_result(scenario, plan_file, runs_dir, workspace):
    blocked = scenario(
        '[[turns]]\nactions = [{ say = "again" }, '
        '{ tool = "Read ~/.aws/credentials", kind = "read", input = { path = "~/.aws/credentials" } }]\n'
    )
    out = run_cli(
        "run",
        str(plan_file("Stuck", "Never")),
        "--agent",
        f"scripted:{blocked}",
        "--headless",
        "--go-all",
        "--runs-dir",
        str(runs_dir),
        "--workspace",
        str(workspace),
    )
    assert out.returncode == 3, out.stdout + out.stderr
    assert "⚠️ Stage 1 has used all 3 of its rounds" in out.stdout
    (run_dir,) = run_dirs(runs_dir)
    assert (run_dir / "stage_1_result.md").exists()
    assert not (run_dir / "stage_2_result.md").exists()


def test_a_short_plan_budget_warns_exactly_once_then_halts_at_a_boundary(scenario, plan_file, runs_dir, workspace):
    two_seconds = scenario('[[turns]]\nactions = [{ sleep = 2.0 }, { say = "done" }]\n')
    out = run_cli(
        "run",
        str(plan_file("A", "B", "C", "D", "E", "F")),
        "--agent",
        f"scripted:{two_seconds}",
        "--headless",
        "--go-all",
        "--plan-budget",
        "8",
        "--runs-dir",
        str(runs_dir),
        "--workspace",
        str(workspace),
    )
    assert out.returncode == 3, out.stdout + out.stderr
    assert out.stdout.count("⏳") == 1
    assert "⏱️ Plan exceeded its total budget of 8s" in out.stdout
    assert out.stdout.index("⏳") < out.stdout.index("⏱️ Plan exceeded")
    (run_dir,) = run_dirs(runs_dir)
    doc = show_json(run_dir)
    assert doc["budget"]["warned"] is True and doc["status"] == "halted"


def _serve(plan: Path, agent: str, runs_dir: Path, workspace: Path, *extra: str) -> tuple[subprocess.Popen, Path]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tui.cli",
            "run",
            str(plan),
            "--agent",
            agent,
            "--headless",
            "--runs-dir",
            str(runs_dir),
            "--workspace",
            str(workspace),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        read_until(proc, "serving ")
    except AssertionError:
        proc.kill()
        raise
    (run_dir,) = run_dirs(runs_dir)
    return proc, run_dir


def test_a_killed_run_refuses_go_out_loud(scenario, plan_file, runs_dir, workspace):
    proc, run_dir = _serve(plan_file("A", "B"), f"scripted:{scenario(QUICK)}", runs_dir, workspace)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    for action in ("go", "go-all"):
        out = run_cli(action, str(run_dir))
        assert out.returncode == 5, out.stdout + out.stderr
        assert "⚠️ This plan is no longer active" in out.stdout
        assert "has exited" in out.stdout and str(run_dir) in out.stdout
    records = [(r.event_type, r.operation, r.outcome) for r in audit.read(run_dir)]
    assert records.count(("auto_run_plan_expired", "plan_shape_absent", "refused")) == 2
    doc = show_json(run_dir)
    assert doc["status"] == "dead" and doc["live"] is False


def test_the_port_from_a_shell_drives_a_served_run(scenario, plan_file, runs_dir, workspace):
    proc, run_dir = _serve(plan_file("A", "B", "C"), f"scripted:{scenario(QUICK)}", runs_dir, workspace, "--go")
    try:
        sock = socket_path(run_dir)
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600
        for _ in range(100):
            if show_json(run_dir)["status"] == "paused":
                break
            time.sleep(0.1)
        doc = show_json(run_dir)
        assert doc["status"] == "paused" and doc["live"] is True and doc["needs_input"] is True
        out = run_cli("go", str(run_dir))
        assert out.returncode == 0 and out.stdout.startswith("accepted: Go: Stage 2 is starting."), out.stdout
        for _ in range(100):
            if show_json(run_dir)["status"] == "paused":
                break
            time.sleep(0.1)
        assert run_cli("guide", str(run_dir), "   ").returncode == 5
        out = run_cli("cancel", str(run_dir))
        assert out.returncode == 0 and out.stdout.startswith("accepted")
        assert proc.wait(20) == 130
        again = run_cli("cancel", str(run_dir))
        assert again.returncode == 5
        doc = show_json(run_dir)
        assert doc["status"] == "cancelled"
        assert sum(n["text"] == "🛑 Plan cancelled." for n in doc["notices"]) == 1
    finally:
        if proc.poll() is None:
            proc.kill()


def _raw(sock_path: Path, payload: bytes) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(str(sock_path))
        s.sendall(payload)
        return json.loads(s.makefile().readline())


def test_the_control_socket_rejects_malformed_requests_clearly(scenario, plan_file, runs_dir, workspace):
    proc, run_dir = _serve(plan_file("A"), f"scripted:{scenario(QUICK)}", runs_dir, workspace)
    try:
        sock = socket_path(run_dir)
        cases = {
            b"hello\n": "not a JSON object",
            b'{"op": "explode"}\n': "invalid request",
            b'{"op": "go", "extra": 1}\n': "unknown field",
            b'{"op": "guidance"}\n': "needs a non-empty 'text'",
            b'{"op": "allow"}\n': "needs a 'request_id'",
            b'{"op": 7}\n': "Expected `str`",
        }
        for payload, needle in cases.items():
            reply = _raw(sock, payload)
            assert reply["ok"] is False and needle in reply["error"], (payload, reply)
        assert _raw(sock, b'{"op": "ping"}\n')["ok"] is True  # still serving after all that
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 130


PLANNER = """
[[turns]]
expect = "Goal: Tidy"
actions = [{ say = "📋 Plan for: \\"Tidy\\"\\nStage 1: Look\\n  - list\\nStage 2: Tidy\\n  - move\\n[OPTION: Go | Cancel]\\n" }]
[[turns]]
actions = [{ say = "stage done" }]
"""


def test_plan_then_go_all_runs_the_parsed_stages(scenario, runs_dir, workspace):
    out = run_cli(
        "plan",
        "Tidy",
        "--agent",
        f"scripted:{scenario(PLANNER)}",
        "--headless",
        "--go-all",
        "--runs-dir",
        str(runs_dir),
        "--workspace",
        str(workspace),
    )
    assert out.returncode == 0, out.stdout + out.stderr
    (run_dir,) = run_dirs(runs_dir)
    assert [s["title"] for s in show_json(run_dir)["stages"]] == ["Look", "Tidy"]


def test_a_planning_turn_with_zero_stages_is_refused_like_a_dead_plan(scenario, runs_dir, workspace):
    vague = scenario('[[turns]]\nactions = [{ say = "I would rather not plan this." }]\n')
    out = run_cli(
        "plan",
        "Something",
        "--agent",
        f"scripted:{vague}",
        "--headless",
        "--go",
        "--runs-dir",
        str(runs_dir),
        "--workspace",
        str(workspace),
    )
    assert out.returncode == 5, out.stdout + out.stderr
    assert (
        "⚠️ This plan is no longer active: its stages are not in memory (its planning turn produced no stages)"
        in out.stdout
    )
    (run_dir,) = run_dirs(runs_dir)
    assert ("auto_run_plan_expired", "plan_shape_absent", "refused") in [
        (r.event_type, r.operation, r.outcome) for r in audit.read(run_dir)
    ]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "/nonexistent/plan.toml", "--headless"], "plan file not found"),
        (["run", "PLAN", "--headless", "--agent", "nosuch"], "unknown agent 'nosuch'"),
        (["run", "PLAN", "--headless", "--agent", "scripted:/nope.toml"], "scenario file not found"),
        (["run", "PLAN", "--headless", "--policy", "/nope.toml"], "policy file not found"),
        (["show", "/tmp"], "not a plandeck run directory"),
        (["go", "/definitely/not/here"], "not a directory"),
    ],
)
def test_bad_input_exits_2_with_a_named_problem(plan_file, args, needle):
    args = [str(plan_file("A")) if a == "PLAN" else a for a in args]
    out = run_cli(*args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert needle in out.stderr
    assert "Traceback" not in out.stderr


def test_an_agent_command_that_is_not_installed_fails_the_stage_specifically(tmp_path, plan_file, runs_dir, workspace):
    import os as _os

    write(
        Path(_os.environ["PLANDECK_CONFIG"]),
        '[agents.ghost]\ncommand = "ghost-agent-acp"\ninstall = "npm i -g ghost-agent-acp"\n',
    )
    out = run_cli(
        "run",
        str(plan_file("A")),
        "--agent",
        "ghost",
        "--headless",
        "--go-all",
        "--runs-dir",
        str(runs_dir),
        "--workspace",
        str(workspace),
    )
    assert out.returncode == 4, out.stdout + out.stderr
    assert (
        "❌ Stage 1 failed: agent command 'ghost-agent-acp' was not found (install: npm i -g ghost-agent-acp)"
        in out.stdout
    )


def test_a_malformed_config_file_is_refused_with_its_line(tmp_path, plan_file):
    import os as _os

    write(Path(_os.environ["PLANDECK_CONFIG"]), '[budgets]\nstage_timeout_seconds = "soon"\n')
    out = run_cli("run", str(plan_file("A")), "--headless")
    assert out.returncode == 2
    assert "config.toml:2: budgets.stage_timeout_seconds" in out.stderr
