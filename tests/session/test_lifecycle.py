"""Session rotation end to end with the scripted model and real files: /new and /reset through the gate
and the session-memory hook, archives, sessions.json counters, daily and idle resets, failing hooks."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from freezegun import freeze_time

from sessionmem.config import Config, ResetConfig, merge
from sessionmem.hooks import HOOK_NAMES, HookEvent, HookRegistry, load_hooks
from sessionmem.model.scripted import ScriptedModel, echo, flush_aware
from sessionmem.session.lifecycle.rotation import daily_boundary, rotated_entry, stale_reason_at
from sessionmem.session.stores.sessions_json import SessionEntry
from sessionmem.session.stores.transcript_folder import archive_name
from sessionmem.session.turn.events import CompactionEvent, HookErrorEvent, MemoryWriteEvent, NewSessionEvent
from tests.scenarios.harness import FLUSH_MARKER, make_runner, small_config, store_entry, transcript_lines

NO_REPLY = "NO_REPLY"


def config_with(**session: Any) -> Config:
    return merge(small_config(), {"session": session}) if session else small_config()


def only_code_hooks(config: Config) -> Config:
    """``config`` without the discovered hooks (the bundled session-memory hook would call the model)."""
    return merge(config, {"hooks": {"internal": {"enabled": False}}})


def purposes(model: ScriptedModel) -> list[str]:
    return [c.purpose for c in model.calls]


def new_events(recorder: Any) -> list[NewSessionEvent]:
    return [e for e in recorder.events if isinstance(e, NewSessionEvent)]


def memory_files(workspace: Path) -> list[Path]:
    return sorted(p for p in (workspace / "memory" / "peers" / "main").glob("*.md"))


def archives(runner: Any) -> list[Path]:
    return sorted(runner.store.sessions_dir.glob("*.jsonl.reset.*"))


# ---------------------------------------------------------------------------- /new and /reset


@freeze_time("2026-03-01 10:00:00")
def test_new_flushes_then_saves_memory_then_archives_and_resets_counters(
    tmp_path: Path, workspace: Path
) -> None:
    model = ScriptedModel(["Noted: Postgres for billing.", NO_REPLY, "billing-db"])
    runner, recorder = make_runner(model, tmp_path, workspace)
    session = runner.open()
    session.run_turn_sync("We picked Postgres for the billing service")
    old_id = session.entry.session_id
    old_path = session.transcript.path

    result = session.run_turn_sync("/new")

    # The flush ran first (this cycle had none), then the slug request of the hook.
    assert purposes(model) == ["turn", "flush", "slug"]
    assert FLUSH_MARKER in model.calls[1].messages[-1].content
    assert "We picked Postgres" in model.calls[2].messages[-1].content
    model.assert_complete()

    memory = workspace / "memory" / "peers" / "main" / "2026-03-01-billing-db.md"
    text = memory.read_text(encoding="utf-8")
    assert "# Session: 2026-03-01 10:00:00 UTC" in text
    assert f"- **Session ID**: {old_id}" in text
    assert "user: We picked Postgres for the billing service" in text
    assert "assistant: Noted: Postgres for billing." in text
    # The flush turn (prompt and NO_REPLY) is in the transcript, marked, and left out of the memory file.
    assert FLUSH_MARKER not in text and NO_REPLY not in text
    assert FLUSH_MARKER not in model.calls[2].messages[-1].content

    assert not old_path.exists()
    archived = old_path.with_name(old_path.name + ".reset.2026-03-01T10-00-00.000Z")
    assert archives(runner) == [archived]
    archived_lines = transcript_lines(archived)
    assert "We picked Postgres" in archived_lines[1]["message"]["content"]
    flush_messages = [line for line in archived_lines if FLUSH_MARKER in str(line.get("message", ""))]
    assert [line["message"]["provenance"] for line in flush_messages] == [
        {"kind": "memory_flush", "cycle": 0}
    ]

    entry = store_entry(runner)
    assert entry["sessionId"] == session.entry.session_id != old_id
    assert entry["compactionCount"] == 0
    for cleared in ("memoryFlushCompactionCount", "memoryFlushAt", "totalTokens", "inputTokens"):
        assert cleared not in entry
    assert entry["sessionFile"] == str(session.transcript.path)
    assert [line["type"] for line in transcript_lines(session.transcript.path)] == ["session"]
    assert session.context == []

    assert result.command == "new"
    assert result.reply is not None and session.entry.session_id in result.reply
    (event,) = new_events(recorder)
    assert (event.reason, event.previous_session_id, event.session_id) == ("new", old_id, entry["sessionId"])
    assert event.archived_path == str(archived)
    assert event.memory_file == str(memory)
    assert event.flushed is True
    writes = [e for e in recorder.events if isinstance(e, MemoryWriteEvent)]
    assert [(w.path, w.mode) for w in writes] == [("memory/peers/main/2026-03-01-billing-db.md", "create")]
    assert recorder.kinds("flush", "memory_write", "new") == ["flush", "memory_write", "new"]


def test_new_with_text_runs_it_as_the_first_turn_of_the_new_session(tmp_path: Path, workspace: Path) -> None:
    model = ScriptedModel(["Blue it is.", NO_REPLY, "colour-choice", "Hi! Fresh start."])
    runner, _ = make_runner(model, tmp_path, workspace)
    session = runner.open()
    session.run_turn_sync("My favourite colour is blue")
    result = session.run_turn_sync("/new   what can you do?")
    assert purposes(model) == ["turn", "flush", "slug", "turn"]
    assert result.reply == "Hi! Fresh start."
    assert result.command is None
    last = model.calls[-1]
    assert last.messages[-1].content == "what can you do?"
    assert all("blue" not in m.content for m in last.messages[1:])
    lines = transcript_lines(session.transcript.path)
    first = next(line["message"]["content"] for line in lines if line["type"] == "message")
    assert first == "what can you do?"
    assert len(memory_files(workspace)) == 1
    assert [e.kind for e in result.events].count("new") == 1


@pytest.mark.parametrize("text", ["/RESET", "  /Reset  "])
def test_triggers_are_case_insensitive_and_reset_emits_command_reset(
    tmp_path: Path, workspace: Path, text: str
) -> None:
    seen: list[str] = []
    registry = HookRegistry()
    registry.register("command", lambda event: seen.append(event.name), name="spy")
    model = ScriptedModel(["ok", NO_REPLY])
    runner, recorder = make_runner(model, tmp_path, workspace, hooks=registry)
    session = runner.open()
    session.run_turn_sync("hello")
    result = session.run_turn_sync(text)
    assert seen == ["command:reset"]
    assert result.command == "reset"
    assert new_events(recorder)[0].reason == "reset"
    assert result.reply is not None and result.reply.startswith("Session reset")


def test_configured_triggers_replace_the_defaults(tmp_path: Path, workspace: Path) -> None:
    model = ScriptedModel(["ok", NO_REPLY, "x", "echo /new"])
    runner, recorder = make_runner(
        model, tmp_path, workspace, config_with(resetTriggers=["/fresh"]), hooks=HookRegistry()
    )
    session = runner.open()
    session.run_turn_sync("hello")
    first_id = session.entry.session_id
    session.run_turn_sync("/FRESH")
    assert session.entry.session_id != first_id
    second_id = session.entry.session_id
    session.run_turn_sync("/new")  # not a trigger any more: an ordinary message
    assert session.entry.session_id == second_id
    assert len(new_events(recorder)) == 1


def test_already_flushed_cycle_is_not_flushed_again(tmp_path: Path, workspace: Path) -> None:
    model = ScriptedModel(["ok", "slugged"])
    runner, _ = make_runner(model, tmp_path, workspace)
    session = runner.open()
    session.run_turn_sync("remember the deploy window is Friday")
    runner.store.patch(session.key, memory_flush_compaction_count=0)
    session.run_turn_sync("/new")
    assert purposes(model) == ["turn", "slug"]
    assert [p.name.endswith("-slugged.md") for p in memory_files(workspace)] == [True]


def test_hook_reads_the_live_transcript_after_the_flush(tmp_path: Path, workspace: Path) -> None:
    """DESIGN 6: the hook sees the live file (not yet archived), and runs after the flush."""
    model = ScriptedModel(["ok", NO_REPLY, "live"])
    seen: dict[str, Any] = {}

    def spy(event: HookEvent) -> None:
        assert event.transcript_path is not None
        seen["exists"] = event.transcript_path.is_file()
        seen["name"] = event.transcript_path.name
        seen["calls_before_hook"] = purposes(model)

    registry = load_hooks(small_config(), workspace)
    registry.register("command:new", spy, name="spy")
    runner, _ = make_runner(model, tmp_path, workspace, hooks=registry)
    session = runner.open()
    session.run_turn_sync("hello")
    live_name = session.transcript.path.name
    session.run_turn_sync("/new")
    assert seen == {"exists": True, "name": live_name, "calls_before_hook": ["turn", "flush", "slug"]}


def test_failing_hook_does_not_break_the_turn(tmp_path: Path, workspace: Path) -> None:
    def broken(event: HookEvent) -> None:
        raise RuntimeError("disk on fire")

    registry = HookRegistry()
    registry.register("command:new", broken, name="broken")
    load_hooks(small_config(), workspace, registry=registry)  # session-memory after the broken one
    model = ScriptedModel(["ok", NO_REPLY, "after-failure", "fresh reply"])
    runner, recorder = make_runner(model, tmp_path, workspace, hooks=registry)
    session = runner.open()
    session.run_turn_sync("hello")
    result = session.run_turn_sync("/new carry on")
    assert result.reply == "fresh reply"
    (event,) = new_events(recorder)
    assert any("disk on fire" in err for err in event.hook_errors)
    assert [p.name for p in memory_files(workspace)] == [f"{_today()}-after-failure.md"]


def test_new_on_an_empty_session_writes_no_memory_file(tmp_path: Path, workspace: Path) -> None:
    model = ScriptedModel([])
    runner, recorder = make_runner(model, tmp_path, workspace)
    session = runner.open()
    first = session.entry.session_id
    result = session.run_turn_sync("/new")
    assert model.calls == []
    assert memory_files(workspace) == []
    assert session.entry.session_id != first
    assert result.reply is not None and result.reply.startswith("New session started")
    assert new_events(recorder)[0].flushed is False


def _today() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d")


# ---------------------------------------------------------------------------- /compact and /status


def test_compact_with_instructions_goes_through_the_gate(tmp_path: Path, workspace: Path) -> None:
    model = ScriptedModel(
        ["one", "two", "three", NO_REPLY, "## Decisions\n- postgres"],
    )
    runner, recorder = make_runner(model, tmp_path, workspace, small_config(keep=20))
    session = runner.open()
    for n in ("first " * 40, "second " * 40, "third " * 40):
        session.run_turn_sync(n)
    result = session.run_turn_sync("/compact focus on the database decision")
    assert purposes(model) == ["turn", "turn", "turn", "flush", "compaction"]
    assert "Additional focus: focus on the database decision" in model.calls[-1].messages[-1].content
    assert result.command == "compact"
    assert result.reply is not None and result.reply.startswith("Compacted (")
    assert "memory flushed first" in result.reply
    assert store_entry(runner)["compactionCount"] == 1
    assert recorder.kinds("flush", "compaction") == ["flush", "compaction"]


def test_status_reports_tokens_thresholds_and_flush_state(tmp_path: Path, workspace: Path) -> None:
    model = ScriptedModel(["hello back"])
    runner, _ = make_runner(model, tmp_path, workspace)
    session = runner.open()
    session.run_turn_sync("hello")
    result = session.run_turn_sync("/status")
    assert result.command == "status"
    assert len(model.calls) == 1  # no model call for /status
    text = result.reply or ""
    assert "/ 8,000" in text
    assert "flush at 6,500" in text and "compaction at 7,000" in text
    assert "Compactions: 0" in text
    assert "memory flush: not yet this cycle" in text
    runner.store.patch(session.key, memory_flush_compaction_count=0, memory_flush_at=1_772_359_200_000)
    assert "memory flush: done this cycle" in (session.run_turn_sync("/status").reply or "")


# ---------------------------------------------------------------------------- freshness


def test_daily_reset_crossing_four_am_rotates_with_flush_and_hook(tmp_path: Path, workspace: Path) -> None:
    config = config_with(reset={"mode": "daily", "atHour": 4})
    model = ScriptedModel(["late night reply", "still before four", NO_REPLY, "night-notes", "morning!"])
    runner, recorder = make_runner(model, tmp_path, workspace, config)
    with freeze_time("2026-03-01 03:50:00") as clock:
        session = runner.open()
        session.run_turn_sync("working late on the migration")
        old_id = session.entry.session_id
        clock.move_to("2026-03-01 03:59:00")
        session.run_turn_sync("one more thing")
        assert session.entry.session_id == old_id
        clock.move_to("2026-03-01 04:10:00")
        result = session.run_turn_sync("good morning")
    assert result.reply == "morning!"
    assert purposes(model) == ["turn", "turn", "flush", "slug", "turn"]
    (event,) = new_events(recorder)
    assert event.reason == "daily" and event.previous_session_id == old_id
    memory = workspace / "memory" / "peers" / "main" / "2026-03-01-night-notes.md"
    body = memory.read_text(encoding="utf-8")
    assert "user: working late on the migration" in body
    assert "- **Source**: daily" in body
    assert all("migration" not in m.content for m in model.calls[-1].messages[1:])
    entry = store_entry(runner)
    assert entry["sessionId"] == event.session_id != old_id
    assert len(archives(runner)) == 1


def test_idle_expiry_rotates(tmp_path: Path, workspace: Path) -> None:
    config = config_with(reset={"mode": "idle", "idleMinutes": 30})
    model = ScriptedModel(["a", "b", NO_REPLY, "idle-chat", "c"])
    runner, recorder = make_runner(model, tmp_path, workspace, config)
    with freeze_time("2026-03-01 10:00:00") as clock:
        session = runner.open()
        session.run_turn_sync("first")
        clock.move_to("2026-03-01 10:29:00")
        session.run_turn_sync("second")  # 29 minutes idle: fresh
        assert new_events(recorder) == []
        clock.move_to("2026-03-01 11:00:00")
        session.run_turn_sync("third")  # 31 minutes idle: stale
    (event,) = new_events(recorder)
    assert event.reason == "idle"
    assert (workspace / "memory" / "peers" / "main" / "2026-03-01-idle-chat.md").is_file()
    assert purposes(model) == ["turn", "turn", "flush", "slug", "turn"]


def test_reset_mode_off_never_rotates(tmp_path: Path, workspace: Path) -> None:
    model = ScriptedModel(["a", "b"])
    runner, recorder = make_runner(model, tmp_path, workspace)
    with freeze_time("2026-03-01 03:00:00") as clock:
        session = runner.open()
        session.run_turn_sync("first")
        clock.move_to("2026-03-09 12:00:00")
        session.run_turn_sync("second")
    assert new_events(recorder) == []


# ---------------------------------------------------------------------------- pure pieces


def test_daily_boundary_in_the_users_zone() -> None:
    zone = ZoneInfo("America/New_York")
    now = datetime(2026, 3, 1, 8, 30, tzinfo=UTC)  # 03:30 in New York: before today's 04:00
    assert daily_boundary(now, 4, zone) == datetime(2026, 2, 28, 9, 0, tzinfo=UTC)
    now = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)  # exactly 04:00 in New York
    assert daily_boundary(now, 4, zone) == now


def test_stale_reason_at() -> None:
    utc = ZoneInfo("UTC")
    daily = ResetConfig.model_validate({"mode": "daily", "atHour": 4})
    now = datetime(2026, 3, 1, 4, 0, tzinfo=UTC)
    just_before = int(datetime(2026, 3, 1, 3, 59, 59, tzinfo=UTC).timestamp() * 1000)
    assert stale_reason_at(just_before, now, daily, utc) == "daily"
    assert stale_reason_at(int(now.timestamp() * 1000), now, daily, utc) is None
    both = ResetConfig.model_validate({"mode": "daily", "atHour": 4, "idleMinutes": 10})
    at_noon = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    eleven_ago = int(at_noon.timestamp() * 1000) - 11 * 60_000
    assert stale_reason_at(eleven_ago, at_noon, both, utc) == "idle"
    idle_default = ResetConfig.model_validate({"mode": "idle"})
    assert (
        stale_reason_at(int(at_noon.timestamp() * 1000) - 61 * 60_000, at_noon, idle_default, utc) == "idle"
    )
    assert stale_reason_at(int(at_noon.timestamp() * 1000) - 59 * 60_000, at_noon, idle_default, utc) is None
    assert stale_reason_at(1, at_noon, ResetConfig.model_validate({}), utc) is None


def test_rotated_entry_keeps_identity_and_clears_counters() -> None:
    old = SessionEntry.model_validate(
        {
            "sessionId": "old",
            "sessionKey": "agent:main:main",
            "chatType": "direct",
            "label": "work",
            "compactionCount": 3,
            "memoryFlushCompactionCount": 3,
            "memoryFlushAt": 5,
            "totalTokens": 9000,
            "inputTokens": 9000,
            "contextTokens": 8000,
        }
    )
    new = rotated_entry(old, "new-id", Path("sessions/new-id.jsonl")).to_json_dict()
    assert new["sessionId"] == "new-id"
    assert new["compactionCount"] == 0
    assert (new["label"], new["chatType"], new["sessionKey"]) == ("work", "direct", "agent:main:main")
    for gone in (
        "memoryFlushCompactionCount",
        "memoryFlushAt",
        "totalTokens",
        "inputTokens",
        "contextTokens",
    ):
        assert gone not in new
    json.dumps(new)


def test_archive_name_is_openclaws() -> None:
    when = datetime(2026, 3, 1, 10, 0, 5, 123000, tzinfo=UTC)
    assert archive_name(Path("s/abc.jsonl"), when).name == "abc.jsonl.reset.2026-03-01T10-00-05.123Z"


def test_hook_events_around_flush_compaction_and_rotation(tmp_path: Path, workspace: Path) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    registry = HookRegistry()
    for name in ("memory:flush", "compaction", "command:new", "session:end", "session:start"):
        registry.register(
            name, lambda event: seen.append((event.name, dict(event.extra))), name=f"spy-{name}"
        )
    model = ScriptedModel(["one", "two", NO_REPLY, "summary", NO_REPLY, "three"])
    config = only_code_hooks(small_config(keep=20))
    runner, recorder = make_runner(model, tmp_path, workspace, config, hooks=registry)
    session = runner.open()
    session.run_turn_sync("alpha " * 40)
    session.run_turn_sync("beta " * 40)
    session.run_turn_sync("/compact")
    old_id = session.entry.session_id
    compacted_in = session.entry.session_id
    session.run_turn_sync("/new gamma")
    # The compaction opened a new cycle, so /new flushes it again before the session ends.
    assert purposes(model) == ["turn", "turn", "flush", "compaction", "flush", "turn"]
    names = [name for name, _ in seen]
    assert names == [
        "session:start",  # the session open() created, announced at its first turn
        "memory:flush",
        "compaction:before",
        "compaction:after",
        "memory:flush",
        "command:new",
        "session:end",
        "session:start",
    ]
    # One vocabulary: every hook event above came from an on_event event of the kind HOOK_NAMES maps to it.
    hook_points = [e.kind for e in recorder.events if e.kind in HOOK_NAMES]
    assert [HOOK_NAMES[kind] for kind in hook_points] == names
    assert seen[0][1]["reason"] == "created"
    seen = seen[1:]
    assert seen[0][1]["path"].startswith("memory/") and seen[0][1]["compaction_count"] == 0
    assert seen[1][1] == {  # the compaction_start event's fields, as compaction:after has compaction's
        "reason": "manual",
        "compaction_count": 0,
        "session_id": compacted_in,
        "timestamp": seen[1][1]["timestamp"],
        "sessions_dir": seen[1][1]["sessions_dir"],
    }
    assert seen[2][1]["reason"] == "manual" and seen[2][1]["compaction_count"] == 1
    assert seen[3][1]["compaction_count"] == 1
    assert seen[4][1]["reason"] == "new"
    assert seen[5][1]["next_session_id"] == session.entry.session_id
    assert seen[6][1]["resumed_from"] == old_id


def start_spy(registry: HookRegistry) -> list[HookEvent]:
    seen: list[HookEvent] = []
    registry.register("session:start", seen.append, name="spy-session-start")
    return seen


def test_a_created_session_announces_session_start_once_at_its_first_turn(
    tmp_path: Path, workspace: Path
) -> None:
    registry = HookRegistry()
    seen = start_spy(registry)
    model = ScriptedModel(["one", "two"])
    runner, _ = make_runner(model, tmp_path, workspace, hooks=registry, command_source="test")
    session = runner.open()
    assert seen == []  # open() is sync: the hook waits for the first turn
    session.run_turn_sync("hello")
    assert runner.open() is session
    session.run_turn_sync("again")
    (event,) = seen
    assert event.extra["reason"] == "created"
    assert event.session_entry is not None
    assert event.session_entry["sessionId"] == session.entry.session_id
    assert event.transcript_path == session.transcript.path
    assert event.command_source == "test"
    assert event.session_key == session.key


def test_a_created_session_dropped_from_memory_before_its_first_turn_still_announces_once(
    tmp_path: Path, workspace: Path
) -> None:
    registry = HookRegistry()
    seen = start_spy(registry)
    config = merge(small_config(), {"session": {"maxIdleSessions": 1}})
    runner, _ = make_runner(ScriptedModel(responder=echo), tmp_path, workspace, config, hooks=registry)
    keys = ["agent:main:telegram:direct:ann", "agent:main:telegram:direct:bob"]
    kept = runner.open(keys[0])
    runner.open(keys[1])  # the first one, idle, leaves the runner's memory
    assert runner.sessions_in_memory == (keys[1],)
    again = runner.open(keys[0])  # read back from sessions.json: no turn yet
    assert again is not kept
    again.run_turn_sync("hello")
    kept.run_turn_sync("and the handle kept from before")
    runner.open(keys[1]).run_turn_sync("hi")
    assert [(e.session_key, e.extra["reason"]) for e in seen] == [(keys[0], "created"), (keys[1], "created")]


def test_a_session_reopened_from_sessions_json_does_not_announce_a_start(
    tmp_path: Path, workspace: Path
) -> None:
    first_runner, _ = make_runner(ScriptedModel(["one"]), tmp_path, workspace, hooks=HookRegistry())
    first_runner.open().run_turn_sync("hello")
    registry = HookRegistry()
    seen = start_spy(registry)
    runner, _ = make_runner(ScriptedModel(["two"]), tmp_path, workspace, hooks=registry)
    session = runner.open()  # same key: the entry is in sessions.json
    session.run_turn_sync("back again")
    assert seen == []


def test_new_as_the_first_message_announces_the_created_session_then_the_rotation(
    tmp_path: Path, workspace: Path
) -> None:
    registry = HookRegistry()
    seen: list[tuple[str, str]] = []
    for name in ("session:start", "session:end"):
        registry.register(name, lambda e: seen.append((e.name, e.extra["reason"])), name=f"spy-{name}")
    runner, _ = make_runner(ScriptedModel([]), tmp_path, workspace, hooks=registry)
    runner.open().run_turn_sync("/new")
    assert seen == [("session:start", "created"), ("session:end", "new"), ("session:start", "new")]


# ---------------------------------------------------------------------------- failing hooks, any event


def test_a_failing_compaction_after_hook_is_reported_and_the_turn_completes(
    tmp_path: Path, workspace: Path
) -> None:
    def broken(event: HookEvent) -> None:
        raise RuntimeError("index offline")

    registry = HookRegistry()
    registry.register("compaction:after", broken, name="broken-after")
    model = ScriptedModel(responder=flush_aware(lambda r: "ok " + " ".join(f"w{i}" for i in range(30))))
    config = small_config(window=3000, reserve=500, floor=500, soft=300, keep=400)
    runner, recorder = make_runner(model, tmp_path, workspace, config, hooks=registry)
    session = runner.open()
    for i in range(40):
        result = session.run_turn_sync(f"turn {i}: " + " ".join(f"t{j}" for j in range(40)))
        if any(isinstance(e, CompactionEvent) for e in result.events):
            break
    else:
        pytest.fail("no compaction in 40 turns")
    assert result.reply is not None and result.reply.startswith("ok ")  # the turn completed
    (error,) = [e for e in result.events if isinstance(e, HookErrorEvent)]
    assert (error.kind, error.hook, error.hook_event) == ("hook_error", "broken-after", "compaction:after")
    assert "RuntimeError: index offline" in error.error
    assert error.session_key == session.key
    kinds = [e.kind for e in result.events]
    assert kinds.index("compaction") < kinds.index("hook_error") < kinds.index("turn")
    assert recorder.kinds("hook_error") == ["hook_error"]  # on_event saw it too
    assert store_entry(runner)["compactionCount"] == 1


def test_every_hook_event_reports_its_failures_the_same_way(tmp_path: Path, workspace: Path) -> None:
    async def broken(event: HookEvent) -> None:
        raise ValueError(f"broken on {event.name}")

    registry = HookRegistry()
    for name in ("session", "memory", "compaction", "command"):  # a kind receives all its events
        registry.register(name, broken, name=f"broken-{name}")
    model = ScriptedModel(["one", "two", NO_REPLY, "summary", NO_REPLY, "three"])
    config = only_code_hooks(small_config(keep=20))
    runner, recorder = make_runner(model, tmp_path, workspace, config, hooks=registry)
    session = runner.open()
    session.run_turn_sync("alpha " * 40)
    session.run_turn_sync("beta " * 40)
    session.run_turn_sync("/compact")
    assert session.run_turn_sync("/new gamma").reply == "three"
    errors = [e for e in recorder.events if isinstance(e, HookErrorEvent)]
    assert [e.hook_event for e in errors] == [
        "session:start",
        "memory:flush",
        "compaction:before",
        "compaction:after",
        "memory:flush",
        "command:new",
        "session:end",
        "session:start",
    ]
    assert all(f"broken on {e.hook_event}" in e.error for e in errors)
    (new,) = new_events(recorder)
    assert len(new.hook_errors) == 3  # the rotation's own: command:new, session:end, session:start
