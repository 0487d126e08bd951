"""plandeck's scripted ACP agent: a real agent program driven by a scenario (SPEC §11).

    python -m core.agents.scripted SCENARIO.toml [--record FILE]

It speaks ACP over stdio exactly as a third-party agent does — initialize,
session/new with modes, session/prompt, session/cancel, permission requests,
client fs and terminal calls, `_session/steering` when enabled — so it is both
the embedded default (`plandeck demo`) and the double for end-to-end tests.

Scenario format (TOML):

    name = "example"
    [agent]
    steering = false            # advertise _meta.steering.supported, accept _session/steering
    initial_mode = "default"    # modes offered: "default", "auto" (see `modes`)
    [[turns]]                   # one per session/prompt, in order; the last one repeats
    expect = "Stage 1"          # optional; a prompt without it ends the turn with "refusal"
    stop = "end_turn"           # end_turn | max_tokens | max_turn_requests | refusal | cancelled
    actions = [ { say = "…" }, { tool = "Read x", kind = "read", input = { path = "x" } }, … ]

Actions: say (with optional repeat), think, plan, tool, write, read, run, usage,
sleep, hang, crash. For failure-path tests the [agent] table also accepts
protocol_version, modes, exit_during, hang_during, stderr_flood_bytes,
stdout_banner, auth_required, refuse_mode_switch, steering_confirms and
steering_reply_delay; an action may also be { garbage = "…" } or { stderr = N }.
With --record FILE (or PLANDECK_SCRIPTED_RECORD=FILE) every prompt received is
appended as {"turn": k, "text": …} and every steering message as {"steer": …}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tomllib
import uuid
from pathlib import Path
from typing import Annotated, Any, Literal

import acp
from acp import schema as s
from acp.helpers import update_current_mode
from pydantic import BaseModel, ConfigDict, Field, ValidationError

RECORD_ENV = "PLANDECK_SCRIPTED_RECORD"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class AgentOptions(_Strict):
    steering: bool = False
    initial_mode: str = "default"
    modes: list[str] = ["default", "auto"]
    name: str = "plandeck-scripted"
    version: str = "1.0"
    protocol_version: int = 1
    exit_during: Literal["initialize", "session_new", "set_mode"] | None = None
    hang_during: Literal["initialize", "session_new", "set_mode"] | None = None
    stderr_flood_bytes: Annotated[int, Field(ge=0)] = 0
    stdout_banner: str = ""
    auth_required: bool = False
    refuse_mode_switch: bool = False
    steering_confirms: bool = True
    steering_reply_delay: Annotated[float, Field(ge=0)] = 0.0


class Turn(_Strict):
    expect: str | None = None
    stop: Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"] = "end_turn"
    actions: list[dict[str, Any]] = []


class Scenario(_Strict):
    name: str = "scenario"
    agent: AgentOptions = AgentOptions()
    turns: Annotated[list[Turn], Field(min_length=1)]


ACTION_KEYS = {
    "say": {"say", "repeat"},
    "think": {"think"},
    "plan": {"plan"},
    "tool": {"tool", "kind", "input", "output", "locations", "permission"},
    "write": {"write", "content"},
    "read": {"read"},
    "run": {"run"},
    "usage": {"usage"},
    "sleep": {"sleep"},
    "hang": {"hang"},
    "crash": {"crash"},
    "garbage": {"garbage"},
    "stderr": {"stderr"},
}


def load_scenario(path: Path) -> Scenario:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    scenario = Scenario.model_validate(data)
    for t, turn in enumerate(scenario.turns):
        for a, action in enumerate(turn.actions):
            kind = next((k for k in ACTION_KEYS if k in action), None)
            if kind is None or not set(action) <= ACTION_KEYS[kind]:
                raise ValueError(f"turns[{t}].actions[{a}]: unknown action {sorted(action)}")
    return scenario


class ScriptedAgent:
    def __init__(self, scenario: Scenario, record: str | None) -> None:
        self.scenario = scenario
        self.opts = scenario.agent
        self.record_path = record
        self.conn: Any = None
        self.turn_index = 0
        self.mode = self.opts.initial_mode
        self.cwd = os.getcwd()
        self.cancelled = asyncio.Event()
        self.in_turn = False
        self.session_id = "scripted-" + uuid.uuid4().hex[:8]
        self._tool_seq = 0

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    def _record(self, entry: dict[str, Any]) -> None:
        if self.record_path:
            with open(self.record_path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry, ensure_ascii=False) + "\n")

    async def _maybe_fail(self, phase: str) -> None:
        if self.opts.exit_during == phase:
            sys.stderr.write(f"scripted agent: exiting during {phase} as scripted\n")
            sys.stderr.flush()
            os._exit(7)
        if self.opts.hang_during == phase:
            await asyncio.Event().wait()

    # -- ACP agent methods -----------------------------------------------------------------
    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **_: Any
    ):
        await self._maybe_fail("initialize")
        self.client_caps = client_capabilities
        meta = {"steering": {"supported": True}} if self.opts.steering else None
        return s.InitializeResponse(
            protocol_version=self.opts.protocol_version,
            agent_capabilities=s.AgentCapabilities(load_session=False),
            agent_info=s.Implementation(name=self.opts.name, version=self.opts.version),
            field_meta=meta,
        )

    async def new_session(self, cwd: str, mcp_servers: Any = None, **_: Any):
        await self._maybe_fail("session_new")
        self.cwd = cwd
        modes = None
        if self.opts.modes:
            modes = s.SessionModeState(
                current_mode_id=self.mode,
                available_modes=[s.SessionMode(id=m, name=m.capitalize()) for m in self.opts.modes],
            )
        return s.NewSessionResponse(session_id=self.session_id, modes=modes)

    async def set_session_mode(self, session_id: str, mode_id: str, **_: Any):
        await self._maybe_fail("set_mode")
        if self.opts.refuse_mode_switch or mode_id not in self.opts.modes:
            raise acp.RequestError.invalid_params({"details": f"mode {mode_id!r} is not available"})
        self.mode = mode_id
        await self.conn.session_update(session_id, update_current_mode(mode_id))
        return s.SetSessionModeResponse()

    async def authenticate(self, method_id: str, **_: Any):
        return s.AuthenticateResponse()

    async def cancel(self, session_id: str, **_: Any) -> None:
        self.cancelled.set()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method != "session/steering" or not self.opts.steering:
            raise acp.RequestError.method_not_found(f"_{method}")
        prompt = params.get("prompt") or []
        text = "".join(b.get("text", "") for b in prompt if isinstance(b, dict))
        if self.opts.steering_reply_delay:
            await asyncio.sleep(self.opts.steering_reply_delay)
        self._record({"steer": text})
        if not self.in_turn:
            return {"outcome": "promptRequired", "reason": "noRunningTurn"}
        return {"outcome": "injected" if self.opts.steering_confirms else "rejected"}

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any):
        text = "".join(getattr(block, "text", "") or "" for block in prompt)
        k = self.turn_index
        self.turn_index += 1
        self._record({"turn": k + 1, "text": text})
        if self.opts.auth_required:
            raise acp.RequestError.auth_required({"details": "scripted agent: no credentials; run the login first"})
        turn = self.scenario.turns[min(k, len(self.scenario.turns) - 1)]
        self.cancelled.clear()
        self.in_turn = True
        try:
            if turn.expect is not None and turn.expect not in text:
                await self._say(f"scripted agent: expected the prompt to contain {turn.expect!r}")
                return s.PromptResponse(stop_reason="refusal")
            for action in turn.actions:
                if self.cancelled.is_set():
                    return s.PromptResponse(stop_reason="cancelled")
                outcome = await self._act(action)
                if outcome == "cancelled":
                    return s.PromptResponse(stop_reason="cancelled")
            if self.cancelled.is_set():
                return s.PromptResponse(stop_reason="cancelled")
            return s.PromptResponse(stop_reason=turn.stop)
        finally:
            self.in_turn = False

    # -- actions -------------------------------------------------------------------------------
    async def _say(self, text: str) -> None:
        await self.conn.session_update(self.session_id, acp.update_agent_message_text(text))

    async def _wait_or_cancel(self, seconds: float | None) -> bool:
        """Sleep; True when interrupted by session/cancel."""
        try:
            await asyncio.wait_for(self.cancelled.wait(), seconds)
            return True
        except TimeoutError:
            return False

    async def _act(self, action: dict[str, Any]) -> str | None:
        if "say" in action:
            for _ in range(int(action.get("repeat", 1))):
                await self._say(str(action["say"]))
        elif "think" in action:
            await self.conn.session_update(self.session_id, acp.update_agent_thought_text(str(action["think"])))
        elif "plan" in action:
            entries = [
                acp.plan_entry(e["content"], status=e.get("status", "pending"), priority=e.get("priority", "medium"))
                for e in action["plan"]
            ]
            await self.conn.session_update(self.session_id, acp.update_plan(entries))
        elif "tool" in action:
            return await self._tool(action)
        elif "write" in action:
            path = os.path.join(self.cwd, str(action["write"]))
            try:
                await self.conn.write_text_file(
                    session_id=self.session_id, path=path, content=str(action.get("content", ""))
                )
            except acp.RequestError as exc:
                await self._say(f"(could not write {action['write']}: {exc})")
        elif "read" in action:
            path = os.path.join(self.cwd, str(action["read"]))
            try:
                await self.conn.read_text_file(session_id=self.session_id, path=path)
            except acp.RequestError as exc:
                await self._say(f"(could not read {action['read']}: {exc})")
        elif "run" in action:
            return await self._run(str(action["run"]))
        elif "usage" in action:
            u = action["usage"]
            cost = s.Cost(amount=float(u["cost"]), currency=u.get("currency", "USD")) if "cost" in u else None
            await self.conn.session_update(
                self.session_id,
                s.UsageUpdate(session_update="usage_update", used=int(u["used"]), size=int(u["size"]), cost=cost),
            )
        elif "sleep" in action:
            if await self._wait_or_cancel(float(action["sleep"])):
                return "cancelled"
        elif "hang" in action:
            await self._wait_or_cancel(None)
            return "cancelled"
        elif "crash" in action:
            sys.stdout.flush()
            os._exit(int(action["crash"]))
        elif "garbage" in action:
            os.write(1, str(action["garbage"]).encode() + b"\n")
        elif "stderr" in action:
            value = action["stderr"]
            if isinstance(value, str):
                os.write(2, value.encode() + b"\n")
            else:
                _flood_stderr(int(value))
        return None

    async def _tool(self, action: dict[str, Any]) -> str | None:
        self._tool_seq += 1
        tool_id = f"tool-{self._tool_seq}"
        title = str(action["tool"])
        kind = action.get("kind", "other")
        raw = action.get("input")
        locations = [s.ToolCallLocation(path=p) for p in action.get("locations", [])] or None
        await self.conn.session_update(
            self.session_id,
            acp.start_tool_call(tool_id, title, kind=kind, status="pending", raw_input=raw, locations=locations),
        )
        if action.get("permission", True):
            options = [
                s.PermissionOption(option_id="allow-once", name="Allow once", kind="allow_once"),
                s.PermissionOption(option_id="allow-always", name="Always allow", kind="allow_always"),
                s.PermissionOption(option_id="reject-once", name="Reject", kind="reject_once"),
                s.PermissionOption(option_id="reject-always", name="Always reject", kind="reject_always"),
            ]
            update = s.ToolCallUpdate(tool_call_id=tool_id, title=title, kind=kind, status="pending", raw_input=raw)
            resp = await self.conn.request_permission(session_id=self.session_id, tool_call=update, options=options)
            outcome = resp.outcome
            if isinstance(outcome, s.DeniedOutcome) or getattr(outcome, "outcome", "") == "cancelled":
                await self.conn.session_update(self.session_id, acp.update_tool_call(tool_id, status="failed"))
                return "cancelled"
            if str(outcome.option_id).startswith("reject"):
                await self.conn.session_update(self.session_id, acp.update_tool_call(tool_id, status="failed"))
                return None
        await self.conn.session_update(self.session_id, acp.update_tool_call(tool_id, status="in_progress"))
        content = None
        if "output" in action:
            content = [acp.tool_content(acp.text_block(str(action["output"])))]
        await self.conn.session_update(
            self.session_id, acp.update_tool_call(tool_id, status="completed", content=content)
        )
        return None

    async def _run(self, command: str) -> str | None:
        caps = getattr(self, "client_caps", None)
        if caps is None or not getattr(caps, "terminal", False):
            await self._say(f"(no terminal offered; skipped: {command})")
            return None
        try:
            created = await self.conn.create_terminal(
                session_id=self.session_id, command="/bin/sh", args=["-c", command], cwd=self.cwd
            )
        except acp.RequestError as exc:
            await self._say(f"(could not run {command!r}: {exc})")
            return None
        tid = created.terminal_id
        await self.conn.wait_for_terminal_exit(session_id=self.session_id, terminal_id=tid)
        await self.conn.terminal_output(session_id=self.session_id, terminal_id=tid)
        await self.conn.release_terminal(session_id=self.session_id, terminal_id=tid)
        return None


def _flood_stderr(count: int) -> None:
    block = (b"scripted agent: noisy log line " + b"." * 90 + b"\n") * 64
    written = 0
    while written < count:
        written += os.write(2, block[: count - written])


async def _main(scenario: Scenario, record: str | None) -> None:
    agent = ScriptedAgent(scenario, record)
    if scenario.agent.stdout_banner:
        os.write(1, scenario.agent.stdout_banner.encode() + b"\n")
    if scenario.agent.stderr_flood_bytes:
        _flood_stderr(scenario.agent.stderr_flood_bytes)
    await acp.run_agent(agent)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.agents.scripted", description="plandeck's scripted ACP agent")
    parser.add_argument("scenario", type=Path)
    parser.add_argument("--record", help="append every prompt received to this JSONL file")
    args = parser.parse_args(argv)
    try:
        scenario = load_scenario(args.scenario)
    except (OSError, tomllib.TOMLDecodeError, ValidationError, ValueError) as exc:
        print(f"scripted agent: bad scenario {args.scenario}: {exc}", file=sys.stderr)
        return 2
    record = args.record or os.environ.get(RECORD_ENV) or None
    try:
        asyncio.run(_main(scenario, record))
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
