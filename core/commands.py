"""Argv-aware reading of shell command text, for the policy.

A command string is split into simple commands at shell operators; each simple
command's program is found past environment assignments and wrappers (sudo,
env, nohup …), and `sh -c '…'` / `bash -c` / `eval` bodies are read as commands
in turn. A quoted `rm -rf /` inside an echo is therefore an echo, not a delete.
Nothing here raises on any input: unparseable text falls back to a plain split.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field

_OPERATORS = {";", "&&", "||", "|", "&", "|&", ";;", "(", ")", "{", "}", "\n", "!"}
_REDIRECTS = {">", ">>", "<", "<<", "<<<", ">|", "&>", "&>>", "2>", "2>>", ">&", "<&"}
_WRAPPERS = {"sudo", "doas", "env", "command", "builtin", "nohup", "time", "nice", "ionice", "exec", "stdbuf", "xargs"}
_SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "fish"}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_URL = re.compile(r"\b(?:https?|ftp|wss?)://([^/\s:'\"@]+@)?(?P<host>\[[0-9a-fA-F:]+\]|[^/\s:'\"?#]+)", re.I)
_WRITE_ALL_ARGS = {"rm", "rmdir", "touch", "mkdir", "tee", "truncate", "shred", "chmod", "chown", "unlink"}
_WRITE_LAST_ARG = {"cp", "mv", "install", "ln", "rsync", "scp"}
MAX_DEPTH = 3
MAX_COMMAND_CHARS = 100_000


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    program: str  # basename of the command word, '' when there is none
    argv: tuple[str, ...]  # the command word and its arguments, wrappers removed
    redirect_targets: tuple[str, ...] = ()

    @property
    def flags(self) -> tuple[str, ...]:
        return tuple(a for a in self.argv[1:] if a.startswith("-") and a != "-")

    @property
    def args(self) -> tuple[str, ...]:
        """Non-flag arguments, plus values glued to flags (--x=v, -d@f)."""
        out: list[str] = []
        for a in self.argv[1:]:
            if a.startswith("-") and a != "-":
                if "=" in a:
                    out.append(a.split("=", 1)[1])
                elif "@" in a and a.startswith("-") and not a.startswith("--"):
                    out.append(a[a.index("@") :])
            else:
                out.append(a)
        return tuple(out)

    def write_targets(self) -> tuple[str, ...]:
        targets = list(self.redirect_targets)
        args = [a for a in self.args if a]
        if self.program in _WRITE_ALL_ARGS:
            targets.extend(args)
        elif self.program in _WRITE_LAST_ARG and len(args) >= 2:
            targets.append(args[-1])
        elif self.program == "dd":
            targets.extend(a[3:] for a in self.argv[1:] if a.startswith("of="))
        return tuple(targets)


@dataclass(slots=True)
class ParsedCommand:
    text: str
    commands: list[SimpleCommand] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)

    def all_args(self) -> list[str]:
        out: list[str] = []
        for c in self.commands:
            out.extend(c.args)
            out.extend(c.redirect_targets)
        return out


def _tokens(text: str) -> list[str]:
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        lexer.commenters = ""
        return list(lexer)
    except ValueError:
        return text.replace(";", " ; ").replace("|", " | ").replace("&", " & ").split()


def _strip_wrappers(words: list[str]) -> list[str]:
    i = 0
    while i < len(words):
        w = words[i]
        if _ASSIGNMENT.match(w):
            i += 1
            continue
        base = os.path.basename(w)
        if base in _WRAPPERS:
            i += 1
            # skip the wrapper's own options (and option values for sudo -u X etc.)
            while i < len(words) and words[i].startswith("-"):
                takes_value = words[i] in {"-u", "-g", "-n", "-p", "-C", "-D", "-I", "-L", "-P", "-s", "-o", "-i", "-e"}
                i += 2 if takes_value and base in {"sudo", "doas", "nice", "ionice", "xargs", "stdbuf"} else 1
            continue
        break
    return words[i:]


def parse(text: str, depth: int = 0) -> ParsedCommand:
    text = text[:MAX_COMMAND_CHARS]
    parsed = ParsedCommand(text=text)
    segment: list[str] = []
    redirects: list[str] = []
    tokens = _tokens(text)

    def flush() -> None:
        words = _strip_wrappers(segment)
        if words or redirects:
            program = os.path.basename(words[0]) if words else ""
            cmd = SimpleCommand(program, tuple(words), tuple(redirects))
            parsed.commands.append(cmd)
            parsed.urls.extend(hosts_in(" ".join(cmd.argv[1:] + cmd.redirect_targets)))
            if depth < MAX_DEPTH:
                body = _inline_body(cmd)
                if body is not None:
                    inner = parse(body, depth + 1)
                    parsed.commands.extend(inner.commands)
                    parsed.urls.extend(inner.urls)
        segment.clear()
        redirects.clear()

    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in _REDIRECTS or (tok and set(tok) <= set("<>&|") and ("<" in tok or ">" in tok)):
            if i + 1 < len(tokens) and tokens[i + 1] not in _OPERATORS:
                target = tokens[i + 1]
                if not target.startswith("&"):
                    redirects.append(target)
                i += 2
                continue
            i += 1
            continue
        if tok in _OPERATORS or (tok and set(tok) <= set(";&|()")):
            flush()
        else:
            segment.append(tok)
        i += 1
    flush()
    return parsed


def hosts_in(text: str) -> list[str]:
    """Host names of the URLs in text, lower-cased."""
    return [m.group("host").strip("[]").lower() for m in _URL.finditer(text)]


def _inline_body(cmd: SimpleCommand) -> str | None:
    argv = cmd.argv
    if cmd.program in _SHELLS:
        for j, a in enumerate(argv[1:], start=1):
            if a.startswith("-") and "c" in a.lstrip("-") and not a.startswith("--") and j + 1 < len(argv):
                return argv[j + 1]
        return None
    if cmd.program == "eval" and len(argv) > 1:
        return " ".join(argv[1:])
    return None
