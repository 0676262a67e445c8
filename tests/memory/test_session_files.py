"""Transcripts flattened for indexing: line map, dates, redaction, torn lines, delta tracking."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sessionmem.memory.sync.session_text import (
    SessionDeltaTracker,
    build_session_entry,
    count_newlines,
    list_session_files,
    read_session_lines,
    remap_lines,
)

HEADER = {"type": "session", "version": 3, "id": "s1", "timestamp": "2026-03-01T10:00:00.000Z", "cwd": "/w"}


def msg(role: str, content: Any, ts: str = "2026-03-01T10:00:01.000Z", **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "content": content, **extra}
    return {"type": "message", "id": "a1b2c3d4", "parentId": None, "timestamp": ts, "message": message}


def write_jsonl(path: Path, entries: list[Any], tail: str = "") -> Path:
    lines = [e if isinstance(e, str) else json.dumps(e) for e in entries]
    path.write_text("\n".join(lines) + "\n" + tail, encoding="utf-8")
    return path


def test_line_map_points_at_jsonl_lines(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s1.jsonl",
        [
            HEADER,  # 1
            {"type": "custom", "customType": "model-snapshot", "data": {}},  # 2
            {"type": "compaction", "summary": "earlier", "firstKeptEntryId": "x", "tokensBefore": 1},  # 3
            msg("user", "Hello world"),  # 4
            msg(
                "toolResult", [{"type": "text", "text": "tool output"}], toolCallId="c1", toolName="read"
            ),  # 5
            msg(
                "assistant",
                [{"type": "text", "text": "Hi there"}, {"type": "toolCall", "id": "c1", "name": "read"}],
            ),
            msg("user", [{"type": "text", "text": "Tell me"}, {"type": "text", "text": "a joke"}]),  # 7
        ],
    )
    entry = build_session_entry(path)
    assert entry.content == "User: Hello world\nAssistant: Hi there\nUser: Tell me a joke"
    assert entry.line_map == [4, 6, 7]
    assert entry.size == path.stat().st_size
    assert entry.mtime_ns == path.stat().st_mtime_ns


def test_whitespace_collapsed_and_secrets_redacted(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [HEADER, msg("user", "  my key:\n\n  sk-proj-abc123DEF456ghi789JKL012   ok \t done ")],
    )
    entry = build_session_entry(path)
    assert entry.content == "User: my key: sk-…[redacted] ok done"
    assert "abc123DEF456" not in entry.content


def test_blank_malformed_and_torn_lines_are_skipped(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            HEADER,
            "",
            msg("user", "first"),
            "{not json",
            msg("assistant", [{"type": "text", "text": "second"}]),
        ],
        tail='{"type":"message","id":"ff","message":{"role":"user","content":"torn',
    )
    entry = build_session_entry(path)
    assert entry.content == "User: first\nAssistant: second"
    assert entry.line_map == [3, 5]


def test_no_messages_gives_empty_content(tmp_path: Path) -> None:
    entry = build_session_entry(
        write_jsonl(tmp_path / "s.jsonl", [HEADER, msg("user", "   "), msg("user", [])])
    )
    assert entry.content == ""
    assert entry.line_map == []
    assert entry.dates == []


def test_dates_come_from_entry_timestamps_then_message_millis(tmp_path: Path) -> None:
    no_iso = msg("assistant", "reply")
    del no_iso["timestamp"]
    no_iso["message"]["timestamp"] = 1772409600000  # 2026-03-02T00:00:00Z
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            HEADER,
            msg("user", "late", ts="2026-03-01T23:59:59.000Z"),
            no_iso,
            {**msg("user", "x"), "timestamp": None},
        ],
    )
    entry = build_session_entry(path)
    assert entry.dates == ["2026-03-01", "2026-03-02", None]


def test_a_timestamp_inside_the_message_dates_the_line_whatever_its_form(tmp_path: Path) -> None:
    """Transcripts written by other tools put the time inside ``message`` only, as ISO text, epoch
    milliseconds or epoch seconds; every form dates the line."""
    shapes = [
        "2026-03-01T10:00:00Z",  # ISO text inside the message
        "2026-03-02T23:30:00-05:00",  # with an offset: the UTC date is the next day
        1772582400000,  # epoch milliseconds: 2026-03-04T00:00:00Z
        1772668800,  # epoch seconds: 2026-03-05T00:00:00Z
    ]
    lines = [HEADER]
    for when in shapes:
        line = msg("user", f"note at {when}")
        del line["timestamp"]
        line["message"]["timestamp"] = when
        lines.append(line)
    numeric_top = msg("user", "top-level millis")
    numeric_top["timestamp"] = 1772755200000  # 2026-03-06T00:00:00Z
    lines.append(numeric_top)
    entry = build_session_entry(write_jsonl(tmp_path / "s.jsonl", lines))
    assert entry.dates == ["2026-03-01", "2026-03-03", "2026-03-04", "2026-03-05", "2026-03-06"]


def test_hash_changes_with_content_and_with_line_numbers(tmp_path: Path) -> None:
    a = build_session_entry(write_jsonl(tmp_path / "a.jsonl", [HEADER, msg("user", "same")]))
    b = build_session_entry(write_jsonl(tmp_path / "b.jsonl", [HEADER, "", msg("user", "same")]))
    c = build_session_entry(write_jsonl(tmp_path / "c.jsonl", [HEADER, msg("user", "other")]))
    assert a.content == b.content
    assert len({a.hash, b.hash, c.hash}) == 3


def test_remap_lines() -> None:
    line_map = [4, 6, 7, 10, 13]
    assert remap_lines(1, 5, line_map) == (4, 13)
    assert remap_lines(2, 3, line_map) == (6, 7)
    assert remap_lines(4, 99, line_map) == (10, 13)  # clamped
    assert remap_lines(3, 8, []) == (3, 8)


def test_read_session_lines_returns_flattened_redacted_text(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            HEADER,  # 1
            msg("user", "deploy with password=hunter2"),  # 2
            msg("toolResult", [{"type": "text", "text": "raw tool output"}]),  # 3
            msg("assistant", "Deployed."),  # 4
            msg("user", "thanks"),  # 5
        ],
    )
    assert read_session_lines(path, 2, 3) == "User: deploy with password=[REDACTED]\nAssistant: Deployed."
    assert read_session_lines(path, 5) == "User: thanks"
    assert read_session_lines(path, 1, 1) == ""
    assert "raw tool output" not in read_session_lines(path)


def test_list_session_files_skips_archives(tmp_path: Path) -> None:
    for name in [
        "b.jsonl",
        "a.jsonl",
        "a-topic-9.jsonl",
        "a.jsonl.reset.2026-03-01T10-00-00.000Z",
        "c.jsonl.deleted.1",
    ]:
        (tmp_path / name).write_text("{}\n")
    (tmp_path / "sessions.json").write_text("{}")
    (tmp_path / "dir.jsonl").mkdir()
    assert [p.name for p in list_session_files(tmp_path)] == ["a-topic-9.jsonl", "a.jsonl", "b.jsonl"]
    assert list_session_files(tmp_path / "missing") == []


def test_count_newlines_in_a_byte_range(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"a\nb\nc\n" * 50_000)  # 300,000 bytes, spans several 64 KiB blocks
    assert count_newlines(path, 0, 300_000) == 150_000
    assert count_newlines(path, 2, 6) == 2
    assert count_newlines(path, 10, 10) == 0


def test_delta_tracker_bytes_threshold_carries_remainder() -> None:
    tracker = SessionDeltaTracker(delta_bytes=100_000, delta_messages=50)
    assert tracker.observe("f", 60_000, 10) is False
    assert tracker.observe("f", 130_000, 10) is True  # 130k pending >= 100k
    assert tracker.state("f").pending_bytes == 30_000
    assert tracker.state("f").pending_messages == 0  # 20 - 50 clamps at 0
    assert tracker.observe("f", 199_999, 5) is False
    assert tracker.observe("f", 200_000, 0) is True


def test_delta_tracker_messages_threshold() -> None:
    tracker = SessionDeltaTracker(delta_bytes=100_000, delta_messages=50)
    assert tracker.observe("f", 1_000, 30) is False
    assert tracker.observe("f", 2_000, 25) is True
    assert tracker.state("f").pending_messages == 5
    assert tracker.state("f").pending_bytes == 0


def test_delta_tracker_counts_newlines_only_in_the_new_range_and_only_when_needed() -> None:
    tracker = SessionDeltaTracker(delta_bytes=100, delta_messages=50)
    asked: list[tuple[int, int]] = []

    def counter(lo: int, hi: int) -> int:
        asked.append((lo, hi))
        return 1

    tracker.observe("f", 40, counter)
    tracker.observe("f", 90, counter)
    assert asked == [(0, 40), (40, 90)]
    tracker.observe("f", 500, counter)  # bytes already over the threshold: no need to count
    assert asked == [(0, 40), (40, 90)]


def test_delta_tracker_shrunk_file_counts_whole_file() -> None:
    tracker = SessionDeltaTracker(delta_bytes=100_000, delta_messages=50)
    tracker.observe("f", 90_000, 10)
    assert tracker.newline_range("f", 20_000) == (0, 20_000)
    assert tracker.observe("f", 20_000, 3) is True  # 90k + 20k
    state = tracker.state("f")
    assert (state.last_size, state.pending_bytes, state.pending_messages) == (20_000, 10_000, 0)


def test_delta_tracker_reset_and_zero_thresholds() -> None:
    tracker = SessionDeltaTracker(delta_bytes=100_000, delta_messages=50)
    tracker.observe("f", 99_000, 49)
    tracker.reset("f", 99_000)
    assert tracker.observe("f", 99_100, 1) is False
    eager = SessionDeltaTracker(delta_bytes=0, delta_messages=0)
    assert eager.observe("g", 1, 0) is True
    assert eager.observe("g", 1, 0) is False  # nothing new since


def test_observe_file_reads_size_and_newlines(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", [HEADER] + [msg("user", f"m{i}") for i in range(60)])
    tracker = SessionDeltaTracker(delta_bytes=10_000_000, delta_messages=50)
    assert tracker.observe_file(path) is True
    assert tracker.state(path).pending_messages == 11


RECORDED = sorted((Path(__file__).resolve().parents[2] / "transcripts").glob("*.jsonl"))


def test_recorded_transcripts_are_well_formed() -> None:
    """The recorded conversations drive replay and the demo: valid v3 files, tool calls paired."""
    assert len(RECORDED) >= 2
    for path in RECORDED:
        lines = [json.loads(raw) for raw in path.read_text(encoding="utf-8").splitlines()]
        header, entries = lines[0], lines[1:]
        assert header["type"] == "session" and header["version"] == 3 and header["sessionKey"]
        ids = [e["id"] for e in entries]
        assert len(set(ids)) == len(ids) and all(len(i) == 8 for i in ids), path.name
        assert [e["parentId"] for e in entries] == [None, *ids[:-1]], path.name
        messages = [e["message"] for e in entries if e["type"] == "message"]
        assert 40 <= len(messages) <= 120, path.name
        assert messages[0]["role"] == "user" and messages[-1]["role"] == "assistant", path.name
        pending: list[str] = []
        for message in messages:
            if message["role"] == "toolResult":
                assert message["toolCallId"] == pending.pop(0), path.name
                continue
            assert not pending, f"{path.name}: tool call without result"
            if message["role"] == "assistant":
                pending = [b["id"] for b in message["content"] if b["type"] == "toolCall"]
        entry = build_session_entry(path)
        assert entry.content and None not in entry.dates


def test_recorded_secret_is_redacted_when_flattened() -> None:
    [billing] = [p for p in RECORDED if p.name == "billing-migration.jsonl"]
    raw = billing.read_text(encoding="utf-8")
    content = build_session_entry(billing).content
    assert "Wint3r-Lantern-42" in raw and "Wint3r-Lantern-42" not in content
    assert "sk_test_51FwDemoKey" in raw and "sk_test_51FwDemoKey" not in content
