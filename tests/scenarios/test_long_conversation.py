"""A 200-turn conversation in an 8,000-token window: the flush runs exactly once per compaction cycle,
always before that cycle's compaction, writes to today's daily log, and never reaches the user."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from freezegun import freeze_time

from sessionmem.model.base import ModelRequest
from sessionmem.model.scripted import ScriptedModel, count_request_tokens, flush_write
from sessionmem.session.turn.events import CompactionEvent, FlushEvent
from tests.scenarios.harness import (
    FLUSH_MARKER,
    flush_prompt_requests,
    make_runner,
    orphan_tool_messages,
    small_config,
    store_entry,
    transcript_lines,
)

TODAY = "memory/2026-11-22.md"


def conversation_model() -> ScriptedModel:
    cycle = {"n": 0}

    def respond(request: ModelRequest) -> Any:
        if request.purpose == "compaction":
            return "## Decisions\n- project codename BLUEBIRD\n## Open TODOs\nNone"
        if request.purpose == "flush":
            if request.messages[-1].role == "user":
                cycle["n"] += 1
            return flush_write(f"- cycle {cycle['n']}: project codename is BLUEBIRD\n", path=TODAY)(request)
        topic = request.messages[-1].content.split(":")[0]
        return f"Noted about {topic}. " + " ".join(f"detail{i}" for i in range(60))

    return ScriptedModel(responder=respond)


@pytest.mark.parametrize(
    ("reserve", "floor"),
    [(1000, 1000), (2000, 1000), (500, 1500)],  # DESIGN 3: whichever is larger is the one reserve
)
def test_two_hundred_turns_flush_once_per_cycle_before_each_compaction(
    tmp_path: Path, workspace: Path, reserve: int, floor: int
) -> None:
    model = conversation_model()
    config = small_config(window=8000, reserve=reserve, floor=floor, soft=500, keep=1500, timezone="UTC")
    runner, recorder = make_runner(model, tmp_path, workspace, config)
    session = runner.open()
    recorder.check_each_compaction(session)  # the flush's tool pairs stay whole in what is kept
    replies = []
    with freeze_time("2026-11-22 09:00:00", tick=True):
        for turn in range(200):
            text = f"topic {turn}: " + " ".join(f"word{turn}-{i}" for i in range(80))
            replies.append(session.run_turn_sync(text).reply)
            entry = store_entry(runner)
            flushes = [e for e in recorder.events if isinstance(e, FlushEvent)]
            if flushes and flushes[-1].compaction_count == entry["compactionCount"]:
                # Right after a flush: the cycle is recorded as flushed.
                assert entry["memoryFlushCompactionCount"] == entry["compactionCount"]

    flushes = [e for e in recorder.events if isinstance(e, FlushEvent)]
    compactions = [e for e in recorder.events if isinstance(e, CompactionEvent)]
    assert len(compactions) >= 8, "the scenario must run through many compaction cycles"
    # Exactly one flush per cycle, and it comes before the cycle's compaction.
    order = [e.kind for e in recorder.events if e.kind in ("flush", "compaction")]
    assert order[: 2 * len(compactions)] == ["flush", "compaction"] * len(compactions)
    assert [f.compaction_count for f in flushes] == list(range(len(flushes)))
    assert all(c.reason == "threshold" for c in compactions)
    # The model received the flush prompt exactly once per cycle.
    assert len(flush_prompt_requests(model.calls)) == len(flushes)
    assert all(
        FLUSH_MARKER not in m.content for c in model.calls if c.purpose == "turn" for m in c.messages[-1:]
    )
    # What the user can check on disk.
    daily = (workspace / TODAY).read_text()
    assert all(f"- cycle {n}: project codename is BLUEBIRD" in daily for n in range(1, len(flushes) + 1))
    entry = store_entry(runner)
    assert entry["compactionCount"] == len(compactions)
    lines = transcript_lines(session.transcript.path)
    assert len([line for line in lines if line["type"] == "compaction"]) == len(compactions)
    # The flush never reached the user, and no request ever went over the window.
    assert all(r and r.startswith("Noted about topic") for r in replies)
    assert max(count_request_tokens(c) for c in model.calls) <= 8000
    assert all(orphan_tool_messages(c) == [] for c in model.calls)
    assert recorder.kept_problems == []
