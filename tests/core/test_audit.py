"""SPEC §10: audit records carry numbers, ids and fixed texts only."""

from __future__ import annotations

import json
import os
import re
import stat

import pytest

from core import audit


def test_record_has_the_spec_fields_and_is_appended_privately(tmp_path):
    audit.append(tmp_path, audit.record("stage_approved", "go", "approved", run_id="r-1", stage=2))
    line = (tmp_path / "audit.jsonl").read_text().splitlines()[0]
    rec = json.loads(line)
    assert set(rec) == {"event_id", "timestamp", "event_type", "operation", "outcome", "resources"}
    assert rec["resources"] == "run=r-1,stage=2"
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", rec["timestamp"])
    assert re.match(r"^[0-9a-f]{32}$", rec["event_id"])
    assert stat.S_IMODE(os.stat(tmp_path / "audit.jsonl").st_mode) == 0o600


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        (("stage_approved", "the model said: rm -rf", "approved"), {"run_id": "r"}),
        (("made_up", "go", "approved"), {"run_id": "r"}),
        (("stage_approved", "go", "maybe"), {"run_id": "r"}),
        (("stage_approved", "go", "approved"), {"run_id": "r1; echo sk-ant-secret"}),
    ],
)
def test_free_text_cannot_enter_an_audit_record(args, kwargs):
    with pytest.raises(ValueError):
        audit.record(*args, **kwargs)
