"""Which agent to run: presets, user config entries and `scripted[:FILE]`.

`--agent NAME` resolves, in order: `scripted` (the bundled demo scenario) and
`scripted:FILE`; an `[agents.NAME]` entry in the user config; a preset.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from core.config import AgentSettings, AgentTimeouts, Settings
from core.errors import InputError

DEMO_SCENARIO = "demo.toml"
# Passed through to every agent: what a program needs to run at all. Anything
# else (API keys above all) is passed only when named.
BASE_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ")
RECORD_ENV = "PLANDECK_SCRIPTED_RECORD"


@dataclass(frozen=True, slots=True)
class AgentSpec:
    name: str
    command: str
    args: tuple[str, ...] = ()
    cwd: str | None = None
    env_passthrough: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    mode: str | None = None
    allow_unsupervised: bool = False
    timeouts: AgentTimeouts = field(default_factory=AgentTimeouts)
    description: str = ""
    install: str = ""
    scripted: bool = False

    def environment(self, source: dict[str, str] | None = None) -> dict[str, str]:
        source = dict(os.environ) if source is None else source
        env = {k: source[k] for k in BASE_ENV if k in source and not source[k].startswith("()")}
        for name in self.env_passthrough:
            if name in source:
                env[name] = source[name]
        env.update(dict(self.env))
        if self.scripted and RECORD_ENV in source:
            env[RECORD_ENV] = source[RECORD_ENV]
        return env

    def resolved_command(self, env: dict[str, str] | None = None) -> str | None:
        """Absolute path of the command, or None when it cannot be found."""
        command = os.path.expanduser(self.command)
        if os.sep in command:
            path = os.path.abspath(command)
            return path if os.access(path, os.X_OK) and os.path.isfile(path) else None
        search = (env or self.environment()).get("PATH", os.defpath)
        return shutil.which(command, path=search)


PRESETS: dict[str, AgentSettings] = {
    "claude": AgentSettings(
        command="npx",
        args=["-y", "@agentclientprotocol/claude-agent-acp"],
        env_passthrough=["ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_BASE_URL", "IS_SANDBOX"],
        mode="default",
        description="Claude Code through the ACP adapter",
        install="npm install -g @agentclientprotocol/claude-agent-acp",
    ),
    "codex": AgentSettings(
        command="npx",
        args=["-y", "@agentclientprotocol/codex-acp"],
        env_passthrough=["OPENAI_API_KEY", "CODEX_API_KEY", "OPENAI_BASE_URL"],
        description="OpenAI Codex through the ACP adapter",
        install="npm install -g @agentclientprotocol/codex-acp",
    ),
    "gemini": AgentSettings(
        command="npx",
        args=["-y", "@google/gemini-cli", "--acp"],
        env_passthrough=["GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_CLOUD_PROJECT", "GOOGLE_GENAI_USE_VERTEXAI"],
        description="Gemini CLI in ACP mode",
        install="npm install -g @google/gemini-cli",
    ),
    "goose": AgentSettings(
        command="goose",
        args=["acp"],
        env_passthrough=["GOOSE_PROVIDER", "GOOSE_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"],
        description="Block's goose in ACP mode",
        install="see https://block.github.io/goose/ (installs the `goose` binary)",
    ),
    "kiro": AgentSettings(
        command="kiro-cli",
        args=["acp"],
        description="Kiro CLI in ACP mode",
        install="see https://kiro.dev (installs the `kiro-cli` binary)",
    ),
}


def bundled_scenario(name: str = DEMO_SCENARIO) -> Path:
    return Path(str(resources.files("core.agents").joinpath("scenarios", name)))


def scripted_spec(scenario: Path | str | None = None, name: str = "scripted") -> AgentSpec:
    path = Path(scenario).expanduser().resolve() if scenario else bundled_scenario()
    if not path.is_file():
        raise InputError(str(path), "scenario file not found")
    return AgentSpec(
        name=name,
        command=sys.executable,
        args=("-m", "core.agents.scripted", str(path)),
        description=f"plandeck's scripted ACP agent ({path.name})",
        scripted=True,
    )


def _from_settings(name: str, s: AgentSettings) -> AgentSpec:
    return AgentSpec(
        name=name,
        command=s.command,
        args=tuple(s.args),
        cwd=s.cwd,
        env_passthrough=tuple(s.env_passthrough),
        env=tuple(sorted(s.env.items())),
        mode=s.mode,
        allow_unsupervised=s.allow_unsupervised,
        timeouts=s.timeouts,
        description=s.description,
        install=s.install,
    )


def resolve(name: str, settings: Settings | None = None) -> AgentSpec:
    """Resolve `--agent NAME`. Raises InputError naming what is wrong."""
    settings = settings or Settings()
    if name == "scripted":
        return scripted_spec()
    if name.startswith("scripted:"):
        return scripted_spec(name.split(":", 1)[1], name="scripted:" + Path(name.split(":", 1)[1]).name)
    if name in settings.agents:
        return _from_settings(name, settings.agents[name])
    if name in PRESETS:
        return _from_settings(name, PRESETS[name])
    known = sorted({"scripted", *settings.agents, *PRESETS})
    raise InputError("--agent", f"unknown agent {name!r}; known: {', '.join(known)} (or scripted:FILE)")


def all_agents(settings: Settings | None = None) -> list[AgentSpec]:
    settings = settings or Settings()
    names = ["scripted", *PRESETS, *(n for n in settings.agents if n not in PRESETS)]
    return [resolve(n, settings) for n in dict.fromkeys(names)]
