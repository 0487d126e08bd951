"""Settings: budgets, agents, policy file, data directory (XDG via platformdirs).

The config file is TOML at `$PLANDECK_CONFIG` or `<XDG config>/plandeck/config.toml`.
A missing file means defaults; a malformed one is an InputError naming the
file, line and key — it is never half-applied.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from core import tomlfile
from core.tracker import (
    DEFAULT_PLAN_DURATION_SECONDS,
    DEFAULT_STAGE_TIMEOUT_SECONDS,
    MAX_STAGE_ESCALATIONS,
    MAX_STAGE_ROUNDS,
    Budgets,
)

APP = "plandeck"
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
Seconds = Annotated[float, Field(ge=0, le=7 * 24 * 3600, allow_inf_nan=False)]
PositiveSeconds = Annotated[float, Field(gt=0, le=24 * 3600, allow_inf_nan=False)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class BudgetSettings(_Strict):
    stage_timeout_seconds: Seconds = DEFAULT_STAGE_TIMEOUT_SECONDS
    max_plan_duration_seconds: Seconds = DEFAULT_PLAN_DURATION_SECONDS
    max_stage_rounds: Annotated[int, Field(ge=1, le=100)] = MAX_STAGE_ROUNDS
    # at least 1: force-fail means "at the cap again after the last re-arm"
    max_stage_escalations: Annotated[int, Field(ge=1, le=100)] = MAX_STAGE_ESCALATIONS

    def budgets(self) -> Budgets:
        return Budgets(self.stage_timeout_seconds, self.max_plan_duration_seconds)


class AgentTimeouts(_Strict):
    initialize: PositiveSeconds = 30.0
    session_new: PositiveSeconds = 60.0
    set_mode: PositiveSeconds = 15.0
    steering: PositiveSeconds = 10.0
    cancel_grace: PositiveSeconds = 5.0


class AgentSettings(_Strict):
    command: Annotated[str, StringConstraints(min_length=1, max_length=4096)]
    args: list[Annotated[str, StringConstraints(max_length=4096)]] = []
    cwd: str | None = None
    env_passthrough: list[EnvName] = []
    env: dict[EnvName, Annotated[str, StringConstraints(max_length=4096)]] = {}
    mode: str | None = None
    allow_unsupervised: bool = False
    description: str = ""
    install: str = ""
    timeouts: AgentTimeouts = AgentTimeouts()


class UiSettings(_Strict):
    theme: str = "plandeck-dark"
    bell: bool = True
    notifications: bool = True


class Settings(_Strict):
    budgets: BudgetSettings = BudgetSettings()
    ui: UiSettings = UiSettings()
    policy: str | None = None
    runs_dir: str | None = None
    default_agent: str = "scripted"
    agents: dict[Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")], AgentSettings] = {}


def config_path() -> Path:
    explicit = os.environ.get("PLANDECK_CONFIG")
    if explicit:
        return Path(explicit)
    return Path(platformdirs.user_config_dir(APP)) / "config.toml"


def data_dir() -> Path:
    explicit = os.environ.get("PLANDECK_DATA_DIR")
    return Path(explicit) if explicit else Path(platformdirs.user_data_dir(APP))


def load_settings(path: Path | None = None) -> Settings:
    path = path or config_path()
    if not path.exists():
        return Settings()
    return tomlfile.load_model(path, Settings, "config file")


def runs_dir(settings: Settings | None = None, override: str | Path | None = None) -> Path:
    if override:
        return Path(override).expanduser().resolve()
    if settings and settings.runs_dir:
        return Path(settings.runs_dir).expanduser().resolve()
    return (data_dir() / "runs").resolve()


def budget_loader(path: Path | None = None):
    """The tracker's budget loader: read budgets from the config file."""

    def load() -> Budgets:
        return load_settings(path).budgets.budgets()

    return load
