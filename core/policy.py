"""The tool-call policy: allow, deny (with reason, class, pattern) or ask (SPEC §5.1–5.3).

A policy file is TOML:

    default = "allow"            # decision when no rule matches: allow | ask | deny
    [[rules]]
    id = "aws-credentials"       # optional; classification uses it first
    decision = "deny"            # allow | deny | ask
    reason = "reads AWS credential material"
    class = "aws_credential"     # optional remediation class (SPEC §5.7)
    kinds = ["read"]             # optional: ACP tool kinds (read, edit, delete, move, execute, fetch …)
    origins = ["fs_read"]        # optional: permission | fs_read | fs_write | terminal
    title = ["(?i)credentials"]  # optional: regexes searched in the tool title
    command = ["/dev/tcp/"]      # optional: regexes searched in the raw command text
    program = ["rm"]             # optional, argv-aware: the command word of a simple command
    flags = ["-*r*"]             # optional, argv-aware: any flag of that command (globs)
    args = ["/", "~"]            # optional, argv-aware: any argument of that command (globs)
    paths = ["~/.aws/**"]        # optional: globs over referenced paths (inputs, locations, arguments)
    hosts = ["169.254.169.254"]  # optional: globs over URL hosts
    outside_workspace = true     # optional: a written path resolves outside the workspace

Every criterion given must match (AND); within one list any entry may (OR).
Precedence: deny beats ask beats allow; among denies the first in file order
wins. `${HOME}`, `${WORKSPACE}`, `${DATA_DIR}`, `${CONFIG_DIR}` expand in
patterns. A malformed file is refused at start with its file, line and problem.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from core import commands, tomlfile
from core.errors import InputError

DecisionName = Literal["allow", "deny", "ask"]
ORIGINS = ("permission", "fs_read", "fs_write", "terminal")
BLOCK_MARKER = "Blocked by security policy:"
WRITE_KINDS = frozenset({"edit", "delete", "move"})
DEFAULT_POLICY_NAME = "default_policy.toml"
_PATH_KEYS = ("path", "file_path", "filePath", "notebook_path", "target", "source", "destination", "dir", "cwd")
_COMMAND_KEYS = ("command", "cmd", "script")
_URL_KEYS = ("url", "uri", "href")

Pattern = Annotated[str, StringConstraints(min_length=1, max_length=1000)]


class _RuleModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)
    id: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,80}$")] | None = None
    decision: DecisionName
    reason: Annotated[str, StringConstraints(max_length=500)] = ""
    klass: (
        Literal["trust_root", "sso_credential", "aws_credential", "exfil_shape", "self_protection", "secret_file"]
        | None
    ) = Field(default=None, alias="class")
    kinds: list[Pattern] | None = None
    origins: list[Literal["permission", "fs_read", "fs_write", "terminal"]] | None = None
    title: list[Pattern] | None = None
    command: list[Pattern] | None = None
    program: list[Pattern] | None = None
    flags: list[Pattern] | None = None
    args: list[Pattern] | None = None
    paths: list[Pattern] | None = None
    hosts: list[Pattern] | None = None
    outside_workspace: bool | None = None


class _PolicyModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    default: DecisionName = "allow"
    rules: list[_RuleModel] = []


@dataclass(frozen=True, slots=True)
class ToolRequest:
    """What a tool call or client-side action asks to do, as the policy sees it."""

    origin: str
    kind: str
    title: str
    command: str | None = None
    paths: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()
    written_paths: tuple[str, ...] = ()

    @classmethod
    def from_tool_call(
        cls, *, title: str, kind: str | None, raw_input: Any, locations: Iterable[str] = (), origin: str = "permission"
    ) -> ToolRequest:
        """Build a request from an ACP tool call's title, kind, rawInput and locations."""
        paths: list[str] = list(locations)
        command: str | None = None
        urls: list[str] = []
        for key, value in _walk(raw_input):
            if not isinstance(value, str):
                continue
            if key in _PATH_KEYS:
                paths.append(value)
            elif key in _COMMAND_KEYS:
                command = value if command is None else f"{command} ; {value}"
            elif key in _URL_KEYS:
                urls.append(value)
        if isinstance(raw_input, list) and all(isinstance(x, str) for x in raw_input) and raw_input:
            command = " ".join(raw_input)
        kind_name = (kind or "other").lower()
        written = tuple(paths) if kind_name in WRITE_KINDS else ()
        return cls(origin, kind_name, title or "", command, tuple(paths), tuple(urls), written)


def _walk(value: Any, key: str = "", depth: int = 0) -> Iterable[tuple[str, Any]]:
    if depth > 4:
        return
    if isinstance(value, Mapping):
        for k, v in list(value.items())[:200]:
            yield from _walk(v, str(k), depth + 1)
    elif isinstance(value, list):
        for v in value[:200]:
            yield from _walk(v, key, depth + 1)
    else:
        yield key, value


@dataclass(frozen=True, slots=True)
class Decision:
    action: DecisionName
    rule_id: str | None = None
    klass: str | None = None
    pattern: str | None = None
    cause: str = ""

    @property
    def reason(self) -> str:
        return f"{BLOCK_MARKER} {self.pattern or 'policy'}"


ALLOW = Decision("allow", cause="no rule matched")


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """`**` spans directories, `*` and `?` stay within one path segment."""
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("^" + "".join(out) + "$", re.S)


@dataclass(slots=True)
class Rule:
    index: int
    line: int | None
    decision: DecisionName
    id: str | None
    reason: str
    klass: str | None
    kinds: tuple[str, ...] | None
    origins: tuple[str, ...] | None
    title: tuple[tuple[str, re.Pattern[str]], ...] | None
    command: tuple[tuple[str, re.Pattern[str]], ...] | None
    program: tuple[str, ...] | None
    flags: tuple[str, ...] | None
    args: tuple[str, ...] | None
    paths: tuple[tuple[str, str], ...] | None  # (pattern as written, expanded pattern)
    hosts: tuple[str, ...] | None
    outside_workspace: bool | None
    _path_res: list[tuple[str, re.Pattern[str]]] = field(default_factory=list)

    def label(self) -> str:
        return self.id or f"rule #{self.index + 1}"


class Policy:
    """A loaded policy. `decide` never raises on any request."""

    def __init__(self, rules: list[Rule], default: DecisionName, source: str, variables: dict[str, str]) -> None:
        self.rules = rules
        self.default = default
        self.source = source
        self.variables = variables

    # -- loading ---------------------------------------------------------------
    @classmethod
    def from_text(cls, text: str, source: str, *, variables: Mapping[str, str] | None = None) -> Policy:
        data = tomlfile.parse_toml(text, source)
        model = tomlfile.validate(_PolicyModel, data, text, source)
        vars_ = _default_variables() | dict(variables or {})
        rules: list[Rule] = []
        for i, rm in enumerate(model.rules):
            line = tomlfile.locate(text, ["rules", i, "decision"])
            criteria = (
                rm.kinds,
                rm.origins,
                rm.title,
                rm.command,
                rm.program,
                rm.paths,
                rm.hosts,
                rm.outside_workspace,
            )
            if (rm.flags is not None or rm.args is not None) and rm.program is None:
                raise InputError(source, f"rules[{i}]: 'flags' and 'args' need a 'program' to apply to", line)
            if all(c is None for c in criteria):
                raise InputError(source, f"rules[{i}]: a rule needs at least one match criterion", line)
            if rm.decision == "deny" and not (rm.reason or rm.id):
                raise InputError(source, f"rules[{i}]: a deny rule needs a reason or an id", line)
            rules.append(
                Rule(
                    index=i,
                    line=line,
                    decision=rm.decision,
                    id=rm.id,
                    reason=rm.reason,
                    klass=rm.klass,
                    kinds=tuple(k.lower() for k in rm.kinds) if rm.kinds is not None else None,
                    origins=tuple(rm.origins) if rm.origins is not None else None,
                    title=_compile(rm.title, source, text, i, "title"),
                    command=_compile(rm.command, source, text, i, "command"),
                    program=tuple(rm.program) if rm.program is not None else None,
                    flags=tuple(rm.flags) if rm.flags is not None else None,
                    args=tuple(_expand(a, vars_, tilde=False) for a in rm.args) if rm.args is not None else None,
                    paths=tuple((p, _expand(p, vars_)) for p in rm.paths) if rm.paths is not None else None,
                    hosts=tuple(h.lower() for h in rm.hosts) if rm.hosts is not None else None,
                    outside_workspace=rm.outside_workspace,
                )
            )
        return cls(rules, model.default, source, vars_)

    @classmethod
    def load(cls, path: Path, *, variables: Mapping[str, str] | None = None) -> Policy:
        text = tomlfile.read_text(path, "policy file")
        return cls.from_text(text, str(path), variables=variables)

    @classmethod
    def default_policy(cls, *, variables: Mapping[str, str] | None = None) -> Policy:
        return cls.from_text(default_policy_text(), f"<built-in {DEFAULT_POLICY_NAME}>", variables=variables)

    # -- deciding --------------------------------------------------------------
    def decide(self, request: ToolRequest, *, workspace: str | None = None) -> Decision:
        try:
            return self._decide(request, workspace)
        except Exception as exc:  # a policy bug must fail closed, never open
            return Decision(
                "deny", "policy-error", None, "policy evaluation error", f"policy error: {type(exc).__name__}"
            )

    def _decide(self, request: ToolRequest, workspace: str | None) -> Decision:
        ws = workspace or self.variables.get("WORKSPACE") or os.getcwd()
        facts = _Facts.of(request, ws, self.variables.get("HOME", os.path.expanduser("~")))
        first_ask: Decision | None = None
        first_allow: Decision | None = None
        for rule in self.rules:
            pattern = _match(rule, facts)
            if pattern is None:
                continue
            decision = Decision(rule.decision, rule.id, rule.klass, pattern, rule.reason or rule.label())
            if rule.decision == "deny":
                return decision
            if rule.decision == "ask" and first_ask is None:
                first_ask = decision
            elif rule.decision == "allow" and first_allow is None:
                first_allow = decision
        if first_ask is not None:
            return first_ask
        if first_allow is not None:
            return first_allow
        if self.default == "allow":
            return ALLOW
        return Decision(
            self.default, None, None, "default policy", f"no rule matched; the policy default is {self.default}"
        )

    def explain(self, request: ToolRequest, *, workspace: str | None = None) -> list[tuple[Rule, str]]:
        """Every rule that matches the request, with the pattern that matched."""
        ws = workspace or self.variables.get("WORKSPACE") or os.getcwd()
        facts = _Facts.of(request, ws, self.variables.get("HOME", os.path.expanduser("~")))
        out = []
        for rule in self.rules:
            pattern = _match(rule, facts)
            if pattern is not None:
                out.append((rule, pattern))
        return out


def default_policy_text() -> str:
    return resources.files("core").joinpath(DEFAULT_POLICY_NAME).read_text(encoding="utf-8")


def _default_variables() -> dict[str, str]:
    from core import config

    return {
        "HOME": os.path.expanduser("~"),
        "DATA_DIR": str(config.data_dir()),
        "CONFIG_DIR": str(config.config_path().parent),
    }


def _expand(pattern: str, variables: Mapping[str, str], *, tilde: bool = True) -> str:
    for name, value in variables.items():
        pattern = pattern.replace("${" + name + "}", value)
    if tilde and (pattern.startswith("~/") or pattern == "~"):
        pattern = variables.get("HOME", os.path.expanduser("~")) + pattern[1:]
    return pattern


def _compile(
    patterns: list[str] | None, source: str, text: str, index: int, key: str
) -> tuple[tuple[str, re.Pattern[str]], ...] | None:
    if patterns is None:
        return None
    out = []
    for p in patterns:
        try:
            out.append((p, re.compile(p)))
        except re.error as exc:
            raise InputError(
                source,
                f"rules[{index}].{key}: bad regular expression {p!r}: {exc}",
                tomlfile.locate(text, ["rules", index, key]),
            ) from None
    return tuple(out)


@dataclass(slots=True)
class _Facts:
    request: ToolRequest
    workspace: str
    parsed: commands.ParsedCommand | None
    paths: list[tuple[str, str]]  # (as given, normalised absolute)
    written: list[str]
    hosts: list[str]

    @classmethod
    def of(cls, request: ToolRequest, workspace: str, home: str) -> _Facts:
        parsed = commands.parse(request.command) if request.command else None
        raw_paths = list(request.paths)
        written = list(request.written_paths)
        hosts = [h for u in request.urls for h in commands.hosts_in(u)]
        if parsed:
            for arg in parsed.all_args():
                raw_paths.append(arg[1:] if arg.startswith("@") else arg)
            for c in parsed.commands:
                written.extend(c.write_targets())
            hosts.extend(parsed.urls)
        # A NUL byte cannot be in a real path (and the OS calls reject it): not a path.
        paths = [(p, _normalise(p, workspace, home)) for p in raw_paths if p and len(p) < 4096 and "\x00" not in p]
        written_abs = [_normalise(p, workspace, home) for p in written if p and len(p) < 4096 and "\x00" not in p]
        return cls(request, workspace, parsed, paths, [p for p in written_abs if not _harmless_sink(p)], hosts)


def _harmless_sink(path: str) -> bool:
    return path in ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty") or path.startswith("/dev/fd/")


def _normalise(path: str, workspace: str, home: str) -> str:
    if path.startswith("~/") or path == "~":
        path = home + path[1:]
    elif path.startswith("$HOME/") or path == "$HOME":
        path = home + path[5:]
    elif path.startswith("${HOME}/"):
        path = home + path[7:]
    if not os.path.isabs(path):
        path = os.path.join(workspace, path)
    return os.path.normpath(path)


def within(path: str, root: str) -> bool:
    """True when path (resolved, symlinks followed) lies inside root."""
    real = os.path.realpath(path)
    real_root = os.path.realpath(root)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


@lru_cache(maxsize=4096)
def _path_re(pattern: str) -> re.Pattern[str]:
    if not pattern.startswith("/") and not pattern.startswith("**"):
        pattern = "**/" + pattern
    return _glob_regex(pattern)


def _match(rule: Rule, facts: _Facts) -> str | None:
    """The pattern text that made the rule match, or None."""
    req = facts.request
    hits: list[str] = []
    if rule.origins is not None and req.origin not in rule.origins:
        return None
    if rule.kinds is not None and req.kind not in rule.kinds:
        return None
    if rule.title is not None:
        hit = next((p for p, rx in rule.title if rx.search(req.title)), None)
        if hit is None:
            return None
        hits.append(hit)
    if rule.command is not None:
        text = req.command or ""
        hit = next((p for p, rx in rule.command if text and rx.search(text)), None)
        if hit is None:
            return None
        hits.append(hit)
    if rule.program is not None:
        hit = _match_argv(rule, facts.parsed)
        if hit is None:
            return None
        hits.append(hit)
    if rule.paths is not None:
        hit = _match_paths(rule.paths, facts.paths)
        if hit is None:
            return None
        hits.append(hit)
    if rule.hosts is not None:
        hit = next((h for h in rule.hosts for host in facts.hosts if fnmatch.fnmatchcase(host, h)), None)
        if hit is None:
            return None
        hits.append(hit)
    if rule.outside_workspace is not None:
        outside = [p for p in facts.written if not within(p, facts.workspace)]
        if bool(outside) != rule.outside_workspace:
            return None
        hits.append("outside the workspace" if outside else "inside the workspace")
    if not hits:
        hits.append(f"kind {req.kind}" if rule.kinds is not None else f"origin {req.origin}")
    return " ".join(hits)


def _match_paths(patterns: tuple[tuple[str, str], ...], paths: list[tuple[str, str]]) -> str | None:
    for written, expanded in patterns:
        rx = _path_re(expanded)
        for given, absolute in paths:
            if rx.match(absolute) or rx.match(given):
                return written
            real = os.path.realpath(absolute) if os.path.lexists(absolute) else absolute
            if real != absolute and rx.match(real):
                return written
    return None


def _match_argv(rule: Rule, parsed: commands.ParsedCommand | None) -> str | None:
    if parsed is None:
        return None
    for cmd in parsed.commands:
        prog = next((p for p in rule.program or () if fnmatch.fnmatchcase(cmd.program, p)), None)
        if prog is None:
            continue
        parts = [prog]
        if rule.flags is not None:
            flag = next((f for f in rule.flags for a in cmd.flags if fnmatch.fnmatchcase(a, f)), None)
            if flag is None:
                continue
            parts.append(flag)
        if rule.args is not None:
            arg = next((p for p in rule.args for a in cmd.args if fnmatch.fnmatchcase(a, p)), None)
            if arg is None:
                continue
            parts.append(arg)
        return " ".join(parts)
    return None
