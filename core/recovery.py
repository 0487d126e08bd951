"""Refusal recovery (SPEC §5.4–5.9): classes, guidance, the continuation text, cards.

ACP has no field for *why* a permission was refused; the agent only learns
"User refused permission". The continuation built here is the channel for the
reason. Its wording depends on one fact the session tracks — whether the turn
already put text in front of the user — because telling a turn that answered
"the turn ended early … continue where you left off" makes it answer again.
"Answered" means text was sent, never that the task is done, so the answered
wording keeps continuing as the default and conditions stopping on the task
being finished.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from core.policy import BLOCK_MARKER

RECOVERY_PREFIX = "[Tool refusal — automatic recovery]"
RECOVERY_PREFIXES: tuple[str, ...] = (RECOVERY_PREFIX,)
GUIDANCE_HEADING = "How to do this properly:"

CLASSES: tuple[str, ...] = (
    "trust_root",
    "sso_credential",
    "aws_credential",
    "exfil_shape",
    "self_protection",
    "secret_file",
)

GUIDANCE: dict[str, str] = {
    "trust_root": (
        "Leave certificate trust stores, CA bundles and TLS verification settings as they are. "
        "If a connection fails certificate checks, report the host and the exact error to the operator "
        "instead of working around it; the fix belongs in the machine's configuration, not in this task."
    ),
    "sso_credential": (
        "Do not open SSO, cloud-login or cluster token caches. The command-line tools that own those "
        "sessions (aws sso, gcloud, az, kubectl, gh) authenticate by themselves when you run them; if one "
        "reports that a login is needed, stop and tell the operator which login to run."
    ),
    "aws_credential": (
        "Do not read AWS credential or config files. AWS CLI and SDK calls themselves are allowed and pick "
        "up credentials on their own; if a call fails for lack of access, report the error and the profile "
        "or role it expected."
    ),
    "exfil_shape": (
        "Do not send local files or command output to network endpoints (request bodies read from files, "
        "uploads, raw sockets, instance metadata services). Keep data inside the workspace; if something has "
        "to be shared, write it to a file in the workspace and say where it is."
    ),
    "self_protection": (
        "Leave plandeck's own runs, journals, audit logs, policy and configuration alone; they are the "
        "record of this work. Do everything the task needs inside the workspace."
    ),
    "secret_file": (
        "Do not open files that hold keys, tokens or passwords. Refer to a secret by name (for example the "
        "environment variable or configuration key a program reads at run time) and let the program load "
        "it; if a value is missing, tell the operator which one is needed and where it is expected."
    ),
}

# Rule identity first: ids of the shipped policy (and conventional ids users reuse).
RULE_CLASSES: dict[str, str] = {
    "trust-store-change": "trust_root",
    "trust-store-command": "trust_root",
    "tls-verification-off": "trust_root",
    "sso-token-caches": "sso_credential",
    "aws-credentials": "aws_credential",
    "cloud-metadata": "exfil_shape",
    "exfil-curl-body-from-file": "exfil_shape",
    "exfil-curl-upload": "exfil_shape",
    "exfil-wget-post-file": "exfil_shape",
    "exfil-raw-socket": "exfil_shape",
    "plandeck-self": "self_protection",
    "ssh-keys": "secret_file",
    "gnupg": "secret_file",
    "netrc": "secret_file",
    "npmrc": "secret_file",
    "pypirc": "secret_file",
    "git-credentials": "secret_file",
    "dotenv": "secret_file",
    "private-key-files": "secret_file",
}


def _anchor(words: Sequence[str]) -> re.Pattern[str]:
    body = "|".join(words)
    return re.compile(rf"(?<![A-Za-z0-9_])(?:{body})(?![A-Za-z0-9_])", re.I)


# Case-insensitive word-boundary anchors, checked in precedence order; the
# widest class (secret_file) is matched last.
ANCHORS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "trust_root",
        _anchor(
            [
                r"trust[ -]?(?:store|root)s?",
                r"ca[ -]?(?:bundle|certificates?)",
                r"certificate authorit(?:y|ies)",
                r"update-ca-(?:certificates|trust)",
                r"ssl[_ ]?verify",
                r"tls verification",
                r"NODE_TLS_REJECT_UNAUTHORIZED",
            ]
        ),
    ),
    (
        "sso_credential",
        _anchor(
            [r"sso", r"saml2aws", r"okta", r"oidc", r"gcloud", r"\.azure", r"kube ?config", r"\.kube", r"cloud-login"]
        ),
    ),
    ("aws_credential", _anchor([r"aws", r"\.aws", r"aws_(?:secret_)?access_key(?:_id)?", r"aws_session_token"])),
    (
        "exfil_shape",
        _anchor(
            [
                r"exfiltrat\w*",
                r"exfil",
                r"upload(?:-file)?",
                r"post-file",
                r"/dev/(?:tcp|udp)",
                r"metadata endpoints?",
                r"169\.254\.169\.254",
                r"request body",
            ]
        ),
    ),
    ("self_protection", _anchor([r"plandeck", r"policy file", r"audit log", r"journal"])),
    (
        "secret_file",
        _anchor(
            [
                r"secrets?",
                r"credentials?",
                r"private keys?",
                r"keys?",
                r"tokens?",
                r"passwords?",
                r"\.ssh",
                r"\.netrc",
                r"\.npmrc",
                r"\.pypirc",
                r"\.gnupg",
                r"\.env",
                r"id_(?:rsa|ed25519|ecdsa|dsa)",
            ]
        ),
    ),
)


def classify(rule_id: str | None, klass: str | None, reason: str, subject: str = "") -> str | None:
    """The remediation class of a deny: rule identity first, then anchors."""
    if klass in GUIDANCE:
        return klass
    if rule_id and rule_id in RULE_CLASSES:
        return RULE_CLASSES[rule_id]
    text = f"{reason}\n{subject}"
    for name, pattern in ANCHORS:
        if pattern.search(text):
            return name
    return None


def guidance_for(klass: str | None) -> str | None:
    return GUIDANCE.get(klass) if klass else None


@dataclass(frozen=True, slots=True)
class Refusal:
    title: str
    reason: str
    klass: str | None = None


def _one_line(text: str) -> str:
    return " ".join(text.split())


_BLOCK_STATEMENT = "Tool calls in your last turn were blocked by plandeck's safety policy"
_NOT_USER = "This was NOT a user action: the operator did not refuse anything."


def build_refusal_recovery_prompt(refusals: Sequence[Refusal], *, answered: bool) -> str:
    """The continuation queued after a turn with blocked calls (SPEC §5.5)."""
    if answered:
        opening = (
            f"{_BLOCK_STATEMENT}. {_NOT_USER} "
            "This note is for awareness only: you already sent text to the user in that turn."
        )
        closing = (
            "Do NOT repeat what you already sent. If the task is not finished, continue from there "
            "with an allowed alternative. Only if the task is finished, reply with one short line "
            "noting the block and stop."
        )
    else:
        opening = f"{_BLOCK_STATEMENT}, which ended the turn early. {_NOT_USER}"
        closing = (
            "Decide how to proceed: use an allowed alternative or a different tool, or say that it "
            "cannot be done and stop. Otherwise, continue the task where you left off."
        )
    bullets = []
    for r in refusals:
        title = _one_line(r.title) or "tool call"
        reason = _one_line(r.reason)
        bullets.append(f"  - {title}: {reason}" if reason else f"  - {title}")
    lines = [RECOVERY_PREFIX, opening, "", "Blocked:", *bullets, "", closing]
    paragraphs = _dedupe(g for g in (guidance_for(r.klass) for r in refusals) if g)
    if paragraphs:
        lines += ["", GUIDANCE_HEADING]
        for i, paragraph in enumerate(paragraphs):
            if i:
                lines.append("")
            lines.append("    " + _one_line(paragraph))
    return "\n".join(lines)


def _dedupe(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def should_queue(
    blocked: int,
    *,
    operator_stopped: bool,
    reset_pending: bool = False,
    steering_confirmed: int = 0,
    steering_pending: int = 0,
) -> bool:
    """Queue a recovery continuation after a turn with blocked calls? (SPEC §5.4)

    Uses the operator's live stop signal, never the agent's stopReason: some
    agents end a turn "cancelled" after a reject that nobody cancelled.
    Skipping wrongly leaves the agent blaming the user; queueing wrongly costs
    one turn — so the default is to queue.
    """
    if blocked <= 0 or operator_stopped or reset_pending:
        return False
    return not (steering_confirmed >= blocked and steering_pending == 0)


# -- recovery cards (UI) ------------------------------------------------------------

_BULLET = re.compile(r"^\s*-\s+\S")
_PATTERN = re.compile(re.escape(BLOCK_MARKER) + r"\s*(?P<p>.+?)\s*$")


@dataclass(frozen=True, slots=True)
class RecoveryCard:
    title: str
    chip: str | None
    detail: str
    body: str
    blocked_count: int
    patterns: tuple[str, ...]
    severity: str = "attention"


def parse_recovery_card(text: str) -> RecoveryCard | None:
    """A transcript row that starts with a known recovery prefix, as a card."""
    prefix = next((p for p in RECOVERY_PREFIXES if text.startswith(p)), None)
    if prefix is None:
        return None
    body = text[len(prefix) :].lstrip("\n")
    lines = body.splitlines()
    count = sum(1 for line in lines if _BULLET.match(line))
    patterns = _dedupe(m.group("p") for line in lines if (m := _PATTERN.search(line)))
    if len(patterns) == 1:
        chip: str | None = patterns[0]
    elif patterns:
        chip = f"{len(patterns)} patterns"
    else:
        chip = None
    title = "Tool call blocked" if count == 1 else f"{count} tool calls blocked"
    return RecoveryCard(title, chip, "safety policy · continuing automatically", body, count, tuple(patterns))
