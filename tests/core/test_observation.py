"""SPEC §8: the observation schema, the observer, and private custody."""

from __future__ import annotations

import copy
import json
import math
import os
import pwd
import stat

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core import observation as obs
from core.observation import (
    CustodyError,
    RefusalObserver,
    parse_record,
    validate_observation,
    write_private_observation,
)
from tests.conftest import run_cli

VALID = {
    "schema": "projectbuddy/assisted-review-refusal@1",
    "complete": False,
    "outcome": "refused",
    "phase": "inference",
    "failure_kind": "deadline_exceeded",
    "exit_code": 3,
    "limits": {"stage_timeout_seconds": 1800.0, "plan_budget_seconds": 7200, "max_rounds": 3},
    "counters": {"requests_started": 4, "requests_completed": 3, "retries": 0, "rounds": 2},
    "elapsed_seconds": 12.5,
    "in_flight": True,
    "request_hash": "a" * 64,
    "server_completion": "unknown",
    "observed_at": "2026-11-30T03:00:00Z",
}


def test_the_reference_record_is_valid():
    assert validate_observation(VALID) == []


def with_(path: str, value):
    rec = copy.deepcopy(VALID)
    node = rec
    *parents, last = path.split(".")
    for p in parents:
        node = node[p]
    node[last] = value
    return rec


def without(path: str):
    rec = copy.deepcopy(VALID)
    node = rec
    *parents, last = path.split(".")
    for p in parents:
        node = node[p]
    del node[last]
    return rec


@pytest.mark.parametrize(
    ("record", "field", "rule"),
    [
        (with_("schema", "projectbuddy/assisted-review-refusal@2"), "schema", "must be"),
        (with_("complete", True), "complete", "must be the boolean false"),
        (with_("complete", 0), "complete", "must be the boolean false"),
        (with_("outcome", "succeeded"), "outcome", "must be one of refused, cancelled"),
        (with_("phase", "warmup"), "phase", "must be one of"),
        (with_("failure_kind", "TimeoutError: upstream said no"), "failure_kind", "must be one of"),
        (with_("exit_code", 0), "exit_code", "between 1 and 255"),
        (with_("exit_code", 256), "exit_code", "between 1 and 255"),
        (with_("exit_code", "3"), "exit_code", "must be an integer, not str"),
        (with_("exit_code", True), "exit_code", "not a boolean"),
        (with_("exit_code", 3.0), "exit_code", "must be an integer, not float"),
        (with_("limits.deadline_seconds", math.nan), "limits.deadline_seconds", "finite"),
        (with_("limits.deadline_seconds", math.inf), "limits.deadline_seconds", "finite"),
        (with_("limits.deadline_seconds", -1), "limits.deadline_seconds", "≥ 0"),
        (with_("limits.deadline_seconds", True), "limits.deadline_seconds", "not a boolean"),
        (with_("limits.max_rounds", 3.5), "limits.max_rounds", "must be an integer"),
        (with_("limits.prompt", "hi"), "limits.prompt", "unknown limit"),
        (with_("counters.rounds", -1), "counters.rounds", "between 0 and 1000000"),
        (with_("counters.rounds", 1_000_001), "counters.rounds", "between 0 and 1000000"),
        (with_("counters.rounds", "3"), "counters.rounds", "not str"),
        (with_("counters.rounds", True), "counters.rounds", "not a boolean"),
        (with_("counters.tokens", 5), "counters.tokens", "unknown counter"),
        (without("counters.retries"), "counters.retries", "missing"),
        (with_("elapsed_seconds", math.nan), "elapsed_seconds", "finite"),
        (with_("elapsed_seconds", "12"), "elapsed_seconds", "must be a number or null"),
        (with_("in_flight", "maybe"), "in_flight", 'true, false or "unknown"'),
        (with_("in_flight", 1), "in_flight", 'true, false or "unknown"'),
        (with_("request_hash", "A" * 64), "request_hash", "64 lowercase hex"),
        (with_("request_hash", "a" * 63), "request_hash", "64 lowercase hex"),
        (with_("server_completion", "completed"), "server_completion", "must be one of unknown, not_started"),
        (with_("observed_at", "2026-11-30T03:00:00+01:00"), "observed_at", "ending in Z"),
        (with_("observed_at", "2026-13-40T03:00:00Z"), "observed_at", "ending in Z"),
        (with_("prompt", "the raw prompt"), "prompt", "unknown field"),
        (without("phase"), "phase", "missing"),
    ],
)
def test_each_field_rule(record, field, rule):
    problems = validate_observation(record)
    assert any(p.field == field and rule in p.rule for p in problems), problems


def test_non_objects_are_invalid():
    assert validate_observation([VALID]) and validate_observation("x") and validate_observation(None)


def _number(v) -> bool:
    return type(v) in (int, float) and math.isfinite(v)


# An independent reading of SPEC §8.1, field by field: is this value legal?
LEGAL = {
    "schema": lambda v: v == "projectbuddy/assisted-review-refusal@1",
    "complete": lambda v: v is False,
    "outcome": lambda v: v in ("refused", "cancelled") and type(v) is str,
    "phase": lambda v: type(v) is str and v in obs.PHASES,
    "failure_kind": lambda v: type(v) is str and v in obs.FAILURE_KINDS,
    "exit_code": lambda v: type(v) is int and 1 <= v <= 255,
    "elapsed_seconds": lambda v: v is None or (_number(v) and 0 <= v <= 1e9),
    "in_flight": lambda v: v is True or v is False or (type(v) is str and v == "unknown"),
    "request_hash": lambda v: v is None or (type(v) is str and len(v) == 64 and set(v) <= set("0123456789abcdef")),
    "server_completion": lambda v: type(v) is str and v in ("unknown", "not_started"),
    "observed_at": lambda v: v == "2026-11-30T03:00:00Z",  # the generator only ever draws other values
    "limits": lambda v: (
        type(v) is dict
        and all(
            (k in obs.LIMIT_SECONDS and _number(x) and 0 <= x <= 1e9)
            or (k in obs.LIMIT_COUNTS and type(x) is int and 0 <= x <= 10**6)
            for k, x in v.items()
        )
    ),
    "counters": lambda v: (
        type(v) is dict and set(v) == set(obs.COUNTERS) and all(type(x) is int and 0 <= x <= 10**6 for x in v.values())
    ),
}


def _mutations():
    wrong = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**12), max_value=10**12),
        st.floats(),
        st.text(max_size=20),
        st.lists(st.integers(), max_size=2),
        st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
    )
    fields = st.sampled_from(list(obs.FIELDS))
    bad_nested = st.one_of(
        st.booleans(),
        st.floats(allow_nan=True).filter(lambda f: not (math.isfinite(f) and f >= 0)),
        st.integers(max_value=-1),
        st.integers(min_value=10**6 + 1, max_value=10**12),
        st.text(max_size=4),
    )

    @st.composite
    def mutate(draw):
        rec = copy.deepcopy(VALID)
        kind = draw(st.sampled_from(["drop", "extra", "replace", "nested", "nested_extra"]))
        if kind == "drop":
            del rec[draw(fields)]
        elif kind == "extra":
            rec[draw(st.text(min_size=1, max_size=12).filter(lambda k: k not in obs.FIELDS))] = draw(wrong)
        elif kind == "replace":
            field = draw(fields)
            rec[field] = draw(wrong.filter(lambda v: not LEGAL[field](v)))
        elif kind == "nested":
            key = draw(st.sampled_from([*obs.COUNTERS, "max_rounds", "max_retries", "max_requests"]))
            group = "counters" if key in obs.COUNTERS else "limits"
            rec[group][key] = draw(bad_nested)
        else:
            group = draw(st.sampled_from(["limits", "counters"]))
            rec[group][
                draw(
                    st.text(min_size=1, max_size=8).filter(
                        lambda k: k not in (*obs.COUNTERS, *obs.LIMIT_SECONDS, *obs.LIMIT_COUNTS)
                    )
                )
            ] = 1
        return rec

    return mutate()


@settings(max_examples=500)
@given(_mutations())
def test_no_invalid_record_is_accepted_and_the_validator_never_raises(record):
    problems = validate_observation(record)
    assert problems, record
    for p in problems:
        assert p.field and p.rule


@settings(max_examples=200)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_crash_the_parser(data):
    record, problems = parse_record(data)
    assert (record is None) == bool(problems)


def test_json_nan_and_duplicate_keys_are_rejected():
    assert parse_record(json.dumps(VALID).replace("12.5", "NaN").encode())[0] is None
    dup = json.dumps(VALID)[:-1] + ', "phase": "inference"}'
    record, problems = parse_record(dup.encode())
    assert record is None and "duplicate key" in problems[0].rule


# -- the observer -------------------------------------------------------------------------


def test_snapshot_samples_state_into_a_valid_record():
    t = [100.0]
    o = RefusalObserver(clock=lambda: t[0], wall=lambda: 1796011200.0)
    o.begin(limits={"stage_timeout_seconds": 30, "max_rounds": 3})
    o.mark("identity_preflight")
    o.request_started("initialize")
    o.request_completed()
    o.mark("inference")
    o.request_started("the prompt")
    t[0] += 4.25
    rec = o.snapshot(outcome="refused", failure_kind="deadline_exceeded", exit_code=3)
    assert validate_observation(rec) == []
    assert rec["phase"] == "inference"
    assert rec["counters"] == {"requests_started": 2, "requests_completed": 1, "retries": 0, "rounds": 0}
    assert rec["in_flight"] is True and rec["server_completion"] == "unknown"
    assert rec["elapsed_seconds"] == 4.25
    assert rec["observed_at"] == "2026-11-30T04:00:00Z"
    assert rec["limits"] == {"stage_timeout_seconds": 30.0, "max_rounds": 3}
    assert "the prompt" not in json.dumps(rec)


def test_nothing_started_means_not_started():
    o = RefusalObserver()
    o.begin()
    rec = o.snapshot(outcome="cancelled", failure_kind="cancelled", exit_code=130)
    assert rec["server_completion"] == "not_started" and rec["in_flight"] is False and rec["request_hash"] is None


def test_a_reused_observer_does_not_carry_the_previous_runs_counters():
    o = RefusalObserver()
    o.begin(limits={"max_rounds": 3})
    for _ in range(5):
        o.request_started("x")
        o.round_completed()
    o.mark("finalization")
    o.begin()
    rec = o.snapshot(outcome="refused", failure_kind="internal_error", exit_code=4)
    assert rec["counters"] == {"requests_started": 0, "requests_completed": 0, "retries": 0, "rounds": 0}
    assert rec["phase"] == "input_validation" and rec["limits"] == {} and rec["request_hash"] is None


def test_unknown_phase_is_a_bug_not_a_category():
    with pytest.raises(ValueError):
        RefusalObserver().mark("somewhere new")


# -- private custody -------------------------------------------------------------------------


def test_a_normal_write_is_private(tmp_path):
    target = tmp_path / "obs"
    path = write_private_observation(target, VALID)
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == VALID


def _nothing_written(directory) -> bool:
    return not any(p.suffix == ".json" for p in directory.iterdir()) if directory.exists() else True


def test_a_symlinked_directory_fails_closed(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(CustodyError, match="unsafe or unsupported custody"):
        write_private_observation(link, VALID)
    assert _nothing_written(real)


def test_a_group_or_world_readable_directory_fails_closed(tmp_path):
    loose = tmp_path / "loose"
    loose.mkdir()
    os.chmod(loose, 0o755)
    with pytest.raises(CustodyError):
        write_private_observation(loose, VALID)
    assert _nothing_written(loose)


@pytest.mark.skipif(os.getuid() != 0, reason="changing a directory's owner needs root")
def test_a_directory_owned_by_another_user_fails_closed(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    nobody = pwd.getpwnam("nobody")
    os.chown(theirs, nobody.pw_uid, nobody.pw_gid)
    with pytest.raises(CustodyError):
        write_private_observation(theirs, VALID)
    assert _nothing_written(theirs)


def test_a_file_already_at_the_name_is_an_error_not_an_overwrite(tmp_path):
    d = tmp_path / "obs"
    d.mkdir(mode=0o700)
    (d / "taken.json").write_text("original")
    os.chmod(d / "taken.json", 0o600)
    with pytest.raises(CustodyError):
        write_private_observation(d, VALID, name="taken.json")
    assert (d / "taken.json").read_text() == "original"


def test_a_symlink_planted_at_the_name_is_not_followed(tmp_path):
    d = tmp_path / "obs"
    d.mkdir(mode=0o700)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (d / "planted.json").symlink_to(victim)
    with pytest.raises(CustodyError):
        write_private_observation(d, VALID, name="planted.json")
    assert victim.read_text() == "keep me"


def test_an_invalid_record_is_never_written(tmp_path):
    with pytest.raises(obs.ObservationError):
        write_private_observation(tmp_path / "obs", with_("complete", True))
    assert _nothing_written(tmp_path / "obs")


# -- the CLI ---------------------------------------------------------------------------------


def test_validate_and_list_from_the_command_line(tmp_path):
    d = tmp_path / "obs"
    good = write_private_observation(d, VALID)
    bad = d / "bad.json"
    bad.write_text(json.dumps(with_("exit_code", True) | {"prompt": "secret prompt"}))
    out = run_cli("observations", "validate", str(good))
    assert out.returncode == 0 and out.stdout.strip() == f"{good}: valid"
    out = run_cli("observations", "validate", str(good), str(bad))
    assert out.returncode == 1
    lines = out.stdout.strip().splitlines()
    assert f"{bad}: exit_code: must be an integer, not a boolean" in lines
    assert f"{bad}: prompt: unknown field (not allowed)" in lines
    listing = run_cli("observations", "list", str(d), "--json")
    rows = json.loads(listing.stdout)
    assert {r["file"]: r["valid"] for r in rows} == {good.name: True, "bad.json": False}
    assert "secret prompt" not in listing.stdout  # never renders a field outside the schema
