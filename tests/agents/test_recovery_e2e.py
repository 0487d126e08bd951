"""Refusal recovery end to end: real stage loop, real scripted agent, prompts as it received them."""

from __future__ import annotations

import asyncio

import pytest

from core import events as ev
from core.policy import Policy
from core.recovery import RECOVERY_PREFIX, Refusal, build_refusal_recovery_prompt
from tests.agents.harness import events, plan_of, recorded, settle, start, view
from tests.conftest import read_until, run_cli

pytestmark = pytest.mark.timeout(60)

BLOCK = '{ tool = "Read ~/.aws/credentials", kind = "read", input = { path = "~/.aws/credentials" } }'
BLOCK2 = '{ tool = "Read ~/.ssh/id_rsa", kind = "read", input = { path = "~/.ssh/id_rsa" } }'
BLOCK3 = '{ tool = "Read ~/.netrc", kind = "read", input = { path = "~/.netrc" } }'


def scenario_with(first_turn: str, agent: str = "") -> str:
    return f'{agent}\n[[turns]]\nactions = [{first_turn}]\n[[turns]]\nactions = [{{ say = "noted" }}]\n'


@pytest.fixture
def record(tmp_path, monkeypatch):
    path = tmp_path / "received.jsonl"
    monkeypatch.setenv("PLANDECK_SCRIPTED_RECORD", str(path))
    return path


async def run_one_stage(tmp_path, scenario_text: str, scenario, **kw):
    h = await start(tmp_path, plan_of("Only"), scenario(scenario_text), **kw)
    h.controller.go()
    await settle(h)
    return h


def recovery_prompts(record_path) -> list[str]:
    return [r["text"] for r in recorded(record_path) if "turn" in r and r["text"].startswith(RECOVERY_PREFIX)]


@pytest.mark.parametrize(
    "first_turn",
    [
        f'{{ say = "The deploy uses the prod profile." }}, {BLOCK}',  # text, then the blocked call
        f'{BLOCK}, {{ say = "Answered without the file." }}',  # the blocked call, then text
    ],
    ids=["text-then-block", "block-then-text"],
)
async def test_a_turn_that_answered_gets_the_awareness_body(tmp_path, scenario, record, first_turn):
    h = await run_one_stage(tmp_path, scenario_with(first_turn), scenario)
    try:
        (body,) = recovery_prompts(record)
        assert "Do NOT repeat" in body
        assert "ended the turn early" not in body
        assert "continue the task where you left off" not in body
        assert "Blocked by security policy: ~/.aws/**" in body
        (card,) = view(h).recovery_cards
        assert card.answered and card.body == body
    finally:
        await h.close()


async def test_a_silent_blocked_turn_gets_the_default_body(tmp_path, scenario, record):
    h = await run_one_stage(tmp_path, scenario_with(BLOCK), scenario)
    try:
        (body,) = recovery_prompts(record)
        expected = build_refusal_recovery_prompt(
            [Refusal("Read ~/.aws/credentials", "Blocked by security policy: ~/.aws/**", "aws_credential")],
            answered=False,
        )
        assert body == expected
        assert "ended the turn early" in body and "continue the task where you left off" in body
    finally:
        await h.close()


async def test_three_blocks_in_one_turn_make_exactly_one_continuation(tmp_path, scenario, record):
    h = await run_one_stage(tmp_path, scenario_with(f'{{ say = "checking" }}, {BLOCK}, {BLOCK2}, {BLOCK3}'), scenario)
    try:
        (body,) = recovery_prompts(record)
        bullets = [line for line in body.splitlines() if line.lstrip().startswith("- ")]
        assert len(bullets) == 3
        assert view(h).stages[0].rounds == 2  # the stage turn and one recovery turn
        assert h.controller.state == "completed"
    finally:
        await h.close()


async def test_steering_confirmed_in_band_skips_the_continuation(tmp_path, scenario, record):
    text = scenario_with(f"{BLOCK}, {{ sleep = 0.5 }}, {BLOCK2}, {{ sleep = 0.5 }}", agent="[agent]\nsteering = true")
    h = await run_one_stage(tmp_path, text, scenario)
    try:
        steers = [r["steer"] for r in recorded(record) if "steer" in r]
        assert len(steers) == 2 and all("Blocked by security policy" in s for s in steers)
        assert recovery_prompts(record) == []
        assert [e.confirmed for e in events(h) if isinstance(e, ev.SteeringSent)] == [True, True]
        assert view(h).stages[0].rounds == 1
    finally:
        await h.close()


async def test_a_pending_steering_notice_still_gets_the_continuation(tmp_path, scenario, record):
    text = scenario_with(BLOCK, agent="[agent]\nsteering = true\nsteering_reply_delay = 3.0")
    h = await run_one_stage(tmp_path, text, scenario)
    try:
        assert len(recovery_prompts(record)) == 1
    finally:
        await h.close()


async def test_operator_cancel_during_a_blocked_turn_queues_no_continuation(tmp_path, scenario, record):
    h = await start(tmp_path, plan_of("Only"), scenario(scenario_with(f"{BLOCK}, {{ hang = true }}")))
    try:
        h.controller.go()
        for _ in range(200):
            if any(isinstance(e, ev.BlockedCall) for e in events(h)):
                break
            await asyncio.sleep(0.05)
        h.controller.cancel()
        assert await settle(h) == "cancelled"
        assert recovery_prompts(record) == []
        assert not any(isinstance(e, ev.RecoveryQueued) for e in events(h))
    finally:
        await h.close()


async def test_an_agent_that_reports_cancelled_after_a_reject_still_learns_why(tmp_path, scenario, record):
    # Some agents end the turn "cancelled" after a reject nobody cancelled; the
    # decision uses the operator's live stop signal, not the stopReason.
    text = f'[[turns]]\nstop = "cancelled"\nactions = [{BLOCK}]\n[[turns]]\nactions = [{{ say = "noted" }}]\n'
    h = await run_one_stage(tmp_path, text, scenario)
    try:
        assert len(recovery_prompts(record)) == 1
        assert h.controller.state == "completed"
    finally:
        await h.close()


ASK_POLICY = """
[[rules]]
id = "ask-push"
decision = "ask"
reason = "publishing"
title = ["^git push"]
"""
ASKING = '[[turns]]\nactions = [{ tool = "git push origin main", kind = "execute", input = { command = "git push origin main" } }, { say = "after the push" }]\n'


async def _pending_ask(h) -> str:
    for _ in range(200):
        asks = view(h).pending_asks
        if asks:
            return asks[0].request_id
        await asyncio.sleep(0.05)
    raise AssertionError("no permission request appeared")


@pytest.mark.parametrize("decision", ["allow", "deny"])
async def test_ask_waits_for_the_operator(tmp_path, scenario, decision):
    policy = Policy.from_text(ASK_POLICY, "<test>")
    h = await start(tmp_path, plan_of("Push"), scenario(ASKING), policy=policy)
    try:
        h.controller.go()
        request_id = await _pending_ask(h)
        assert view(h).needs_input
        verdict = h.controller.permission(request_id, decision)
        assert verdict.kind == "accepted"
        assert await settle(h) == "completed"
        tool = next(r for r in view(h).transcript if r.kind == "tool")
        assert tool.status == ("completed" if decision == "allow" else "failed")
        assert not any(isinstance(e, ev.BlockedCall) for e in events(h))  # an operator's no is not a policy block
        assert not any(isinstance(e, ev.RecoveryQueued) for e in events(h))
        assert h.controller.permission(request_id, "allow").kind == "refused"  # answered once
    finally:
        await h.close()


async def test_an_unanswered_ask_is_never_silently_denied(tmp_path, scenario):
    from core.tracker import Budgets

    policy = Policy.from_text(ASK_POLICY, "<test>")
    h = await start(tmp_path, plan_of("Push"), scenario(ASKING), policy=policy, budgets=Budgets(2, 600))
    try:
        h.controller.go()
        await _pending_ask(h)
        assert await settle(h) == "halted"  # the stage clock kept running while it waited
        decided = [e for e in events(h) if isinstance(e, ev.PermissionDecided)]
        assert [(d.decision, d.by) for d in decided] == [("cancelled", "cancel")]
    finally:
        await h.close()


def test_headless_ask_is_answered_over_the_control_socket(tmp_path, scenario, plan_file, workspace):
    import subprocess
    import sys

    policy = tmp_path / "policy.toml"
    policy.write_text(ASK_POLICY)
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tui.cli",
            "run",
            str(plan_file("Push")),
            "--agent",
            f"scripted:{scenario(ASKING)}",
            "--headless",
            "--go-all",
            "--policy",
            str(policy),
            "--runs-dir",
            str(runs),
            "--workspace",
            str(workspace),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = read_until(proc, "permission needed")
        assert "permission needed: git push origin main — plandeck allow|deny" in line
        run_dir, request_id = line.split()[-2:]
        out = run_cli("allow", run_dir, request_id)
        assert out.returncode == 0 and out.stdout.startswith("accepted: Allowed: git push origin main")
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
