"""SPEC §5.4–5.9: the recovery continuation, its two wordings, classes, queueing, cards."""

from __future__ import annotations

import re

import pytest

from core.recovery import (
    GUIDANCE,
    GUIDANCE_HEADING,
    RECOVERY_PREFIX,
    Refusal,
    build_refusal_recovery_prompt,
    classify,
    parse_recovery_card,
    should_queue,
)

AWS = Refusal("Read ~/.aws/credentials", "Blocked by security policy: ~/.aws/**", "aws_credential")
SSH = Refusal("Read ~/.ssh/id_rsa", "Blocked by security policy: ~/.ssh/**", "secret_file")
UNCLASSIFIED = Refusal("Run rm -rf /", "Blocked by security policy: rm -*r* /", None)

EXPECTED_UNANSWERED = (
    "[Tool refusal — automatic recovery]\n"
    "Tool calls in your last turn were blocked by plandeck's safety policy, which ended the turn early. "
    "This was NOT a user action: the operator did not refuse anything.\n"
    "\n"
    "Blocked:\n"
    "  - Read ~/.aws/credentials: Blocked by security policy: ~/.aws/**\n"
    "  - Run rm -rf /: Blocked by security policy: rm -*r* /\n"
    "\n"
    "Decide how to proceed: use an allowed alternative or a different tool, or say that it cannot be done "
    "and stop. Otherwise, continue the task where you left off.\n"
    "\n"
    "How to do this properly:\n"
    "    Do not read AWS credential or config files. AWS CLI and SDK calls themselves are allowed and pick up "
    "credentials on their own; if a call fails for lack of access, report the error and the profile or role "
    "it expected."
)


def test_unanswered_turn_gets_the_default_body_exactly():
    assert build_refusal_recovery_prompt([AWS, UNCLASSIFIED], answered=False) == EXPECTED_UNANSWERED


def test_answered_turn_gets_the_awareness_body():
    body = build_refusal_recovery_prompt([AWS], answered=True)
    assert body.startswith(RECOVERY_PREFIX + "\n")
    assert "Blocked by security policy: ~/.aws/**" in body
    assert "ended the turn early" not in body
    assert "continue the task where you left off" not in body
    assert "Do NOT repeat" in body
    assert "for awareness" in body and "already sent text to the user" in body
    assert "This was NOT a user action" in body


def test_answered_body_never_tells_an_unfinished_task_to_stop():
    body = build_refusal_recovery_prompt([AWS], answered=True)
    closing = next(p for p in body.split("\n\n") if "Do NOT repeat" in p)
    assert "If the task is not finished, continue from there" in closing
    stop = closing.index("stop")
    assert "Only if the task is finished" in closing[:stop]  # stopping is conditioned on being done


def test_both_modes_carry_identical_remediation():
    refusals = [AWS, SSH, UNCLASSIFIED]

    def remediation(body: str) -> str:
        return body[body.index(GUIDANCE_HEADING) :]

    a = build_refusal_recovery_prompt(refusals, answered=True)
    b = build_refusal_recovery_prompt(refusals, answered=False)
    assert a.count(GUIDANCE_HEADING) == b.count(GUIDANCE_HEADING) == 1
    assert remediation(a) == remediation(b)


@pytest.mark.parametrize("answered", [True, False])
def test_bullets_are_the_only_dash_lines_and_guidance_is_indented_prose(answered):
    hostile = Refusal("Read x\n- fake bullet\n  - another", "Blocked by security policy: x\n- injected", "secret_file")
    body = build_refusal_recovery_prompt([AWS, hostile, SSH], answered=answered)
    dash_lines = [line for line in body.splitlines() if line.lstrip().startswith("- ")]
    assert len(dash_lines) == 3
    assert all(line.startswith("  - ") for line in dash_lines)
    guidance = body[body.index(GUIDANCE_HEADING) :].splitlines()[1:]
    prose = [line for line in guidance if line.strip()]
    assert prose and all(line.startswith("    ") and not line.lstrip().startswith("- ") for line in prose)


def test_guidance_is_deduplicated_in_first_seen_order():
    body = build_refusal_recovery_prompt([SSH, AWS, SSH, AWS], answered=False)
    tail = body[body.index(GUIDANCE_HEADING) :]
    assert tail.count(GUIDANCE["secret_file"]) == 1
    assert tail.index(GUIDANCE["secret_file"]) < tail.index(GUIDANCE["aws_credential"])


def test_unclassified_denies_add_no_guidance_and_no_heading():
    body = build_refusal_recovery_prompt([UNCLASSIFIED], answered=False)
    assert GUIDANCE_HEADING not in body
    assert "  - Run rm -rf /: Blocked by security policy: rm -*r* /" in body


def test_no_guidance_asks_for_a_secret_to_be_typed_into_the_chat():
    for text in GUIDANCE.values():
        assert not re.search(r"(paste|type|send|share).{0,40}(secret|key|token|password)", text, re.I), text


@pytest.mark.parametrize(
    ("rule_id", "klass", "reason", "subject", "expected"),
    [
        ("aws-credentials", None, "anything", "", "aws_credential"),  # rule identity first
        (None, "trust_root", "mentions a secret token", "", "trust_root"),  # explicit class
        (None, None, "changing the system trust store", "", "trust_root"),
        (None, None, "SSO token cache of the aws cli", "", "sso_credential"),  # precedence over aws and secret
        (None, None, "reads aws config", "", "aws_credential"),
        (None, None, "sending data with upload-file", "", "exfil_shape"),
        (None, None, "touches the plandeck journal", "", "self_protection"),
        (None, None, "a file full of secrets", "", "secret_file"),  # widest, matched last
        (None, None, "destructive command", "rm -rf /", None),
        (None, None, "whatever", "Read ~/.netrc", "secret_file"),  # subject counts too
        (None, None, "keyboard layout", "", None),  # word boundaries: 'key' inside 'keyboard' does not count
        (None, None, "SSOT document", "", None),  # and 'sso' inside 'SSOT' does not either
    ],
)
def test_classification(rule_id, klass, reason, subject, expected):
    assert classify(rule_id, klass, reason, subject) == expected


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"blocked": 0, "operator_stopped": False}, False),
        ({"blocked": 2, "operator_stopped": False}, True),
        ({"blocked": 2, "operator_stopped": True}, False),
        ({"blocked": 2, "operator_stopped": False, "reset_pending": True}, False),
        ({"blocked": 2, "operator_stopped": False, "steering_confirmed": 2}, False),
        ({"blocked": 2, "operator_stopped": False, "steering_confirmed": 1}, True),
        ({"blocked": 2, "operator_stopped": False, "steering_confirmed": 2, "steering_pending": 1}, True),
    ],
)
def test_should_queue(kwargs, expected):
    assert should_queue(**kwargs) is expected


def test_card_from_a_recovery_row():
    body = build_refusal_recovery_prompt([AWS, SSH, UNCLASSIFIED], answered=True)
    card = parse_recovery_card(body)
    assert card is not None
    assert card.title == "3 tool calls blocked"
    assert card.chip == "3 patterns"
    assert card.patterns == ("~/.aws/**", "~/.ssh/**", "rm -*r* /")
    assert card.detail == "safety policy · continuing automatically"
    assert card.body == body[len(RECOVERY_PREFIX) + 1 :]
    assert card.severity == "attention"


def test_card_with_one_pattern_and_with_none():
    one = parse_recovery_card(build_refusal_recovery_prompt([AWS], answered=False))
    assert one is not None and one.title == "Tool call blocked" and one.chip == "~/.aws/**"
    bare = parse_recovery_card(RECOVERY_PREFIX + "\nBlocked:\n  - something\n")
    assert bare is not None and bare.chip is None and bare.blocked_count == 1


def test_a_hyphen_is_not_a_card():
    assert parse_recovery_card("[Tool refusal - automatic recovery]\nBlocked:\n  - x") is None
    assert parse_recovery_card("Hello") is None
