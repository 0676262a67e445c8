"""``sessionmem.testing``, the kit a test author reaches for: a small window whose thresholds work, a flush
that writes today's log in every cycle, a provider overflow on turn N, replay from Python, and events
that say which session they belong to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sessionmem.session.runner import SessionRunner
from sessionmem.session.turn.events import Event
from sessionmem.testing import (
    ScriptedModel,
    echo,
    flush_aware,
    flush_write,
    overflow_on_turn,
    run_replay,
    small_window_config,
)

RECORDINGS = Path(__file__).resolve().parents[1] / "transcripts"


def runner_for(model: Any, tmp_path: Path, config: Any, events: list[Event]) -> SessionRunner:
    return SessionRunner(
        model,
        config=config,
        workspace=tmp_path / "workspace",
        state_dir=tmp_path / "state",
        on_event=events.append,
    )


def talk(session: Any, turns: int, words: int = 60) -> None:
    for turn in range(turns):
        session.run_turn_sync(f"Note {turn}: " + " ".join(f"w{turn}x{i}" for i in range(words)))


def test_the_small_window_flushes_then_compacts_within_a_short_conversation(tmp_path: Path) -> None:
    config = small_window_config(3000)
    events: list[Event] = []
    session = runner_for(ScriptedModel(responder=flush_aware()), tmp_path, config, events).open()
    talk(session, 12)
    kinds = [e.kind for e in events if e.kind in ("flush", "compaction")]
    assert kinds[:2] == ["flush", "compaction"] and kinds.count("compaction") >= 2
    status = session.status()
    assert 0 < status.flush_threshold < status.compaction_threshold < 3000


def test_flush_write_writes_todays_log_in_every_cycle_in_the_users_zone(tmp_path: Path) -> None:
    from freezegun import freeze_time

    config = small_window_config(3000, timezone="Pacific/Auckland")
    notes = iter(range(1, 100))
    model = ScriptedModel(responder=flush_aware(flush=flush_write(lambda request: f"- note {next(notes)}\n")))
    events: list[Event] = []
    with freeze_time("2026-11-22 20:00:00"):  # already the 23rd in Auckland
        session = runner_for(model, tmp_path, config, events).open()
        talk(session, 24)
    flushes = [e for e in events if e.kind == "flush"]
    assert len(flushes) >= 3
    log = tmp_path / "workspace" / "memory" / "2026-11-23.md"
    assert log.read_text().splitlines() == [f"- note {n}" for n in range(1, len(flushes) + 1)]


def test_overflow_on_turn_raises_the_providers_overflow_once_and_the_runner_recovers(tmp_path: Path) -> None:
    config = small_window_config(100_000)
    model = ScriptedModel(responder=overflow_on_turn(3, flush_aware(echo)))
    events: list[Event] = []
    session = runner_for(model, tmp_path, config, events).open()
    replies = [session.run_turn_sync(f"message {n} " + "x " * 300).reply for n in range(1, 6)]
    assert all(
        reply is not None and reply.startswith(f"ok: message {n} ") for n, reply in enumerate(replies, 1)
    )
    overflows = [e for e in events if e.kind == "compaction" and getattr(e, "reason", "") == "overflow"]
    assert len(overflows) == 1
    turns_before = [e.kind for e in events[: events.index(overflows[0])]].count("turn")
    assert turns_before == 2  # it happened on the third turn


def test_events_say_which_session_they_belong_to(tmp_path: Path) -> None:
    config = small_window_config(3000)
    events: list[Event] = []
    runner = runner_for(ScriptedModel(responder=flush_aware()), tmp_path, config, events)
    alice, bob = (
        runner.open("agent:main:telegram:direct:alice"),
        runner.open("agent:main:telegram:direct:bob"),
    )
    for turn in range(14):
        for session in (alice, bob):
            session.run_turn_sync(f"turn {turn} from {session.key}: " + "y " * 80)
    for session in (alice, bob):
        mine = [e for e in events if e.session_key == session.key]
        assert {e.kind for e in mine} >= {"turn", "flush", "compaction"}
        assert {e.session_id for e in mine} == {session.entry.session_id}


def test_replay_from_python_reports_records_with_their_session(tmp_path: Path) -> None:
    records: list[dict[str, Any]] = []
    report = run_replay(
        RECORDINGS / "trip-planning.jsonl", tmp_path / "ws", tmp_path / "state", emit=records.append
    )
    assert report.flushes > 0 and report.compactions > 0
    session_ids = {r["sessionId"] for r in records if r["event"] in ("turn", "flush", "compaction")}
    assert len(session_ids) == 1 and None not in session_ids
    assert all(r["sessionKey"] == "agent:main:main" for r in records if r["event"] == "flush")


def test_the_kit_names_are_public() -> None:
    import sessionmem.testing as kit

    assert kit.__all__ == sorted(kit.__all__)
    for name in kit.__all__:
        assert getattr(kit, name) is not None
    with pytest.raises(AttributeError):
        kit.no_such_helper  # noqa: B018
