"""plandeck's themes and app variables.

Three themes ship: dark, light and high-contrast. Widgets are styled only with
semantic variables; plandeck's own (`$budget-ok`, `$card-attention`, …) are
supplied by `app_variable_defaults`, derived from whichever theme is active,
so Textual's built-in themes work too. A theme may override any of them.
"""

from __future__ import annotations

from importlib import resources

from textual.theme import Theme

DARK = Theme(
    name="plandeck-dark",
    primary="#5FA8D3",
    secondary="#8E7DBE",
    accent="#E0A458",
    warning="#E0A458",
    error="#E5635B",
    success="#6CC58A",
    foreground="#D8DEE9",
    background="#14171C",
    surface="#1B1F26",
    panel="#232833",
    dark=True,
)

LIGHT = Theme(
    name="plandeck-light",
    primary="#1F6FA8",
    secondary="#6A4FB0",
    accent="#A35F00",
    warning="#A35F00",
    error="#B3261E",
    success="#1E7A3C",
    foreground="#1C2128",
    background="#F7F8FA",
    surface="#EEF1F5",
    panel="#E2E7EE",
    dark=False,
)

CONTRAST = Theme(
    name="plandeck-contrast",
    primary="#00B7FF",
    secondary="#FF00FF",
    accent="#FFFF00",
    warning="#FFFF00",
    error="#FF3B3B",
    success="#00FF66",
    foreground="#FFFFFF",
    background="#000000",
    surface="#000000",
    panel="#1A1A1A",
    dark=True,
    variables={
        "card-attention": "#FFFF00",
        "needs-input": "#FF00FF",
        "border": "#FFFFFF",
        "border-blurred": "#BBBBBB",
    },
)

THEMES: tuple[Theme, ...] = (DARK, LIGHT, CONTRAST)
THEME_NAMES: tuple[str, ...] = tuple(t.name for t in THEMES)


def app_variable_defaults(theme: Theme) -> dict[str, str]:
    """plandeck's semantic variables for any theme, from its own palette."""
    colors = theme.to_color_system().generate()
    return {
        "budget-ok": colors["success"],
        "budget-warn": colors["warning"],
        "budget-over": colors["error"],
        "budget-off": colors["foreground-muted"],
        "card-attention": colors["warning"],
        "needs-input": colors["accent"],
        "notice-completion": colors["success"],
        "notice-warning": colors["warning"],
        "notice-halt": colors["warning"],
        "notice-failure": colors["error"],
        "notice-refusal": colors["error"],
        "notice-cancel": colors["error"],
        "notice-info": colors["foreground-muted"],
        "stage-running": colors["primary"],
        "stage-done": colors["success"],
        "stage-failed": colors["error"],
        "stage-halted": colors["warning"],
        "blocked": colors["error"],
    }


def stylesheet_path() -> str:
    return str(resources.files("themes").joinpath("plandeck.tcss"))
