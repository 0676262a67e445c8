"""The bundled session-memory hook: what /new and /reset leave in memory/ (reference §4, §15 #29–33)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from freezegun import freeze_time

from sessionmem.config import Config, merge
from sessionmem.errors import ModelError
from sessionmem.hooks import COMMAND_NEW, COMMAND_RESET, HookEvent, HookOutcome, load_hooks
from sessionmem.model.scripted import ScriptedModel
from sessionmem.safefs import create_new_under
from sessionmem.session.lifecycle.slug import clean_slug, fallback_slug, slug_prompt

WHEN = datetime(2026, 3, 1, 14, 7, 55, tzinfo=UTC)
SLUG_PROMPT_HEAD = (
    "Based on this conversation, generate a short 1-2 word filename slug "
    "(lowercase, hyphen-separated, no file extension).\n\nConversation summary:\n"
)
SLUG_PROMPT_TAIL = (
    '\n\nReply with ONLY the slug, nothing else. Examples: "vendor-pitch", "api-design", "bug-fix"'
)


def entry(role: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "0badc0de",
        "parentId": None,
        "timestamp": "2026-03-01T14:00:00.000Z",
        "message": {"role": role, "content": content, **extra},
    }


def write_transcript(path: Path, entries: list[dict[str, Any]], session_id: str = "sess-1") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    header = {
        "type": "session",
        "version": 3,
        "id": session_id,
        "timestamp": "2026-03-01T13:00:00.000Z",
        "cwd": ".",
    }
    path.write_text("\n".join(json.dumps(e) for e in [header, *entries]) + "\n", encoding="utf-8")
    return path


CONVERSATION = [
    entry("user", "I'm vegetarian and I use metric units."),
    entry("assistant", [{"type": "text", "text": "Noted: vegetarian, metric."}]),
    entry("user", "Plan a 3-day trip to Lisbon."),
    entry("assistant", [{"type": "text", "text": "Day 1: Alfama. Day 2: Belém. Day 3: Sintra."}]),
]


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    return tmp_path / "state" / "agents" / "main" / "sessions"


def make_event(
    tmp_path: Path,
    *,
    name: str = COMMAND_NEW,
    transcript: Path | None = None,
    session_entry: dict[str, Any] | None = None,
    model: Any = None,
    config: Config | None = None,
) -> HookEvent:
    return HookEvent(
        name=name,
        workspace=tmp_path / "workspace",
        state_dir=tmp_path / "state",
        timestamp=WHEN,
        previous_session_entry=session_entry if session_entry is not None else {"sessionId": "sess-1"},
        transcript_path=transcript,
        command_source="cli",
        model=model,
        config=config or Config(),
    )


def run(ev: HookEvent) -> list[HookOutcome]:
    registry = load_hooks(ev.config, ev.workspace)
    return asyncio.run(registry.emit(ev))


def written(outcomes: list[HookOutcome]) -> Path:
    [outcome] = [o for o in outcomes if o.hook == "session-memory"]
    assert outcome.ok, outcome.error
    assert isinstance(outcome.result, Path)
    return outcome.result


def memory_files(tmp_path: Path) -> list[str]:
    folder = tmp_path / "workspace" / "memory" / "peers" / "main"  # the main session's own folder
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


@pytest.mark.parametrize("name", [COMMAND_NEW, COMMAND_RESET])
def test_new_and_reset_write_the_conversation(tmp_path: Path, sessions: Path, name: str) -> None:
    transcript = write_transcript(sessions / "sess-1.jsonl", CONVERSATION)
    path = written(run(make_event(tmp_path, name=name, transcript=transcript)))
    assert path == tmp_path / "workspace" / "memory" / "peers" / "main" / "2026-03-01-1407.md"
    assert path.read_text(encoding="utf-8") == (
        "# Session: 2026-03-01 14:07:55 UTC\n"
        "\n"
        "- **Session Key**: agent:main:main\n"
        "- **Session ID**: sess-1\n"
        "- **Source**: cli\n"
        "\n"
        "## Conversation Summary\n"
        "\n"
        "user: I'm vegetarian and I use metric units.\n"
        "assistant: Noted: vegetarian, metric.\n"
        "user: Plan a 3-day trip to Lisbon.\n"
        "assistant: Day 1: Alfama. Day 2: Belém. Day 3: Sintra.\n"
    )


def test_other_events_are_ignored(tmp_path: Path, sessions: Path) -> None:
    transcript = write_transcript(sessions / "sess-1.jsonl", CONVERSATION)
    for name in ["session:start", "command:stop", "compaction:after"]:
        assert run(make_event(tmp_path, name=name, transcript=transcript)) == []
    from sessionmem.session.lifecycle.archive import save_session_memory

    assert (
        asyncio.run(save_session_memory(make_event(tmp_path, name="command:stop", transcript=transcript)))
        is None
    )
    assert memory_files(tmp_path) == []


def test_commands_tools_system_and_relayed_messages_are_left_out(tmp_path: Path, sessions: Path) -> None:
    transcript = write_transcript(
        sessions / "sess-1.jsonl",
        [
            entry("user", "/model gpt-4o"),
            entry("user", "Remember: my timezone is Europe/Lisbon."),
            entry(
                "assistant", [{"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "x"}}]
            ),
            entry("toolResult", [{"type": "text", "text": "TOOL OUTPUT"}], toolCallId="c1", toolName="read"),
            entry("system", "SYSTEM NOTE"),
            {"type": "custom", "customType": "model-snapshot", "data": {"x": 1}},
            {"type": "compaction", "summary": "COMPACTED", "firstKeptEntryId": "x", "tokensBefore": 10},
            entry("user", "relayed from another session", provenance={"kind": "inter_session"}),
            entry(
                "assistant",
                [{"type": "text", "text": "Got it, Lisbon time."}, {"type": "text", "text": "SECOND"}],
            ),
            entry("user", ""),
        ],
    )
    text = written(run(make_event(tmp_path, transcript=transcript))).read_text(encoding="utf-8")
    summary = text.split("## Conversation Summary\n\n", 1)[1]
    assert summary == "user: Remember: my timezone is Europe/Lisbon.\nassistant: Got it, Lisbon time.\n"


def test_filtering_happens_before_taking_the_last_messages(tmp_path: Path, sessions: Path) -> None:
    entries = [entry("user", f"message {i}") for i in range(1, 6)]
    entries += [entry("user", "/status"), entry("user", "/help")] * 3  # would crowd out a slice-then-filter
    transcript = write_transcript(sessions / "sess-1.jsonl", entries)
    config = merge(Config(), {"hooks": {"internal": {"entries": {"session-memory": {"messages": 3}}}}})
    text = written(run(make_event(tmp_path, transcript=transcript, config=config))).read_text(
        encoding="utf-8"
    )
    assert text.endswith("## Conversation Summary\n\nuser: message 3\nuser: message 4\nuser: message 5\n")


def test_default_keeps_the_last_fifteen(tmp_path: Path, sessions: Path) -> None:
    transcript = write_transcript(sessions / "sess-1.jsonl", [entry("user", f"m{i}") for i in range(20)])
    text = written(run(make_event(tmp_path, transcript=transcript))).read_text(encoding="utf-8")
    assert "user: m4\n" not in text and text.count("user: m") == 15 and "user: m5\n" in text


def test_empty_transcript_writes_the_header_only(tmp_path: Path, sessions: Path) -> None:
    transcript = write_transcript(sessions / "sess-1.jsonl", [])
    text = written(run(make_event(tmp_path, transcript=transcript))).read_text(encoding="utf-8")
    assert "## Conversation Summary" not in text
    assert text.endswith("- **Source**: cli\n")


def test_empty_live_file_falls_back_to_newest_reset_archive(tmp_path: Path, sessions: Path) -> None:
    live = write_transcript(sessions / "sess-1.jsonl", [])
    write_transcript(
        sessions / "sess-1.jsonl.reset.2026-02-01T10-00-00.000Z", [entry("user", "older archive")]
    )
    write_transcript(
        sessions / "sess-1.jsonl.reset.2026-03-01T14-07-50.000Z", [entry("user", "newest archive")]
    )
    text = written(run(make_event(tmp_path, transcript=live))).read_text(encoding="utf-8")
    assert "user: newest archive" in text and "older archive" not in text


def test_live_file_with_messages_is_preferred_over_archives(tmp_path: Path, sessions: Path) -> None:
    live = write_transcript(sessions / "sess-1.jsonl", [entry("user", "live conversation")])
    write_transcript(sessions / "sess-1.jsonl.reset.2026-03-01T14-07-50.000Z", [entry("user", "archived")])
    text = written(run(make_event(tmp_path, transcript=live))).read_text(encoding="utf-8")
    assert "user: live conversation" in text and "archived" not in text


def test_already_archived_transcript_is_still_found(tmp_path: Path, sessions: Path) -> None:
    # A caller that archived first (OpenClaw's order) passes the old path; the archive is read.
    write_transcript(
        sessions / "sess-1.jsonl.reset.2026-03-01T14-07-50.000Z", [entry("user", "saved anyway")]
    )
    text = written(run(make_event(tmp_path, transcript=sessions / "sess-1.jsonl"))).read_text(
        encoding="utf-8"
    )
    assert "user: saved anyway" in text


def test_missing_session_file_is_recovered_by_session_id(tmp_path: Path, sessions: Path) -> None:
    write_transcript(sessions / "sess-1.jsonl", [entry("user", "found by id")])
    text = written(run(make_event(tmp_path, session_entry={"sessionId": "sess-1"}))).read_text(
        encoding="utf-8"
    )
    assert "user: found by id" in text


def test_archived_session_file_in_entry_resolves_to_live_file(tmp_path: Path, sessions: Path) -> None:
    write_transcript(sessions / "sess-1.jsonl", [entry("user", "live one")])
    archived = sessions / "sess-1.jsonl.reset.2026-01-01T00-00-00.000Z"
    write_transcript(archived, [entry("user", "stale")])
    ev = make_event(tmp_path, session_entry={"sessionId": "other", "sessionFile": str(archived)})
    assert "user: live one" in written(run(ev)).read_text(encoding="utf-8")


def test_existing_files_are_never_overwritten(tmp_path: Path, sessions: Path) -> None:
    transcript = write_transcript(sessions / "sess-1.jsonl", CONVERSATION)
    memory = tmp_path / "workspace" / "memory" / "peers" / "main"
    memory.mkdir(parents=True)
    (memory / "2026-03-01-1407.md").write_text("my own notes\n")
    paths = [written(run(make_event(tmp_path, transcript=transcript))) for _ in range(2)]
    assert [p.name for p in paths] == ["2026-03-01-1407-2.md", "2026-03-01-1407-3.md"]
    assert (memory / "2026-03-01-1407.md").read_text() == "my own notes\n"
    assert memory_files(tmp_path) == ["2026-03-01-1407-2.md", "2026-03-01-1407-3.md", "2026-03-01-1407.md"]


def test_write_new_file_leaves_no_temporary_files(tmp_path: Path) -> None:
    first = create_new_under(tmp_path, "notes", "note", b"a")
    second = create_new_under(tmp_path, "notes", "note", b"b")
    assert (first, second) == ("notes/note.md", "notes/note-2.md")
    assert ((tmp_path / first).read_text(), (tmp_path / second).read_text()) == ("a", "b")
    assert sorted(p.name for p in (tmp_path / "notes").iterdir()) == ["note-2.md", "note.md"]


def test_slug_from_the_model_with_openclaws_prompt(tmp_path: Path, sessions: Path) -> None:
    transcript = write_transcript(sessions / "sess-1.jsonl", CONVERSATION)
    model = ScriptedModel(['  "Lisbon Trip!"  '])
    path = written(run(make_event(tmp_path, transcript=transcript, model=model)))
    assert path.name == "2026-03-01-lisbon-trip.md"
    model.assert_complete()
    request = model.last_request
    assert request.purpose == "slug"
    [message] = request.messages
    assert message.role == "user"
    assert message.content.startswith(SLUG_PROMPT_HEAD + "user: I'm vegetarian and I use metric units.\n")
    assert message.content.endswith(
        "assistant: Day 1: Alfama. Day 2: Belém. Day 3: Sintra." + SLUG_PROMPT_TAIL
    )


def test_slug_prompt_carries_the_first_2000_characters() -> None:
    prompt = slug_prompt("x" * 2500)
    assert prompt == SLUG_PROMPT_HEAD + "x" * 2000 + SLUG_PROMPT_TAIL


@pytest.mark.parametrize(
    "reply",
    [ModelError("provider down", status_code=500), "", "!!!", "   "],
)
def test_unusable_model_reply_falls_back_to_time(tmp_path: Path, sessions: Path, reply: Any) -> None:
    transcript = write_transcript(sessions / "sess-1.jsonl", CONVERSATION)
    path = written(run(make_event(tmp_path, transcript=transcript, model=ScriptedModel([reply]))))
    assert path.name == "2026-03-01-1407.md"


def test_llm_slug_false_never_calls_the_model(tmp_path: Path, sessions: Path) -> None:
    transcript = write_transcript(sessions / "sess-1.jsonl", CONVERSATION)
    config = merge(Config(), {"hooks": {"internal": {"entries": {"session-memory": {"llmSlug": False}}}}})
    model = ScriptedModel(["should-not-be-used"])
    path = written(run(make_event(tmp_path, transcript=transcript, model=model, config=config)))
    assert path.name == "2026-03-01-1407.md"
    assert model.calls == []


def test_empty_conversation_does_not_ask_the_model(tmp_path: Path, sessions: Path) -> None:
    transcript = write_transcript(sessions / "sess-1.jsonl", [entry("user", "/new")])
    model = ScriptedModel(["unused"])
    written(run(make_event(tmp_path, transcript=transcript, model=model)))
    assert model.calls == []


@freeze_time("2026-07-04 23:58:30", tz_offset=0)
def test_fallback_slug_is_utc_hhmm_of_now(tmp_path: Path, sessions: Path) -> None:
    transcript = write_transcript(sessions / "sess-1.jsonl", CONVERSATION)
    ev = HookEvent(
        name=COMMAND_NEW,
        workspace=tmp_path / "workspace",
        state_dir=tmp_path / "state",
        transcript_path=transcript,
    )
    path = written(run(ev))
    assert path.name == "2026-07-04-2358.md"
    assert path.read_text(encoding="utf-8").startswith("# Session: 2026-07-04 23:58:30 UTC\n")
    assert "- **Session ID**: sess-1\n" in path.read_text(encoding="utf-8")  # from the transcript header
    assert "- **Source**: unknown\n" in path.read_text(encoding="utf-8")


def test_fallback_slug_converts_to_utc() -> None:
    from datetime import timedelta, timezone

    assert fallback_slug(datetime(2026, 3, 1, 9, 5, tzinfo=timezone(timedelta(hours=-5)))) == "1405"
    assert fallback_slug(datetime(2026, 3, 1, 9, 5)) == "0905"


@pytest.mark.parametrize(
    ("raw", "slug"),
    [
        ("vendor-pitch", "vendor-pitch"),
        ("  API Design  ", "api-design"),
        ('"bug_fix."', "bug-fix"),
        ("Café --- Menu", "caf-menu"),
        ("a" * 40, "a" * 30),
        ("abcdefghij-abcdefghij-abcdefgh-xyz", "abcdefghij-abcdefghij-abcdefgh"),
        ("abcdefghij abcdefghij abcdefg xyz", "abcdefghij-abcdefghij-abcdefg"),  # no dash left at the cut
        ("---", None),
        ("", None),
        (None, None),
    ],
)
def test_clean_slug(raw: str | None, slug: str | None) -> None:
    assert clean_slug(raw) == slug


def test_slow_model_times_out_to_no_slug() -> None:
    from sessionmem.session.lifecycle.slug import generate_slug

    async def slow(request: Any) -> str:
        await asyncio.sleep(5)
        return "too-late"

    model = ScriptedModel([slow])
    assert asyncio.run(generate_slug(model, "user: hi", timeout_s=0.05)) is None
    assert asyncio.run(generate_slug(ScriptedModel(["api design"]), "user: hi")) == "api-design"


def test_control_characters_in_the_conversation_never_reach_the_saved_file(
    tmp_path: Path, sessions: Path
) -> None:
    transcript = write_transcript(sessions / "sess-1.jsonl", [entry("user", "the gate code is 12\x0034\x07")])
    text = written(run(make_event(tmp_path, transcript=transcript))).read_text(encoding="utf-8")
    assert "user: the gate code is 1234" in text and "\x00" not in text and "\x07" not in text
