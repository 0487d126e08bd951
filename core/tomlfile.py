"""Loading human-written TOML files with errors that name the file and line.

Syntax errors carry tomllib's own line; schema errors (from pydantic) are mapped
back to the line of the offending key, found by walking `[[table]]` headers.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from core.errors import InputError

M = TypeVar("M", bound=BaseModel)
_LINE_RE = re.compile(r"at line (\d+)")
MAX_FILE_BYTES = 4 * 1024 * 1024


def read_text(path: Path, what: str) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise InputError(str(path), f"{what} is too large ({size} bytes; limit {MAX_FILE_BYTES})")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(str(path), f"{what} not found") from None
    except IsADirectoryError:
        raise InputError(str(path), f"{what} is a directory, not a file") from None
    except UnicodeDecodeError as exc:
        raise InputError(str(path), f"{what} is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise InputError(str(path), f"cannot read {what}: {exc.strerror}") from None


def parse_toml(text: str, source: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = _LINE_RE.search(str(exc))
        message = str(exc).split(" (at line")[0]
        raise InputError(source, f"invalid TOML: {message}", int(match.group(1)) if match else None) from None


def locate(text: str, loc: Sequence[str | int]) -> int | None:
    """Best-effort line number of a key path like ('rules', 2, 'match', 'argv')."""
    lines = text.splitlines()
    start = 0
    path = list(loc)
    table: list[str] = []
    while path:
        key = path.pop(0)
        if isinstance(key, int):
            continue
        if path and isinstance(path[0], int):
            index = path.pop(0)
            header = re.compile(r"^\s*\[\[\s*" + re.escape(".".join([*table, key])) + r"\s*\]\]")
            hits = [i for i in range(start, len(lines)) if header.match(lines[i])]
            if index < len(hits):
                start = hits[index]
                table = [*table, key]
                continue
        pattern = re.compile(r"^\s*" + re.escape(key) + r"\s*=")
        sub = re.compile(r"^\s*\[\s*" + re.escape(".".join([*table, key])) + r"\s*\]")
        for i in range(start, len(lines)):
            if pattern.match(lines[i]) or sub.match(lines[i]):
                start = i
                if sub.match(lines[i]):
                    table = [*table, key]
                break
        else:
            return start + 1 if start else None
    return start + 1


def _dotted(loc: Sequence[str | int]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def validate(model: type[M], data: dict[str, Any], text: str, source: str) -> M:
    try:
        return model.model_validate(data, strict=True)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        loc = [p for p in err["loc"] if isinstance(p, str | int)]
        # pydantic adds union-branch names to loc; keep only keys present in the data.
        clean = _existing_path(data, loc)
        message = err["msg"]
        if err["type"] == "extra_forbidden":
            message = "unknown key (not allowed here)"
        elif err["type"] == "missing":
            message = "required key is missing"
        more = len(exc.errors()) - 1
        suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        raise InputError(source, f"{_dotted(clean)}: {message}{suffix}", locate(text, clean)) from None


def _existing_path(data: Any, loc: list[str | int]) -> list[str | int]:
    out: list[str | int] = []
    node = data
    for part in loc:
        if isinstance(node, dict) and isinstance(part, str):
            out.append(part)
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            out.append(part)
            node = node[part]
        elif isinstance(node, dict | list) or node is None:
            if isinstance(part, str) and not isinstance(node, list):
                out.append(part)
            break
    return out


def load_model(path: Path, model: type[M], what: str) -> M:
    text = read_text(path, what)
    data = parse_toml(text, str(path))
    return validate(model, data, text, str(path))
