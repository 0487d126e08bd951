"""SPEC §9.3: journal discipline, and the reader's tolerance of anything on disk."""

from __future__ import annotations

import os
import stat

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import events as ev
from core import journal as journal_mod
from core.journal import JournalReader, JournalWriter
from core.projection import Folder, fold


def _writer(tmp_path, name="journal.jsonl"):
    return JournalWriter(tmp_path / name, wall=lambda: 1700000000.0)


def test_each_event_is_one_write_of_one_complete_line(tmp_path, monkeypatch):
    calls = []
    real_write = os.write

    def spy(fd, data):
        calls.append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(journal_mod.os, "write", spy)
    w = _writer(tmp_path)
    w.append(ev.Notice(kind="info", text="one\nwith a newline inside"))
    w.append(ev.AgentText(stage=1, text="two"))
    w.close()
    assert len(calls) == 2
    for data in calls:
        assert data.endswith(b"\n") and data.count(b"\n") == 1


def test_sequence_numbers_and_private_mode(tmp_path):
    w = _writer(tmp_path)
    stamped = [w.append(ev.AgentText(stage=1, text=str(i))) for i in range(3)]
    w.close()
    assert [e.seq for e in stamped] == [1, 2, 3]
    mode = stat.S_IMODE(os.stat(tmp_path / "journal.jsonl").st_mode)
    assert mode == 0o600
    assert [e.seq for e in JournalReader(tmp_path / "journal.jsonl").read_all().events] == [1, 2, 3]


def test_torn_last_line_is_held_back_reported_then_read_when_complete(tmp_path):
    path = tmp_path / "journal.jsonl"
    w = _writer(tmp_path)
    w.append(ev.AgentText(stage=1, text="first"))
    line = ev.encode(msgspec.structs.replace(ev.AgentText(stage=1, text="second"), seq=2, ts=1.0)) + b"\n"
    with open(path, "ab") as fh:
        fh.write(line[:10])
    reader = JournalReader(path)
    batch = reader.poll()
    assert [e.text for e in batch.events] == ["first"]
    assert batch.torn is not None and batch.torn.line == 2 and batch.torn.size == 10
    assert batch.defects == []
    with open(path, "ab") as fh:
        fh.write(line[10:])
    batch = reader.poll()
    assert [e.text for e in batch.events] == ["second"]
    assert batch.torn is None


def test_malformed_and_unknown_lines_are_reported_with_line_numbers_and_skipped(tmp_path):
    path = tmp_path / "journal.jsonl"
    good = [
        ev.encode(msgspec.structs.replace(ev.AgentText(stage=1, text=f"t{i}"), seq=i, ts=1.0)) for i in (1, 2, 3, 4)
    ]
    lines = [
        good[0],
        b"{not json",
        b'{"type":"mystery","seq":9,"ts":1}',
        good[1],
        b'{"type":"stage_state","n":true,"state":"running","rounds":0,"escalations":0,"seq":10,"ts":1}',
        b'{"type":"stage_state","n":1,"state":"running","rounds":"3","escalations":0,"seq":11,"ts":1}',
        b"[1, 2]",
        b"",
        good[1],  # a replayed line: duplicate sequence number
        good[2],
        good[3],
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    batch = JournalReader(path).read_all()
    assert [e.text for e in batch.events] == ["t1", "t2", "t3", "t4"]
    reasons = {d.line: d.reason for d in batch.defects}
    assert reasons[2].startswith("malformed JSON")
    assert reasons[3] == "unknown event type 'mystery'"
    assert "Expected `int`, got `bool`" in reasons[5]  # true is not a number
    assert "Expected `int`, got `str`" in reasons[6]  # "3" is not 3
    assert reasons[7] == "not a JSON object"
    assert reasons[8] == "blank line"
    assert "duplicate or reordered" in reasons[9]
    assert set(reasons) == {2, 3, 5, 6, 7, 8, 9}


def test_missing_journal_reads_as_empty(tmp_path):
    batch = JournalReader(tmp_path / "absent.jsonl").poll()
    assert batch.events == [] and batch.defects == [] and batch.torn is None


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=4000), st.lists(st.integers(min_value=1, max_value=700), max_size=8))
def test_arbitrary_bytes_never_crash_the_reader_or_the_fold(tmp_path_factory, data, chunks):
    path = tmp_path_factory.mktemp("j") / "journal.jsonl"
    path.write_bytes(b"")
    reader = JournalReader(path)
    folder = Folder(path.parent)
    written = 0
    for size in [*chunks, len(data)]:
        piece = data[written : written + size]
        written += len(piece)
        with open(path, "ab") as fh:
            fh.write(piece)
        batch = reader.poll(max_bytes=256)
        while True:
            folder.apply_all(batch.events)
            folder.add_defects(batch.defects)
            if not batch.more:
                break
            batch = reader.poll(max_bytes=256)
    folder.view()


texts = st.text(max_size=40)
event_strategy = st.one_of(
    st.builds(ev.AgentText, stage=st.integers(0, 3), text=texts),
    st.builds(ev.AgentThought, stage=st.integers(0, 3), text=texts),
    st.builds(
        ev.ToolCall,
        stage=st.integers(0, 3),
        id=st.sampled_from(["a", "b", "c"]),
        title=texts,
        kind=st.sampled_from(["read", "edit"]),
        status=st.sampled_from(["pending", "completed"]),
    ),
    st.builds(ev.ToolUpdate, stage=st.integers(0, 3), id=st.sampled_from(["a", "b"]), status=st.just("failed")),
    st.builds(ev.Notice, kind=st.sampled_from(["info", "halt", "warning"]), text=texts),
    st.builds(
        ev.StageState,
        n=st.integers(1, 3),
        state=st.sampled_from(["running", "completed"]),
        rounds=st.integers(0, 3),
        escalations=st.integers(0, 2),
    ),
    st.builds(ev.PlanState, state=st.sampled_from(["running", "paused", "completed"]), auto_run=st.booleans()),
    st.builds(
        ev.BlockedCall,
        stage=st.integers(1, 3),
        tool_id=st.just("a"),
        title=texts,
        kind=st.just("read"),
        input=texts,
        reason=texts,
        cause=texts,
        klass=st.none(),
        pattern=texts,
    ),
)


def _run_started() -> ev.RunStarted:
    stages = tuple(ev.StageSpec(i, f"S{i}") for i in (1, 2, 3))
    return ev.RunStarted(run_id="r1", goal="g", agent="a", stages=stages, source="file", workspace="/w", pid=1)


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(event_strategy, max_size=40), st.data())
def test_a_valid_prefix_always_folds_to_the_same_view(tmp_path_factory, events, data):
    path = tmp_path_factory.mktemp("j") / "journal.jsonl"
    w = JournalWriter(path, wall=lambda: 1700000000.0)
    stamped = [w.append(_run_started()), *(w.append(e) for e in events)]
    w.close()
    blob = path.read_bytes()
    cut = data.draw(st.integers(0, len(blob)))
    prefix = tmp_path_factory.mktemp("p") / "journal.jsonl"
    prefix.write_bytes(blob[:cut])
    batch = JournalReader(prefix).read_all()
    complete = blob[:cut].count(b"\n")
    assert batch.defects == []
    assert batch.events == stamped[:complete]
    assert (batch.torn is not None) == (cut > 0 and not blob[:cut].endswith(b"\n"))
    expected = fold(stamped[:complete], run_dir=path.parent, now=0)
    assert fold(batch.events, run_dir=path.parent, now=0) == expected
