"""Parsing slash commands out of user messages (reference §3.3 triggers, §2.7 /compact)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionmem.config import merge
from sessionmem.errors import ConfigError
from sessionmem.model.scripted import ScriptedModel
from sessionmem.session.lifecycle.commands import (
    Command,
    SessionStatus,
    compact_reply,
    format_status,
    parse_command,
    rotation_name,
)
from sessionmem.session.turn.events import CompactionResult
from tests.scenarios.harness import make_runner, small_config


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/new", Command("new", "/new")),
        ("/NEW", Command("new", "/new")),
        ("  /Reset \n", Command("reset", "/reset")),
        ("/new fix the build", Command("new", "/new", "fix the build")),
        ("/reset\nfirst line\nsecond", Command("reset", "/reset", "first line\nsecond")),
        ("/compact", Command("compact", "/compact")),
        ("/Compact  focus on the API  ", Command("compact", "/compact", "focus on the API")),
        ("/status", Command("status", "/status")),
        ("/STATUS ", Command("status", "/status")),
    ],
)
def test_commands_are_recognised(text: str, expected: Command) -> None:
    assert parse_command(text) == expected


@pytest.mark.parametrize(
    "text",
    ["hello", "/newish", "/new-session", "tell me about /new", "/status please", "/compacted", "/", ""],
)
def test_ordinary_messages_are_not_commands(text: str) -> None:
    assert parse_command(text) is None


def test_configured_triggers() -> None:
    triggers = ("/fresh", "/start over")
    assert parse_command("/FRESH", triggers) == Command("new", "/fresh")
    assert parse_command("/start over now please", triggers) == Command("new", "/start over", "now please")
    assert parse_command("/new", triggers) is None
    assert parse_command("/reset", ("/reset",)) == Command("reset", "/reset")


def test_longest_trigger_wins() -> None:
    assert parse_command("/new chat hi", ("/new", "/new chat")) == Command("new", "/new chat", "hi")


def test_rotation_name() -> None:
    assert rotation_name("/reset") == "reset"
    assert rotation_name("/RESET") == "reset"
    assert rotation_name("/new") == "new"
    assert rotation_name("/fresh") == "new"


def test_compact_replies() -> None:
    assert compact_reply(CompactionResult(True, "manual", 5000, 1200)) == "Compacted (5,000 → 1,200 tokens)"
    skipped = CompactionResult(False, "manual", error="nothing to compact", flushed=True)
    assert compact_reply(skipped) == "Compaction skipped: nothing to compact · memory flushed first"
    assert (
        compact_reply(CompactionResult(False, "manual", error="model down"))
        == "Compaction failed: model down"
    )


def test_status_text() -> None:
    status = SessionStatus(
        session_key="agent:main:main",
        session_id="abc",
        tokens=2000,
        context_window=8000,
        flush_threshold=6500,
        compaction_threshold=7000,
        compaction_count=2,
        flushed_this_cycle=False,
        memory_flush_at=None,
        memory_flush_compaction_count=1,
        total_tokens=1900,
        transcript="sessions/abc.jsonl",
        model="openai/test",
    )
    text = format_status(status)
    assert "Tokens: 2,000 / 8,000 (25.0%) · flush at 6,500 · compaction at 7,000" in text
    assert "Compactions: 2 · memory flush: not yet this cycle (last flush in cycle 1)" in text
    assert status.to_json()["compactionThreshold"] == 7000


# ---------------------------------------------------------------------------- what end users may run


def test_status_reply_shows_no_server_paths(tmp_path: Path, workspace: Path) -> None:
    runner, _ = make_runner(ScriptedModel(["hi"]), tmp_path, workspace, small_config())
    session = runner.open()
    session.run_turn_sync("hello")
    reply = session.run_turn_sync("/status").reply or ""
    assert "Tokens:" in reply
    for path in (str(tmp_path), str(session.transcript.path), str(workspace)):
        assert path not in reply
    assert "Transcript" not in reply and ".jsonl" not in reply


def test_session_commands_limit_what_end_users_may_run(tmp_path: Path, workspace: Path) -> None:
    config = merge(small_config(), {"session": {"commands": ["/status"]}})
    model = ScriptedModel(responder=lambda request: "model: " + request.messages[-1].content)
    runner, recorder = make_runner(model, tmp_path, workspace, config)
    session = runner.open()
    first_id = session.entry.session_id
    for text in ("/compact", "/new", "/reset", "/new hello"):
        result = session.run_turn_sync(text)
        assert result.command is None and result.reply == f"model: {text}"  # an ordinary message
    assert session.entry.session_id == first_id and recorder.kinds("new", "compaction") == []
    assert session.run_turn_sync("/status").command == "status"
    with pytest.raises(ConfigError, match=r"session\.commands"):
        merge(small_config(), {"session": {"commands": ["/shutdown"]}})
    # The developer's own calls are not end-user commands: compact() still works.
    assert session.compact_sync().error in (None, "nothing to compact")
