"""AgentSession: plandeck's client side of the Agent Client Protocol.

Owns one agent subprocess and one ACP session:
- spawns the agent in its own process group with an explicit environment (base
  variables plus the names the agent's config passes through), drains its stderr
  into a bounded, redacted log (an undrained pipe hangs a chatty agent), and
  reads its stdout through our own transport so that garbage on stdout is a
  specific protocol error instead of a silently skipped line;
- times out every request; `initialize` advertises fs read/write and terminals
  and serves them confined to the run's workspace under the policy;
- switches to an asking mode when the agent offers modes, and refuses to run a
  stage in a mode where permission requests would never reach plandeck;
- maps every `session/update` to journal events (message text coalesced into
  chunks, tool calls by id, plan, usage, mode) and tracks the *answered*
  predicate of the turn (visible text before or after a blocked call);
- decides permission requests through the policy: deny selects the agent's own
  `reject_once` option (never `cancelled`), ask waits for the operator.
Nothing is left running after `close()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import acp
import msgspec
import pydantic
from acp import schema as s

from core import events as ev
from core.agents.registry import AgentSpec
from core.policy import Decision, Policy, ToolRequest, within
from core.recovery import Refusal, classify, guidance_for
from core.redact import redact

CLIENT_NAME = "plandeck"
CLIENT_VERSION = "0.1.0"
STDERR_LOG = "agent.stderr.log"
STDERR_LOG_CAP = 1024 * 1024
STDERR_TAIL = 64 * 1024
STDOUT_LINE_LIMIT = 64 * 1024 * 1024
TEXT_FLUSH_SECONDS = 0.05
TEXT_FLUSH_BYTES = 16 * 1024
INPUT_PREVIEW = 400
MAX_READ_BYTES = 10 * 1024 * 1024
TERMINAL_OUTPUT_DEFAULT = 1024 * 1024
ASKING_MODE_HINTS = ("default", "ask", "manual", "normal", "review")
AUTH_HINTS = ("auth", "login", "log in", "credential", "api key", "apikey", "unauthorized", "401", "not logged")


class AgentError(Exception):
    """A specific failure talking to an agent; `kind` is an observation failure kind."""

    def __init__(self, message: str, *, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(slots=True)
class TurnOutcome:
    stop_reason: str
    text_parts: tuple[str, ...]
    answered: bool
    refusals: list[Refusal]
    steering_confirmed: int
    steering_pending: int


@dataclass(slots=True)
class AgentIdentity:
    name: str = "?"
    version: str = "?"
    protocol_version: int = 0
    steering: bool = False
    load_session: bool = False
    resume_session: bool = False
    prompt_types: tuple[str, ...] = ()
    modes: tuple[str, ...] = ()
    mode: str | None = None
    initial_mode: str | None = None
    supervised: bool = True
    timings: dict[str, float] = field(default_factory=dict)


class _Transport:
    """ACP message transport over the agent's stdio (NDJSON), strict about stdout."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc
        self._lock = asyncio.Lock()
        self.protocol_error: str | None = None

    async def send(self, message: dict[str, Any]) -> None:
        stdin = self._proc.stdin
        if stdin is None or stdin.is_closing():
            raise ConnectionError("the agent's stdin is closed")
        data = msgspec.json.encode(message) + b"\n"
        async with self._lock:
            stdin.write(data)
            await stdin.drain()

    async def receive(self) -> dict[str, Any] | None:
        stdout = self._proc.stdout
        assert stdout is not None
        while True:
            try:
                line = await stdout.readline()
            except (ValueError, asyncio.LimitOverrunError):
                self.protocol_error = "the agent wrote a line over 64 MiB to stdout"
                return None
            if not line:
                return None
            line = line.strip()
            if not line:
                continue
            try:
                message = msgspec.json.decode(line)
            except msgspec.DecodeError:
                message = None
            if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
                sample = redact(line[:80].decode("utf-8", "replace"))
                self.protocol_error = f"the agent wrote something that is not JSON-RPC to stdout: {sample!r}"
                return None  # end the connection: every pending request fails now
            return message

    async def close(self) -> None:
        stdin = self._proc.stdin
        if stdin is not None and not stdin.is_closing():
            with contextlib.suppress(Exception):
                stdin.close()


@dataclass(slots=True)
class _Terminal:
    proc: asyncio.subprocess.Process
    limit: int
    output: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    reader: asyncio.Task[None] | None = None

    def feed(self, data: bytes) -> None:
        self.output.extend(data)
        if len(self.output) > self.limit:
            del self.output[: len(self.output) - self.limit]
            self.truncated = True


@dataclass(slots=True)
class PendingAsk:
    request_id: str
    title: str
    kind: str
    input: str
    decision: Decision
    future: asyncio.Future[str]


Emit = Callable[[ev.Event], None]


class AgentSession:
    def __init__(
        self,
        spec: AgentSpec,
        *,
        workspace: Path,
        policy: Policy,
        emit: Emit,
        log_dir: Path | None = None,
        observer: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spec = spec
        self.workspace = str(Path(workspace).resolve())
        self.policy = policy
        self._emit = emit
        self._log_dir = log_dir
        self._observer = observer
        self._clock = clock
        self.identity = AgentIdentity()
        self.stage = 0
        self.session_id: str | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._transport: _Transport | None = None
        self._conn: Any = None
        self._stderr_task: asyncio.Task[None] | None = None
        self._stderr_tail: deque[bytes] = deque()
        self._stderr_tail_bytes = 0
        self._stderr_logged = 0
        self._stderr_fd: int | None = None
        self._mode_event = asyncio.Event()
        self._closed = False
        self._cancelling = False
        self._terminals: dict[str, _Terminal] = {}
        self._terminal_seq = 0
        self._ask_seq = 0
        self.pending_asks: dict[str, PendingAsk] = {}
        self._tools: dict[str, dict[str, Any]] = {}
        self._client_action_seq = 0
        self._in_turn = False
        self._reset_turn()

    # -- lifecycle ---------------------------------------------------------------
    @property
    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.returncode

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def _mark(self, phase: str) -> None:
        if self._observer is not None:
            self._observer.mark(phase)

    async def start(self) -> AgentIdentity:
        """Spawn, initialize, open a session and put it in an asking mode."""
        self._mark("identity_preflight")
        env = self.spec.environment()
        command = self.spec.resolved_command(env)
        if command is None:
            raise AgentError(
                f"agent command {self.spec.command!r} was not found"
                + (f" (install: {self.spec.install})" if self.spec.install else ""),
                kind="transport_error",
            )
        cwd = self.spec.cwd or self.workspace
        try:
            self._proc = await asyncio.create_subprocess_exec(
                command,
                *self.spec.args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,  # its own process group: close() reaps npx children too
                limit=STDOUT_LINE_LIMIT,
            )
        except OSError as exc:
            raise AgentError(
                f"could not start agent {self.spec.name!r}: {exc.strerror}", kind="transport_error"
            ) from None
        self._open_stderr_log()
        self._stderr_task = asyncio.create_task(self._drain_stderr(), name="plandeck.agent.stderr")
        self._transport = _Transport(self._proc)
        self._conn = acp.connect_to_agent(_Client(self), self._transport)
        await self._initialize()
        self._mark("model_metadata")
        await self._new_session()
        return self.identity

    async def _request(
        self, what: str, coro: Awaitable[Any], timeout: float | None, *, payload: str | None = None
    ) -> Any:
        """One ACP request with a deadline, translated into a specific AgentError."""
        if self._observer is not None:
            self._observer.request_started(payload)
        started = self._clock()
        try:
            if timeout is None:
                result = await coro
            else:
                result = await asyncio.wait_for(coro, timeout)
        except TimeoutError:
            raise AgentError(f"{what} timed out after {timeout:g}s", kind="deadline_exceeded") from None
        except acp.RequestError as exc:
            if self._observer is not None:
                self._observer.request_completed()  # the agent answered, with an error
            raise self._request_error(what, exc) from None
        except ConnectionError:
            raise await self._connection_lost(what) from None
        except msgspec.ValidationError as exc:
            raise AgentError(f"{what}: the agent's reply was malformed ({exc})", kind="protocol_error") from None
        except pydantic.ValidationError:
            raise AgentError(f"{what}: the agent's reply did not match the protocol", kind="protocol_error") from None
        self.identity.timings[what] = round(self._clock() - started, 3)
        if self._observer is not None:
            self._observer.request_completed()
        return result

    def _request_error(self, what: str, exc: Any) -> AgentError:
        message = redact(str(exc))[:300]
        data = getattr(exc, "data", None)
        detail = ""
        if isinstance(data, dict):
            detail = redact(str(data.get("details") or data.get("message") or ""))[:300]
        text = f"{message}: {detail}" if detail and detail not in message else message
        lowered = text.lower()
        if exc.code == -32000 or any(h in lowered for h in AUTH_HINTS):
            return AgentError(f"{what} failed: the agent needs authentication ({text})", kind="auth_required")
        return AgentError(f"{what} failed: the agent answered with error {exc.code}: {text}", kind="protocol_error")

    async def _connection_lost(self, what: str) -> AgentError:
        if self._transport is not None and self._transport.protocol_error:
            return AgentError(f"{what} failed: {self._transport.protocol_error}", kind="protocol_error")
        code = await self._wait_exit(1.0)
        if code is not None:
            hint = self.stderr_hint()
            return AgentError(
                f"the agent process exited with code {code} during {what}" + (f" ({hint})" if hint else ""),
                kind="agent_crashed",
            )
        return AgentError(f"{what} failed: the connection to the agent closed", kind="transport_error")

    async def _wait_exit(self, timeout: float) -> int | None:
        if self._proc is None:
            return None
        with contextlib.suppress(TimeoutError):
            return await asyncio.wait_for(self._proc.wait(), timeout)
        return self._proc.returncode

    async def _initialize(self) -> None:
        caps = s.ClientCapabilities(
            fs=s.FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
        )
        resp = await self._request(
            "initialize",
            self._conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION,
                client_capabilities=caps,
                client_info=s.Implementation(name=CLIENT_NAME, version=CLIENT_VERSION),
            ),
            self.spec.timeouts.initialize,
        )
        ident = self.identity
        ident.protocol_version = int(resp.protocol_version)
        if ident.protocol_version != acp.PROTOCOL_VERSION:
            ours = acp.PROTOCOL_VERSION
            raise AgentError(
                f"the agent speaks ACP protocol version {ident.protocol_version}; plandeck speaks {ours}",
                kind="protocol_error",
            )
        if resp.agent_info is not None:
            ident.name = resp.agent_info.name
            ident.version = resp.agent_info.version
        meta = resp.field_meta or {}
        steering = meta.get("steering") if isinstance(meta, dict) else None
        ident.steering = isinstance(steering, dict) and steering.get("supported") is True
        caps_in = resp.agent_capabilities
        if caps_in is not None:
            ident.load_session = bool(caps_in.load_session)
            sess = getattr(caps_in, "session_capabilities", None)
            ident.resume_session = bool(sess is not None and getattr(sess, "resume", None) is not None)
            prompt = caps_in.prompt_capabilities
            if prompt is not None:
                extra = (t for t in ("image", "audio", "embedded_context") if getattr(prompt, t, False))
                ident.prompt_types = ("text", *extra)

    async def _new_session(self) -> None:
        resp = await self._request(
            "session/new",
            self._conn.new_session(cwd=self.workspace, mcp_servers=[]),
            self.spec.timeouts.session_new,
        )
        self.session_id = resp.session_id
        ident = self.identity
        modes = resp.modes
        if modes is not None and modes.available_modes:
            ident.modes = tuple(m.id for m in modes.available_modes)
            ident.mode = ident.initial_mode = modes.current_mode_id
            target = self._asking_mode(modes)
            if target is None or not await self._switch_mode(target):
                if not self.spec.allow_unsupervised:
                    raise AgentError(
                        f"the agent offers modes {', '.join(ident.modes)} but none in which permission requests "
                        "reach plandeck; refusing to run stages unsupervised "
                        "(set allow_unsupervised = true for this agent to run anyway)",
                        kind="policy_refused",
                    )
                ident.supervised = False
        self._emit(
            ev.AgentConnected(
                name=ident.name[:200],
                version=ident.version[:100],
                protocol_version=ident.protocol_version,
                steering=ident.steering,
                modes=ident.modes[:20],
                mode=ident.mode,
            )
        )

    def _asking_mode(self, modes: Any) -> str | None:
        ids = [m.id for m in modes.available_modes]
        if self.spec.mode:
            return self.spec.mode if self.spec.mode in ids else None
        for hint in ASKING_MODE_HINTS:
            for m in modes.available_modes:
                if m.id.lower() == hint or m.name.lower() == hint:
                    return m.id
        return None

    async def _switch_mode(self, target: str) -> bool:
        if self.identity.mode == target:
            return True
        self._mode_event.clear()
        try:
            await self._request(
                "session/set_mode",
                self._conn.set_session_mode(session_id=self.session_id, mode_id=target),
                self.spec.timeouts.set_mode,
            )
        except AgentError as exc:
            if exc.kind in ("agent_crashed", "transport_error"):
                raise
            return False
        # The reply is the agent's acknowledgement; a current_mode_update confirms it.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._mode_event.wait(), 2.0)
        self.identity.mode = target
        self._emit(ev.ModeChanged(mode=target, confirmed=True))
        return True

    # -- turns ---------------------------------------------------------------------
    def _reset_turn(self) -> None:
        self._text_buf: list[str] = []
        self._text_buf_bytes = 0
        self._thought_buf: list[str] = []
        self._turn_parts: list[str] = []
        self._answered = False
        self._refusals: list[Refusal] = []
        self._steer_confirmed = 0
        self._steer_tasks: set[asyncio.Task[None]] = set()
        self._last_flush = self._clock()
        self._flush_handle: asyncio.TimerHandle | None = None

    async def prompt(self, text: str, *, stage: int) -> TurnOutcome:
        """Run one turn. Raises AgentError for a crash, hang-up or refused prompt."""
        if self._conn is None or self.session_id is None:
            raise AgentError("the agent session is not open", kind="internal_error")
        self.stage = stage
        self._reset_turn()
        self._in_turn = True
        self._cancelling = False
        self._mark("inference")
        try:
            resp = await self._request(
                "the prompt turn",
                self._conn.prompt(session_id=self.session_id, prompt=[acp.text_block(text)]),
                None,
                payload=text,
            )
            stop = str(resp.stop_reason)
        finally:
            self._in_turn = False
            self._flush_text()
            self._flush_thought()
        pending = sum(1 for t in self._steer_tasks if not t.done())
        return TurnOutcome(
            stop_reason=stop,
            text_parts=tuple(self._turn_parts),
            answered=self._answered,
            refusals=list(self._refusals),
            steering_confirmed=self._steer_confirmed,
            steering_pending=pending,
        )

    async def cancel(self) -> None:
        """session/cancel, and answer every pending permission request `cancelled`."""
        self._cancelling = True
        for ask in list(self.pending_asks.values()):
            if not ask.future.done():
                ask.future.set_result("cancelled")
        if self._conn is not None and self.session_id is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._conn.cancel(session_id=self.session_id), 2.0)

    def resolve_permission(self, request_id: str, decision: str) -> bool:
        ask = self.pending_asks.get(request_id)
        if ask is None or ask.future.done() or decision not in ("allow", "deny"):
            return False
        ask.future.set_result(decision)
        return True

    # -- update mapping (called by the ACP client) -------------------------------------
    def on_update(self, update: Any) -> None:
        if isinstance(update, s.AgentMessageChunk):
            text = getattr(update.content, "text", None)
            if isinstance(text, str) and text:
                self._on_text(text)
        elif isinstance(update, s.AgentThoughtChunk):
            text = getattr(update.content, "text", None)
            if isinstance(text, str) and text:
                self._thought_buf.append(text)
        elif isinstance(update, s.ToolCallStart):
            self._flush_text()
            self._flush_thought()
            self._remember_tool(update)
            self._emit(
                ev.ToolCall(
                    stage=self.stage,
                    id=update.tool_call_id[:200],
                    title=redact(update.title or "tool")[:300],
                    kind=str(update.kind or "other"),
                    status=str(update.status or "pending"),
                    input=_preview(update.raw_input),
                )
            )
        elif isinstance(update, s.ToolCallProgress):
            known = self._tools.get(update.tool_call_id)
            previous = None if known is None else known.get("status")
            self._remember_tool(update)
            changed_status = update.status is not None and previous != update.status
            if changed_status or update.title is not None:
                self._emit(
                    ev.ToolUpdate(
                        stage=self.stage,
                        id=update.tool_call_id[:200],
                        status=str(update.status or previous or "pending"),
                        title=redact(update.title)[:300] if update.title else None,
                    )
                )
        elif isinstance(update, s.AgentPlanUpdate):
            self._emit(
                ev.AgentPlan(
                    entries=tuple(
                        ev.PlanItem(redact(e.content)[:500], str(e.status), str(e.priority or "medium"))
                        for e in update.entries[:100]
                    )
                )
            )
        elif isinstance(update, s.UsageUpdate):
            cost = update.cost
            self._emit(
                ev.Usage(
                    used=int(update.used),
                    size=int(update.size),
                    cost=float(cost.amount) if cost is not None else None,
                    currency=cost.currency[:8] if cost is not None else None,
                )
            )
        elif isinstance(update, s.CurrentModeUpdate):
            self.identity.mode = update.current_mode_id
            self._mode_event.set()

    def _remember_tool(self, update: Any) -> None:
        info = self._tools.setdefault(update.tool_call_id, {})
        for key in ("title", "kind", "status", "raw_input"):
            value = getattr(update, key, None)
            if value is not None:
                info[key] = value
        if update.locations:
            info["locations"] = [loc.path for loc in update.locations]
        if len(self._tools) > 10_000:
            self._tools.pop(next(iter(self._tools)))

    def _on_text(self, text: str) -> None:
        if self._thought_buf:
            self._flush_thought()
        self._text_buf.append(text)
        self._turn_parts.append(text)
        self._text_buf_bytes += len(text)
        if not self._answered and text.strip():
            self._answered = True
        now = self._clock()
        if self._text_buf_bytes >= TEXT_FLUSH_BYTES or now - self._last_flush >= TEXT_FLUSH_SECONDS:
            self._flush_text()
        elif self._flush_handle is None:
            self._flush_handle = asyncio.get_running_loop().call_later(TEXT_FLUSH_SECONDS, self._flush_text)

    def _flush_text(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        self._last_flush = self._clock()
        if not self._text_buf:
            return
        text = "".join(self._text_buf)
        self._text_buf.clear()
        self._text_buf_bytes = 0
        self._emit(ev.AgentText(stage=self.stage, text=redact(text)))

    def _flush_thought(self) -> None:
        if self._thought_buf:
            text = "".join(self._thought_buf)
            self._thought_buf.clear()
            self._emit(ev.AgentThought(stage=self.stage, text=redact(text)[:20_000]))

    # -- permissions ---------------------------------------------------------------------
    async def on_permission(self, tool_call: Any, options: list[Any]) -> Any:
        self._flush_text()
        self._flush_thought()
        info = dict(self._tools.get(tool_call.tool_call_id, {}))
        for key in ("title", "kind", "raw_input"):
            value = getattr(tool_call, key, None)
            if value is not None:
                info[key] = value
        if tool_call.locations:
            info["locations"] = [loc.path for loc in tool_call.locations]
        title = str(info.get("title") or "tool call")
        kind = str(info.get("kind") or "other")
        raw = info.get("raw_input")
        request = ToolRequest.from_tool_call(title=title, kind=kind, raw_input=raw, locations=info.get("locations", ()))
        decision = self.policy.decide(request, workspace=self.workspace)
        if self._cancelling:
            return s.RequestPermissionResponse(outcome=s.DeniedOutcome(outcome="cancelled"))
        if decision.action == "ask":
            answer = await self._ask_operator(tool_call.tool_call_id, title, kind, raw, decision)
            if answer == "cancelled":
                return s.RequestPermissionResponse(outcome=s.DeniedOutcome(outcome="cancelled"))
            if answer == "deny":
                # The operator refused: "User refused permission" is the truth, so
                # this is not a policy block and earns no recovery turn.
                option = _pick(options, ("reject_once", "reject_always"))
                outcome = (
                    s.AllowedOutcome(outcome="selected", option_id=option)
                    if option is not None
                    else s.DeniedOutcome(outcome="cancelled")
                )
                return s.RequestPermissionResponse(outcome=outcome)
            decision = Decision("allow", decision.rule_id, None, decision.pattern, "allowed by the operator")
        if decision.action == "allow":
            option = _pick(options, ("allow_once", "allow_always"))
            if option is None:
                return s.RequestPermissionResponse(outcome=s.DeniedOutcome(outcome="cancelled"))
            return s.RequestPermissionResponse(outcome=s.AllowedOutcome(outcome="selected", option_id=option))
        self._record_block(tool_call.tool_call_id, title, kind, raw, decision, origin="permission")
        option = _pick(options, ("reject_once", "reject_always"))
        if option is None:  # an agent that offers no reject option leaves no other answer
            return s.RequestPermissionResponse(outcome=s.DeniedOutcome(outcome="cancelled"))
        return s.RequestPermissionResponse(outcome=s.AllowedOutcome(outcome="selected", option_id=option))

    async def _ask_operator(self, tool_id: str, title: str, kind: str, raw: Any, decision: Decision) -> str:
        self._ask_seq += 1
        request_id = f"ask-{self._ask_seq}"
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        preview = _preview(raw)
        self.pending_asks[request_id] = PendingAsk(request_id, title, kind, preview, decision, future)
        self._emit(
            ev.PermissionAsked(
                stage=self.stage,
                request_id=request_id,
                tool_id=tool_id[:200],
                title=redact(title)[:300],
                kind=kind,
                input=preview,
                rule=(decision.rule_id or decision.cause)[:200],
            )
        )
        try:
            answer = await future
        finally:
            self.pending_asks.pop(request_id, None)
        self._emit(
            ev.PermissionDecided(
                request_id=request_id, decision=answer, by="cancel" if answer == "cancelled" else "operator"
            )  # type: ignore[arg-type]
        )
        return answer

    def _record_block(self, tool_id: str, title: str, kind: str, raw: Any, decision: Decision, *, origin: str) -> None:
        """A policy deny: journal it, remember it for the recovery turn, steer if we can."""
        preview = _preview(raw)
        klass = classify(decision.rule_id, decision.klass, decision.cause, f"{title}\n{preview}")
        reason = decision.reason
        self._emit(
            ev.BlockedCall(
                stage=self.stage,
                tool_id=tool_id[:200],
                title=redact(title)[:300],
                kind=kind[:40],
                input=preview,
                reason=redact(reason)[:500],
                cause=redact(decision.cause)[:500],
                klass=klass,
                pattern=redact(decision.pattern or "")[:300],
                rule_id=decision.rule_id,
                origin=origin,  # type: ignore[arg-type]
            )
        )
        self._refusals.append(Refusal(redact(title)[:300], redact(reason)[:500], klass))
        if self.identity.steering and self._in_turn:
            task = asyncio.create_task(self._steer(title, reason, klass), name="plandeck.steer")
            self._steer_tasks.add(task)

    async def _steer(self, title: str, reason: str, klass: str | None) -> None:
        note = (
            f"plandeck: the tool call {redact(title)!r} was blocked by plandeck's safety policy "
            f"({redact(reason)}). This was not a user action."
        )
        guidance = guidance_for(klass)
        if guidance:
            note += f" {guidance}"
        confirmed = False
        try:
            result = await asyncio.wait_for(
                self._conn.ext_method(
                    "session/steering",
                    {
                        "sessionId": self.session_id,
                        "prompt": [{"type": "text", "text": note}],
                        "_meta": {"steering": {"idleBehavior": "promptRequired"}},
                    },
                ),
                self.spec.timeouts.steering,
            )
            confirmed = isinstance(result, dict) and result.get("outcome") == "injected"
        except Exception:
            confirmed = False
        if confirmed:
            self._steer_confirmed += 1
        self._emit(ev.SteeringSent(stage=self.stage, confirmed=confirmed))

    # -- client-side actions (enforced here) ------------------------------------------------
    def _client_decision(self, request: ToolRequest, paths: list[str]) -> Decision:
        for path in paths:
            if "\x00" in path or not os.path.isabs(path) or not within(path, self.workspace):
                return Decision(
                    "deny",
                    "workspace-confinement",
                    None,
                    "outside the workspace",
                    "plandeck serves files and terminals only inside the run's workspace",
                )
        return self.policy.decide(request, workspace=self.workspace)

    async def _enforce(self, request: ToolRequest, paths: list[str], title: str, raw: Any) -> None:
        decision = self._client_decision(request, paths)
        self._client_action_seq += 1
        action_id = f"client-{self._client_action_seq}"
        if decision.action == "ask":
            answer = await self._ask_operator(action_id, title, request.kind, raw, decision)
            if answer == "allow":
                return
            raise acp.RequestError(-32010, "denied by the operator" if answer == "deny" else "cancelled")
        if decision.action == "deny":
            self._record_block(action_id, title, request.kind, raw, decision, origin=request.origin)
            raise acp.RequestError(-32010, decision.reason)

    async def read_text_file(self, path: str, line: int | None, limit: int | None) -> str:
        request = ToolRequest(origin="fs_read", kind="read", title=f"Read {path}", paths=(path,))
        await self._enforce(request, [path], f"Read {path}", {"path": path})
        data = await asyncio.to_thread(_read_text, path)
        if line is not None or limit is not None:
            lines = data.splitlines(keepends=True)
            start = max(0, (line or 1) - 1)
            end = start + limit if limit is not None else None
            data = "".join(lines[start:end])
        return data

    async def write_text_file(self, path: str, content: str) -> None:
        request = ToolRequest(
            origin="fs_write", kind="edit", title=f"Write {path}", paths=(path,), written_paths=(path,)
        )
        await self._enforce(request, [path], f"Write {path}", {"path": path})
        from core.results import atomic_write

        await asyncio.to_thread(_write_text, path, content, atomic_write)
        self._client_action_seq += 1
        self._emit(
            ev.ToolCall(
                stage=self.stage,
                id=f"client-{self._client_action_seq}",
                title=f"Write {path}"[:300],
                kind="edit",
                status="completed",
                input=f"{len(content)} characters",
            )
        )

    async def create_terminal(
        self,
        command: str,
        args: list[str] | None,
        env: list[Any] | None,
        cwd: str | None,
        output_byte_limit: int | None,
    ) -> str:
        argv = [command, *(args or [])]
        text = command if not args and " " in command else shlex.join(argv)
        cwd = cwd or self.workspace
        request = ToolRequest(origin="terminal", kind="execute", title=text[:300], command=text)
        await self._enforce(request, [cwd], text, {"command": text})
        child_env = self.spec.environment()
        for item in env or []:
            child_env[str(item.name)] = str(item.value)
        run = ["/bin/sh", "-c", command] if not args and " " in command else argv
        proc = await asyncio.create_subprocess_exec(
            *run,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=cwd,
            env=child_env,
            start_new_session=True,
        )
        self._terminal_seq += 1
        terminal_id = f"term-{self._terminal_seq}"
        term = _Terminal(proc, max(1024, min(output_byte_limit or TERMINAL_OUTPUT_DEFAULT, 16 * 1024 * 1024)))
        term.reader = asyncio.create_task(_pump(proc, term), name="plandeck.terminal")
        self._terminals[terminal_id] = term
        self._emit(
            ev.ToolCall(
                stage=self.stage, id=terminal_id, title=redact(text)[:300], kind="execute", status="in_progress"
            )
        )
        return terminal_id

    def _terminal(self, terminal_id: str) -> _Terminal:
        term = self._terminals.get(terminal_id)
        if term is None:
            raise acp.RequestError.invalid_params({"details": f"unknown terminal {terminal_id[:40]}"})
        return term

    def terminal_output(self, terminal_id: str) -> tuple[str, bool, int | None, str | None]:
        term = self._terminal(terminal_id)
        code = term.proc.returncode
        sig = None
        if code is not None and code < 0:
            sig, code = signal.Signals(-code).name, None
        return term.output.decode("utf-8", "replace"), term.truncated, code, sig

    async def wait_for_terminal_exit(self, terminal_id: str) -> tuple[int | None, str | None]:
        term = self._terminal(terminal_id)
        code = await term.proc.wait()
        if term.reader is not None:
            with contextlib.suppress(Exception):
                await term.reader
        self._emit(ev.ToolUpdate(stage=self.stage, id=terminal_id, status="completed" if code == 0 else "failed"))
        if code < 0:
            return None, signal.Signals(-code).name
        return code, None

    async def kill_terminal(self, terminal_id: str) -> None:
        await _kill_group(self._terminal(terminal_id).proc)

    async def release_terminal(self, terminal_id: str) -> None:
        term = self._terminals.pop(terminal_id, None)
        if term is not None:
            await _kill_group(term.proc)

    # -- stderr -------------------------------------------------------------------------------
    def _open_stderr_log(self) -> None:
        if self._log_dir is None:
            return
        with contextlib.suppress(OSError):
            self._stderr_fd = os.open(
                self._log_dir / STDERR_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600
            )

    async def _drain_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        stream = self._proc.stderr
        while True:
            chunk = await stream.read(65536)
            if not chunk:
                break
            self._stderr_tail.append(chunk)
            self._stderr_tail_bytes += len(chunk)
            while self._stderr_tail_bytes > STDERR_TAIL and len(self._stderr_tail) > 1:
                self._stderr_tail_bytes -= len(self._stderr_tail.popleft())
            if self._stderr_fd is not None and self._stderr_logged < STDERR_LOG_CAP:
                text = redact(chunk.decode("utf-8", "replace")).encode()
                room = STDERR_LOG_CAP - self._stderr_logged
                piece = text[:room]
                if len(text) > room:
                    piece += b"\n[plandeck: agent stderr log capped here; later output was drained and dropped]\n"
                with contextlib.suppress(OSError):
                    os.write(self._stderr_fd, piece)
                self._stderr_logged += len(piece)

    def stderr_hint(self) -> str:
        """The agent's last meaningful stderr line, redacted and short."""
        text = b"".join(self._stderr_tail).decode("utf-8", "replace")
        for line in reversed(text.splitlines()):
            line = line.strip()
            if line:
                return "stderr: " + redact(line)[:160]
        return ""

    # -- teardown -------------------------------------------------------------------------------
    async def close(self) -> None:
        """Close the session and make sure nothing it started is still running."""
        if self._closed:
            return
        self._closed = True
        for ask in list(self.pending_asks.values()):
            if not ask.future.done():
                ask.future.set_result("cancelled")
        for task in list(self._steer_tasks):
            task.cancel()
        for terminal_id in list(self._terminals):
            with contextlib.suppress(Exception):
                await self.release_terminal(terminal_id)
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._conn.close(), 2.0)
        if self._proc is not None:
            if self._transport is not None:
                await self._transport.close()
            # Note the agent's descendants while it is alive: once it exits they are
            # re-parented and can no longer be told apart from anyone else's.
            family = _descendants(self._proc.pid)
            exited = await self._wait_exit(0.5) is not None  # a well-behaved agent exits on stdin EOF
            # Whatever is left in its process group (npx children, CLIs it spawned) goes too,
            # and so do descendants that moved to a session of their own.
            await _kill_group(self._proc, grace=0.5 if exited else 1.5)
            await _kill_stragglers(family)
        if self._stderr_task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._stderr_task, 2.0)
            if not self._stderr_task.done():
                self._stderr_task.cancel()
        if self._stderr_fd is not None:
            os.close(self._stderr_fd)
            self._stderr_fd = None

    async def kill(self) -> None:
        if self._proc is not None:
            await _kill_group(self._proc)


async def _kill_group(proc: asyncio.subprocess.Process, grace: float = 2.0) -> None:
    """SIGTERM the agent's process group, then SIGKILL whatever is left of it."""
    loop = asyncio.get_running_loop()
    pgid = proc.pid  # started with start_new_session: it leads its own group
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _group_alive(pgid):
            break
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            break
        deadline = loop.time() + grace
        while _group_alive(pgid) and loop.time() < deadline:
            await asyncio.sleep(0.05)
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(proc.wait(), grace)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _proc_stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of a live process, from /proc; None when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()
    if fields[0] == b"Z":
        return None
    return int(fields[1]), int(fields[19])


def _descendants(root: int) -> list[tuple[int, int]]:
    """Every live descendant of root as (pid, start time); empty where /proc is absent."""
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
    children: dict[int, list[tuple[int, int]]] = {}
    for pid in pids:
        info = _proc_stat(pid)
        if info is not None:
            children.setdefault(info[0], []).append((pid, info[1]))
    out: list[tuple[int, int]] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child[0])
    return out


async def _kill_stragglers(family: list[tuple[int, int]]) -> None:
    """SIGKILL remembered descendants that are still the same processes (pid reuse safe)."""
    for pid, started in family:
        info = _proc_stat(pid)
        if info is not None and info[1] == started:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


async def _pump(proc: asyncio.subprocess.Process, term: _Terminal) -> None:
    assert proc.stdout is not None
    while True:
        chunk = await proc.stdout.read(65536)
        if not chunk:
            return
        term.feed(chunk)


def _read_text(path: str) -> str:
    with open(path, "rb") as fh:
        data = fh.read(MAX_READ_BYTES + 1)
    if len(data) > MAX_READ_BYTES:
        raise acp.RequestError.invalid_params({"details": "file larger than 10 MiB"})
    return data.decode("utf-8", "replace")


def _write_text(path: str, content: str, atomic_write: Callable[[str, bytes, int], None]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_write(path, content.encode("utf-8"), 0o644)


def _pick(options: list[Any], kinds: tuple[str, ...]) -> str | None:
    for kind in kinds:
        for option in options:
            if str(option.kind) == kind:
                return option.option_id
    return None


def _preview(raw: Any) -> str:
    if raw is None:
        return ""
    try:
        text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False, default=str, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(raw)
    text = redact(text)
    return text if len(text) <= INPUT_PREVIEW else text[: INPUT_PREVIEW - 1] + "…"


class _Client:
    """The acp.Client implementation: thin adapters onto AgentSession."""

    def __init__(self, session: AgentSession) -> None:
        self._s = session

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self._s.on_update(update)

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **_: Any) -> Any:
        return await self._s.on_permission(tool_call, options)

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **_: Any
    ) -> Any:
        return s.ReadTextFileResponse(content=await self._s.read_text_file(path, line, limit))

    async def write_text_file(self, session_id: str, path: str, content: str, **_: Any) -> Any:
        await self._s.write_text_file(path, content)
        return s.WriteTextFileResponse()

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[Any] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **_: Any,
    ) -> Any:
        return s.CreateTerminalResponse(
            terminal_id=await self._s.create_terminal(command, args, env, cwd, output_byte_limit)
        )

    async def terminal_output(self, session_id: str, terminal_id: str, **_: Any) -> Any:
        output, truncated, code, sig = self._s.terminal_output(terminal_id)
        status = None
        if code is not None or sig is not None:
            status = s.TerminalExitStatus(exit_code=code, signal=sig)
        return s.TerminalOutputResponse(output=output, truncated=truncated, exit_status=status)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **_: Any) -> Any:
        code, sig = await self._s.wait_for_terminal_exit(terminal_id)
        return s.WaitForTerminalExitResponse(exit_code=code, signal=sig)

    async def kill_terminal(self, session_id: str, terminal_id: str, **_: Any) -> Any:
        await self._s.kill_terminal(terminal_id)
        return s.KillTerminalResponse()

    async def release_terminal(self, session_id: str, terminal_id: str, **_: Any) -> Any:
        await self._s.release_terminal(terminal_id)
        return s.ReleaseTerminalResponse()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise acp.RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        return None
