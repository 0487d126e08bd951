"""Secret redaction: applied before anything reaches disk, an audit record or a prompt.

Each pattern replaces the secret part only, with `[REDACTED:<kind>]`, so the
surrounding text still reads. Patterns are deliberately specific (known token
shapes, key=value assignments with secret-ish names) rather than entropy
guesses, so ordinary prose and code survive.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_Rule = tuple[str, re.Pattern[str], Callable[[re.Match[str]], str] | None]


def _mark(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def _keep_prefix(kind: str) -> Callable[[re.Match[str]], str]:
    return lambda m: m.group("keep") + _mark(kind)


_RULES: list[_Rule] = [
    (
        "private_key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?"
            r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.S,
        ),
        None,
    ),
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b"), None),
    (
        "aws_secret",
        re.compile(
            r"(?P<keep>(?i:aws_?secret_?access_?key|aws_?session_?token)[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9/+=]{16,}"
        ),
        _keep_prefix("aws_secret"),
    ),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"), None),
    ("gitlab_token", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}\b"), None),
    ("slack_token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b"), None),
    ("slack_app_token", re.compile(r"\bxapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+\b"), None),
    (
        "slack_webhook",
        re.compile(r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_\-]+"),
        None,
    ),
    ("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}"), None),
    ("openai_key", re.compile(r"\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_\-]{20,}"), None),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b"), None),
    ("stripe_key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}\b"), None),
    ("npm_token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), None),
    ("pypi_token", re.compile(r"\bpypi-AgE[A-Za-z0-9_\-]{30,}"), None),
    ("sendgrid_key", re.compile(r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}\b"), None),
    ("twilio_key", re.compile(r"\bSK[0-9a-fA-F]{32}\b"), None),
    (
        "jwt",
        re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
        None,
    ),
    (
        "bearer",
        re.compile(r"(?P<keep>(?i:\bauthorization\s*:\s*)?(?i:bearer|token)\s+)[A-Za-z0-9._~+/\-]{16,}=*"),
        _keep_prefix("bearer"),
    ),
    (
        "basic_auth",
        re.compile(r"(?P<keep>(?i:\bauthorization\s*:\s*basic\s+))[A-Za-z0-9+/]{8,}=*"),
        _keep_prefix("basic_auth"),
    ),
    (
        "url_password",
        re.compile(r"(?P<keep>\b[a-zA-Z][a-zA-Z0-9+.\-]{1,20}://[^\s:/@]{1,128}:)[^\s@/]{1,256}(?=@)"),
        _keep_prefix("url_password"),
    ),
    (
        "azure_key",
        re.compile(r"(?P<keep>(?i:AccountKey|SharedAccessKey|sig)=)[A-Za-z0-9%+/=]{16,}"),
        _keep_prefix("azure_key"),
    ),
    (
        "url_secret_param",
        re.compile(
            r"(?P<keep>[?&](?i:token|access_token|api_key|apikey|key|secret|password|passwd|auth|sig|signature)=)[^&\s\"'#]{6,}"
        ),
        _keep_prefix("url_secret_param"),
    ),
    (
        "exfil_url",
        re.compile(
            r"https?://(?:[a-z0-9\-]+\.)*(?:webhook\.site|requestbin\.(?:net|com)|pipedream\.net|"
            r"ngrok(?:-free)?\.(?:io|app|dev)|interact\.sh|oast\.(?:fun|live|me|pro|site)|burpcollaborator\.net|"
            r"beeceptor\.com|hookbin\.com)(?:/[^\s\"'<>]*)?",
            re.I,
        ),
        None,
    ),
    (
        "assignment",
        re.compile(
            r"(?P<keep>\b(?i:[A-Z0-9_]*(?:password|passwd|secret|api_?key|access_?key|private_?key|auth_?token|"
            r"access_?token|refresh_?token|client_?secret|token))[\"']?\s*[:=]\s*[\"']?)"
            r"(?![\"'\s]|\[REDACTED)[^\s\"',;]{6,}"
        ),
        _keep_prefix("secret"),
    ),
]

KINDS: tuple[str, ...] = tuple(name for name, _, _ in _RULES)


def redact(text: str) -> str:
    """Return text with every recognised secret replaced by a marker."""
    if not text:
        return text
    for kind, pattern, repl in _RULES:
        text = pattern.sub(repl or (lambda _m, k=kind: _mark(k)), text)
    return text


def contains_secret(text: str) -> bool:
    return redact(text) != text
