"""DESIGN rule: core/ never imports textual (nor tui/themes). Proven in a clean interpreter."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import core


def core_modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages(core.__path__, "core."))


def test_every_core_module_is_importable_without_the_ui():
    modules = core_modules()
    assert "core.controller" in modules and "core.agents.session" in modules
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'tui', 'themes'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"core pulled in: {out.stdout.strip()}"


def test_headless_commands_do_not_import_textual_or_acp():
    code = (
        "import sys\n"
        "from tui import cli, headless\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'acp'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
