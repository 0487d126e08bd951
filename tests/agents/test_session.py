"""AgentSession against the real scripted agent: handshake, modes, updates, failures."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import psutil
import pytest

from core import events as ev
from core.agents.registry import AgentSpec, scripted_spec
from core.agents.session import STDERR_LOG, STDERR_LOG_CAP, AgentError, AgentSession
from core.config import AgentTimeouts
from core.policy import Policy

pytestmark = pytest.mark.timeout(60)


def session_for(
    path: Path, tmp_path: Path, *, policy: Policy | None = None, **spec_changes
) -> tuple[AgentSession, list]:
    got: list = []
    spec = dataclasses.replace(scripted_spec(path), **spec_changes)
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    s = AgentSession(
        spec,
        workspace=ws,
        policy=policy or Policy.default_policy(variables={"WORKSPACE": str(ws)}),
        emit=got.append,
        log_dir=tmp_path,
    )
    return s, got


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_switches_an_auto_mode_agent_to_an_asking_mode(tmp_path, scenario):
    s, got = session_for(scenario('[agent]\ninitial_mode = "auto"\n[[turns]]\nactions = []\n'), tmp_path)
    try:
        ident = await s.start()
        assert ident.modes == ("default", "auto")
        assert ident.mode == "default" and ident.supervised
        assert ev.ModeChanged(mode="default", confirmed=True) in got
    finally:
        await s.close()


async def test_refuses_to_run_unsupervised_unless_allowed(tmp_path, scenario):
    path = scenario('[agent]\ninitial_mode = "auto"\nrefuse_mode_switch = true\n[[turns]]\nactions = []\n')
    s, _ = session_for(path, tmp_path)
    with pytest.raises(AgentError) as info:
        await s.start()
    await s.close()
    assert info.value.kind == "policy_refused"
    assert "none in which permission requests reach plandeck" in str(info.value)
    s, _ = session_for(path, tmp_path, allow_unsupervised=True)
    try:
        assert (await s.start()).supervised is False
    finally:
        await s.close()


@pytest.mark.parametrize(
    ("agent_table", "kind", "needle"),
    [
        ('exit_during = "initialize"', "agent_crashed", "exited with code 7 during initialize"),
        ('exit_during = "session_new"', "agent_crashed", "exited with code 7 during session/new"),
        ("protocol_version = 2", "protocol_error", "speaks ACP protocol version 2; plandeck speaks 1"),
        ('stdout_banner = "Welcome to SuperAgent v9!"', "protocol_error", "not JSON-RPC to stdout"),
    ],
)
async def test_handshake_failures_are_specific(tmp_path, scenario, agent_table, kind, needle):
    s, _ = session_for(scenario(f"[agent]\n{agent_table}\n[[turns]]\nactions = []\n"), tmp_path)
    try:
        with pytest.raises(AgentError) as info:
            await s.start()
        assert info.value.kind == kind
        assert needle in str(info.value)
    finally:
        await s.close()
    assert gone(s.pid)


async def test_initialize_that_hangs_times_out(tmp_path, scenario):
    path = scenario('[agent]\nhang_during = "initialize"\n[[turns]]\nactions = []\n')
    s, _ = session_for(path, tmp_path, timeouts=AgentTimeouts(initialize=1.0))
    try:
        with pytest.raises(AgentError, match=r"initialize timed out after 1s") as info:
            await s.start()
        assert info.value.kind == "deadline_exceeded"
    finally:
        await s.close()
    assert gone(s.pid)


async def test_missing_command_is_reported_with_its_install_hint(tmp_path):
    spec = AgentSpec(name="ghost", command="definitely-not-installed-agent", install="npm i -g ghost-acp")
    s = AgentSession(spec, workspace=tmp_path, policy=Policy.default_policy(), emit=lambda e: None)
    with pytest.raises(AgentError, match=r"was not found \(install: npm i -g ghost-acp\)") as info:
        await s.start()
    assert info.value.kind == "transport_error"


async def test_garbage_on_stdout_mid_turn_is_a_protocol_error(tmp_path, scenario):
    s, _ = session_for(
        scenario('[[turns]]\nactions = [{ say = "hi" }, { garbage = "DEBUG: oops" }, { hang = true }]\n'), tmp_path
    )
    try:
        await s.start()
        with pytest.raises(AgentError, match="not JSON-RPC to stdout: 'DEBUG: oops'") as info:
            await s.prompt("go", stage=1)
        assert info.value.kind == "protocol_error"
    finally:
        await s.close()
    assert gone(s.pid)


async def test_authentication_failure_is_named(tmp_path, scenario):
    s, _ = session_for(scenario("[agent]\nauth_required = true\n[[turns]]\nactions = []\n"), tmp_path)
    try:
        await s.start()
        with pytest.raises(AgentError, match="needs authentication") as info:
            await s.prompt("go", stage=1)
        assert info.value.kind == "auth_required"
    finally:
        await s.close()


async def test_a_flood_on_stderr_is_drained_and_the_log_is_capped(tmp_path, scenario):
    flood = scenario(
        '[agent]\nstderr_flood_bytes = 3000000\n[[turns]]\nactions = [{ stderr = 3000000 }, { say = "still here" }]\n'
    )
    s, _ = session_for(flood, tmp_path)
    try:
        await s.start()
        out = await s.prompt("go", stage=1)
        assert out.text_parts == ("still here",)
    finally:
        await s.close()
    size = (tmp_path / STDERR_LOG).stat().st_size
    assert STDERR_LOG_CAP <= size < STDERR_LOG_CAP + 200


async def test_updates_map_to_events_and_text_is_coalesced(tmp_path, scenario):
    chatty = scenario(
        """
        [[turns]]
        actions = [
          { say = "tok ", repeat = 200 },
          { think = "pondering" },
          { plan = [ { content = "step one", status = "in_progress" } ] },
          { tool = "List files", kind = "read", input = { path = "." } },
          { usage = { used = 10, size = 100, cost = 0.5 } },
        ]
        """
    )
    s, got = session_for(chatty, tmp_path)
    try:
        await s.start()
        out = await s.prompt("go", stage=4)
    finally:
        await s.close()
    texts = [e for e in got if isinstance(e, ev.AgentText)]
    assert "".join(e.text for e in texts) == "tok " * 200
    assert len(texts) < 20  # coalesced, not one event per chunk
    assert all(e.stage == 4 for e in texts)
    assert ev.AgentThought(stage=4, text="pondering") in got
    assert ev.AgentPlan(entries=(ev.PlanItem("step one", "in_progress", "medium"),)) in got
    tool = next(e for e in got if isinstance(e, ev.ToolCall))
    assert (tool.title, tool.kind, tool.status) == ("List files", "read", "pending")
    assert [e.status for e in got if isinstance(e, ev.ToolUpdate)] == ["in_progress", "completed"]
    assert ev.Usage(used=10, size=100, cost=0.5, currency="USD") in got
    assert out.stop_reason == "end_turn" and out.answered


@pytest.mark.parametrize(
    ("actions", "answered"),
    [
        ('{ say = "Here is the answer." }, BLOCK', True),  # text flushed at the tool boundary counts
        ('BLOCK, { say = "Answered anyway." }', True),
        ("BLOCK", False),
        ('{ say = "   " }, BLOCK', False),  # whitespace is not visible text
    ],
)
async def test_the_answered_predicate(tmp_path, scenario, actions, answered):
    block = '{ tool = "Read ~/.ssh/id_rsa", kind = "read", input = { path = "~/.ssh/id_rsa" } }'
    s, _ = session_for(scenario(f"[[turns]]\nactions = [{actions.replace('BLOCK', block)}]\n"), tmp_path)
    try:
        await s.start()
        out = await s.prompt("go", stage=1)
    finally:
        await s.close()
    assert out.answered is answered
    assert len(out.refusals) == 1
    assert out.stop_reason == "end_turn"  # reject_once, not cancelled: the turn went on


async def test_client_side_actions_are_confined_and_enforced(tmp_path, scenario):
    marker = tmp_path / "ws" / "forbidden-marker"
    policy = Policy.from_text(
        '[[rules]]\nid = "no-touch"\ndecision = "deny"\nreason = "test rule"\nprogram = ["touch"]\n', "<test>"
    )
    actions = scenario(
        """
        [[turns]]
        actions = [
          { write = "../escape.md", content = "x" },
          { write = "inside.md", content = "ok" },
          { read = "../outside.txt" },
          { run = "touch forbidden-marker" },
          { run = "echo allowed > allowed.txt" },
        ]
        """
    )
    (tmp_path / "outside.txt").write_text("private")
    s, got = session_for(actions, tmp_path, policy=policy)
    try:
        await s.start()
        out = await s.prompt("go", stage=1)
    finally:
        await s.close()
    assert not (tmp_path / "escape.md").exists()
    assert (tmp_path / "ws" / "inside.md").read_text() == "ok"
    assert not marker.exists()
    assert (tmp_path / "ws" / "allowed.txt").read_text() == "allowed\n"
    blocked = [e for e in got if isinstance(e, ev.BlockedCall)]
    assert [(b.origin, b.pattern) for b in blocked] == [
        ("fs_write", "outside the workspace"),
        ("fs_read", "outside the workspace"),
        ("terminal", "touch"),
    ]
    assert len(out.refusals) == 3
    assert "private" not in "".join(out.text_parts)


async def test_close_leaves_nothing_running(tmp_path, scenario):
    s, _ = session_for(scenario('[[turns]]\nactions = [{ run = "sleep 30" }]\n'), tmp_path)
    await s.start()
    pid = s.pid
    task = __import__("asyncio").create_task(s.prompt("go", stage=1))
    await __import__("asyncio").sleep(1.0)
    children = psutil.Process(os.getpid()).children(recursive=True)
    assert any("sleep" in " ".join(c.cmdline()) for c in children if not gone(c.pid))
    await s.close()
    task.cancel()
    assert gone(pid)
    leftovers = [c for c in psutil.Process(os.getpid()).children(recursive=True) if not gone(c.pid)]
    assert leftovers == []
