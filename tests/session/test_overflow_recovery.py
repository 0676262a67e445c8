"""A provider context overflow always makes room: the model's real window may be far below the configured
one (and below ``keepRecentTokens``), and one huge tool result may fill it on its own. Recovery first
compacts keeping a quarter of the context verbatim, then, as a last resort, folds everything into the
summary; the session never stays stuck on "nothing to compact"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sessionmem.config import Config
from sessionmem.errors import ContextWindowExceeded
from sessionmem.messages import ToolCall
from sessionmem.model.base import ModelRequest
from sessionmem.model.scripted import ScriptedModel, echo, flush_aware
from sessionmem.session.turn.events import CompactionEvent
from sessionmem.tools.define import tool
from tests.scenarios.harness import make_runner, transcript_lines

REAL_WINDOW = 16_000  # the provider's; the config says 200,000 and keepRecentTokens is 20,000


def paragraph(turn: int, words: int = 600) -> str:
    return f"Part {turn}: " + " ".join(f"item{turn}x{i}" for i in range(words))


def test_a_model_whose_real_window_is_below_keep_recent_tokens_keeps_answering(
    tmp_path: Path, workspace: Path
) -> None:
    model = ScriptedModel(responder=flush_aware(echo), context_window=REAL_WINDOW)
    runner, recorder = make_runner(model, tmp_path, workspace, Config())
    session = runner.open()
    for turn in range(24):
        text = paragraph(turn)
        assert session.run_turn_sync(text).reply == f"ok: {text}"
    overflows = [e for e in recorder.events if isinstance(e, CompactionEvent) and e.reason == "overflow"]
    assert len(overflows) >= 2  # it recovered, and recovered again when the context grew back
    assert all(e.tokens_after < REAL_WINDOW for e in overflows)
    assert session.entry.compaction_count == len(overflows)


@tool
def read_export(name: str) -> str:
    """Read a data export."""
    return "row;" * 250_000  # about a megabyte


def test_a_huge_tool_result_is_folded_into_the_summary_and_the_session_goes_on(
    tmp_path: Path, workspace: Path
) -> None:
    def agent(request: ModelRequest) -> Any:
        last = request.messages[-1]
        if last.role == "user" and "export" in last.content:
            return ToolCall("c1", "read_export", {"name": "orders"})
        if last.role == "tool":
            return "The export is large."
        return echo(request)

    model = ScriptedModel(responder=flush_aware(agent), context_window=REAL_WINDOW)
    runner, recorder = make_runner(model, tmp_path, workspace, Config(), tools=[read_export])
    session = runner.open()
    session.run_turn_sync("hello there")
    answer = session.run_turn_sync("please read the orders export")
    assert answer.reply is not None
    assert session.run_turn_sync("and now?").reply == "ok: and now?"
    assert session.run_turn_sync("still there?").reply == "ok: still there?"
    compactions = [e for e in recorder.events if isinstance(e, CompactionEvent)]
    assert compactions and compactions[-1].first_kept_entry_id is None  # everything was folded
    summary_requests = [c for c in model.calls if c.purpose == "compaction"]
    assert all(len(c.messages[-1].content) < 40_000 for c in summary_requests)  # the result was truncated
    kinds = [
        line["message"]["role"] for line in transcript_lines(session.transcript.path) if "message" in line
    ]
    assert kinds.count("toolResult") == 1  # the result is still on record in the transcript


def test_a_message_that_alone_is_over_the_window_gets_a_clear_error_and_is_not_kept(
    tmp_path: Path, workspace: Path
) -> None:
    model = ScriptedModel(responder=flush_aware(echo), context_window=2_000)
    runner, _ = make_runner(model, tmp_path, workspace, Config())
    session = runner.open()
    assert session.run_turn_sync("hi").reply == "ok: hi"
    with pytest.raises(ContextWindowExceeded, match="does not fit"):
        session.run_turn_sync(paragraph(1, words=3_000))
    assert session.run_turn_sync("short again").reply == "ok: short again"
    users = [
        line["message"]["content"]
        for line in transcript_lines(session.transcript.path)
        if line.get("message", {}).get("role") == "user"
    ]
    assert not any("Part 1" in str(text) for text in users)
