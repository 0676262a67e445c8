"""Replay a recorded conversation (transcripts/billing-migration.jsonl: five days, 22 user turns) through
the runner in a small window, at the recorded times: every flush writes to the daily log of the day it
runs on, flushes and compactions alternate, and the user gets the recorded answers."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from freezegun import freeze_time

from sessionmem.model.base import ModelRequest
from sessionmem.model.scripted import ScriptedModel, count_request_tokens, flush_write
from sessionmem.session.stores.transcript import message_from_dict
from sessionmem.session.stores.transcript_folder import read_messages
from sessionmem.session.turn.events import FlushEvent
from tests.scenarios.harness import make_runner, small_config

RECORDING = Path(__file__).resolve().parents[2] / "transcripts" / "billing-migration.jsonl"


def recorded_turns() -> list[tuple[str, str, str]]:
    """(timestamp, user text, the assistant's last text reply of that turn)."""
    turns: list[tuple[str, str, str]] = []
    for _, entry in read_messages(RECORDING):
        message = message_from_dict(entry["message"])
        if message is None:
            continue
        if message.role == "user":
            turns.append((entry["timestamp"], message.content, ""))
        elif message.role == "assistant" and message.content and turns:
            stamp, user, _ = turns[-1]
            turns[-1] = (stamp, user, message.content)
    return turns


def replay_model(answers: dict[str, str]) -> ScriptedModel:
    def respond(request: ModelRequest) -> Any:
        if request.purpose == "compaction":
            return "## Decisions\n- migrate billing off LedgerLoop\n## Open TODOs\nNone"
        if request.purpose == "flush":
            users = [
                m.content for m in request.messages if m.role == "user" and "memory flush" not in m.content
            ]
            note = f"- {users[-1][:100]}\n" if users else "- (nothing new)\n"
            return flush_write(note)(request)  # today's log: the day the replayed message was sent
        question = next(m.content for m in reversed(request.messages) if m.role == "user")
        return answers[question]

    return ScriptedModel(responder=respond)


def test_replayed_conversation_flushes_into_each_days_log(tmp_path: Path, workspace: Path) -> None:
    turns = recorded_turns()
    assert len(turns) == 22
    model = replay_model({user: answer for _, user, answer in turns})
    config = small_config(window=2000, reserve=300, floor=300, soft=200, keep=300, timezone="UTC")
    runner, recorder = make_runner(model, tmp_path, workspace, config)
    session = runner.open()
    replies = []
    for stamp, user, _ in turns:
        with freeze_time(stamp):
            replies.append(session.run_turn_sync(user).reply)
    assert replies == [answer or None for _, _, answer in turns]
    flushes = [e for e in recorder.events if isinstance(e, FlushEvent)]
    compactions = recorder.kinds("compaction")
    assert len(compactions) >= 2
    order = recorder.kinds("flush", "compaction")
    assert order[: 2 * len(compactions)] == ["flush", "compaction"] * len(compactions)
    for flush in flushes:  # the daily log of the day the flush ran, in the user's zone
        day = datetime.fromtimestamp(flush.timestamp / 1000, UTC).strftime("%Y-%m-%d")
        assert flush.path == f"memory/{day}.md"
        assert (workspace / flush.path).is_file()
    recorded_days = {stamp[:10] for stamp, _, _ in turns}
    written = {p.stem for p in (workspace / "memory").glob("*.md")}
    assert len(written) >= 2 and written <= recorded_days  # flushes on different days, each its own log
    assert max(count_request_tokens(c) for c in model.calls) <= 2000
