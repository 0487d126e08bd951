"""Against the real Claude ACP adapter, pinned in tests/agents/claude-acp (installed by `npm ci`).

No credentials exist here, so the handshake must work and the first prompt must
fail cleanly: a specific message, exit 4, no hang, no orphan process, an intact
journal, and an observation in the phase the failure happened. These run in CI;
a missing install is a failure, not a skip.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import psutil
import pytest

from core import observation as obs
from tests.conftest import ROOT, run_cli, write

pytestmark = [pytest.mark.real_agent, pytest.mark.timeout(120)]

ADAPTER = ROOT / "tests" / "agents" / "claude-acp" / "node_modules" / ".bin" / "claude-agent-acp"
# Credentials are never passed; as root the adapter also needs IS_SANDBOX to open a session.
CREDENTIAL_VARS = ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN")


@pytest.fixture
def claude(tmp_path, monkeypatch) -> str:
    assert ADAPTER.exists(), "the pinned adapter is not installed: run `npm ci --prefix tests/agents/claude-acp`"
    for var in CREDENTIAL_VARS:
        monkeypatch.delenv(var, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))  # no ~/.claude login of the machine leaks in
    config = Path(os.environ["PLANDECK_CONFIG"])
    write(
        config,
        f"""
        [agents.claude-pinned]
        command = "{ADAPTER}"
        env = {{ IS_SANDBOX = "1" }}
        mode = "default"
        [agents.claude-pinned.timeouts]
        initialize = 60
        session_new = 60
        """,
    )
    return "claude-pinned"


def adapter_processes() -> set[int]:
    found = set()
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "claude-agent-acp" in cmd or "claude-agent-sdk" in cmd:
            found.add(p.info["pid"])
    return found


def test_agents_check_handshakes_and_switches_auto_to_default(claude, tmp_path):
    before = adapter_processes()
    out = run_cli("agents", "check", claude, "--workspace", str(tmp_path), timeout=90)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "protocol version: 1" in out.stdout
    assert "@agentclientprotocol/claude-agent-acp 0.101.0" in out.stdout
    assert "switched from 'auto' to 'default'" in out.stdout
    assert "steering:         yes" in out.stdout
    assert adapter_processes() - before == set()


def test_agents_lists_the_presets_and_whether_they_are_found(claude):
    out = run_cli("agents")
    assert out.returncode == 0
    for name in ("scripted", "claude", "codex", "gemini", "goose", "kiro", "claude-pinned"):
        assert name in out.stdout
    assert "✔ claude-pinned" in out.stdout
    assert "✖ goose" in out.stdout and "install:" in out.stdout


def test_a_run_without_credentials_fails_its_first_stage_cleanly(claude, tmp_path, plan_file, workspace):
    before = adapter_processes()
    observe = tmp_path / "observations"
    runs = tmp_path / "runs"
    started = time.monotonic()
    out = run_cli(
        "run",
        str(plan_file("Say hello", "Never reached")),
        "--agent",
        claude,
        "--headless",
        "--go-all",
        "--runs-dir",
        str(runs),
        "--workspace",
        str(workspace),
        "--observe-refusals",
        str(observe),
        timeout=110,
    )
    elapsed = time.monotonic() - started
    assert out.returncode == 4, out.stdout + out.stderr
    assert "❌ Stage 1 failed:" in out.stdout and "needs authentication" in out.stdout
    assert elapsed < 60, f"took {elapsed:.1f}s"
    time.sleep(0.5)
    assert adapter_processes() - before == set(), "an adapter process outlived the run"
    (run_dir,) = runs.iterdir()
    doc = json.loads(run_cli("show", str(run_dir), "--json").stdout)
    assert doc["defects"] == [] and doc["torn_tail"] is None
    assert doc["status"] == "failed" and doc["stages"][0]["status"] == "failed"
    assert doc["agent_mode"] == "default"
    (record,) = [obs.read_record(p)[0] for p in observe.glob("*.json")]
    assert record["phase"] in ("inference", "model_metadata")
    assert record["failure_kind"] == "auth_required" and record["exit_code"] == 4
