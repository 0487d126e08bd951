"""`plandeck agents check NAME`: initialize + session/new (+ mode switch), reported."""

from __future__ import annotations

import time
from pathlib import Path

from core.agents.registry import AgentSpec
from core.policy import Policy


async def check_agent(spec: AgentSpec, workspace: Path) -> tuple[bool, list[str]]:
    """Handshake with an agent and describe it; never leaves the agent running."""
    from core.agents.session import AgentError, AgentSession

    events: list[object] = []
    session = AgentSession(spec, workspace=workspace, policy=Policy.default_policy(), emit=events.append)
    lines = [f"agent {spec.name}: {' '.join([spec.command, *spec.args]) if not spec.scripted else spec.description}"]
    started = time.monotonic()
    ok = False
    try:
        ident = await session.start()
        ok = True
        t = ident.timings
        lines += [
            f"  protocol version: {ident.protocol_version}",
            f"  agent:            {ident.name} {ident.version}",
            f"  load session:     {_yes(ident.load_session)}   resume: {_yes(ident.resume_session)}",
            f"  steering:         {'yes (_session/steering)' if ident.steering else 'no'}",
            f"  prompt types:     {', '.join(ident.prompt_types) or 'text'}",
            f"  modes:            {', '.join(ident.modes) or '(none offered)'}",
        ]
        switched = [e for e in events if type(e).__name__ == "ModeChanged"]
        if ident.modes:
            how = f"switched from {ident.initial_mode!r} to {ident.mode!r}" if switched else f"already {ident.mode!r}"
            supervised = (
                "permission requests reach plandeck" if ident.supervised else "UNSUPERVISED (allowed by config)"
            )
            lines.append(f"  mode:             {how} — {supervised}")
        timing = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in t.items())
        lines.append(f"  timings:          {timing}")
    except AgentError as exc:
        lines.append(f"  FAILED ({exc.kind}): {exc}")
    finally:
        await session.close()
    lines.append(f"  total:            {(time.monotonic() - started) * 1000:.0f} ms; agent process closed")
    return ok, lines


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"
