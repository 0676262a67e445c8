"""Many compaction cycles ending in every way a cycle can end: the threshold, a provider context
overflow, a manual ``/compact`` and a ``/new`` rotation, mixed. Whatever the ending, each cycle has
exactly one flush, it comes before the cycle's compaction or rotation, and sessions.json records it
against the cycle it ran in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from freezegun import freeze_time

from sessionmem.model.scripted import ScriptedModel, count_request_tokens, flush_aware
from sessionmem.session.turn.events import CompactionEvent, Event, FlushEvent, NewSessionEvent
from tests.scenarios.harness import make_runner, small_config, store_entry

ENDINGS = ["threshold", "manual", "overflow", "new", "threshold", "overflow", "new", "manual", "threshold"]
ENDINGS += ["new", "overflow", "manual", "threshold", "new"]


def words(n: int, tag: str) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def test_every_cycle_flushes_once_before_it_ends_whatever_ends_it(tmp_path: Path, workspace: Path) -> None:
    model = ScriptedModel(responder=flush_aware(lambda r: "Noted. " + words(50, "d")))
    runner, recorder = make_runner(model, tmp_path, workspace, small_config(window=8000, keep=1500))
    session = runner.open()
    flush_records: list[tuple[str, int, Any]] = []  # sessions.json right after each flush

    def on_event(event: Event) -> None:
        recorder(event)
        if isinstance(event, FlushEvent):
            entry = store_entry(runner)
            flush_records.append(
                (entry["sessionId"], entry["compactionCount"], entry.get("memoryFlushCompactionCount"))
            )
        if isinstance(event, CompactionEvent) and event.reason == "overflow":
            model.context_window = None  # the provider accepts the compacted prompt

    runner.on_event = on_event
    turn = 0

    def say(text: str) -> None:
        nonlocal turn
        turn += 1
        session.run_turn_sync(text)

    cycles: list[tuple[str, int]] = []
    per_cycle: list[list[Event]] = []
    with freeze_time("2026-11-22 09:00:00", tick=True):
        for ending in ENDINGS:
            cycle = (session.entry.session_id, session.entry.compaction_count)
            cycles.append(cycle)
            seen = len(recorder.events)
            if ending == "threshold":
                while not any(isinstance(e, CompactionEvent) for e in recorder.events[seen:]):
                    assert turn < 400, "the threshold was never reached"
                    say(f"topic {turn}: " + words(80, f"w{turn}-"))
            else:
                for _ in range(5):  # enough that a compaction has something to summarise
                    say(f"topic {turn}: " + words(80, f"w{turn}-"))
                if ending == "manual":
                    say("/compact keep the decisions")
                elif ending == "new":
                    say("/new")
                else:  # the provider refuses the next prompt: it is bigger than it accepts
                    model.context_window = count_request_tokens(model.calls[-1]) + 600
                    say("a long paste: " + words(700, "p"))
                    assert model.context_window is None, "the overflow did not compact"
            per_cycle.append(
                [
                    e
                    for e in recorder.events[seen:]
                    if isinstance(e, (FlushEvent, CompactionEvent, NewSessionEvent))
                ]
            )
            if ending != "new":  # right after a compaction: the finished cycle is recorded as flushed
                entry = store_entry(runner)
                assert (entry["sessionId"], entry["compactionCount"]) == (cycle[0], cycle[1] + 1)
                assert entry["memoryFlushCompactionCount"] == cycle[1]

    ended = []
    for (session_id, count), ending, events in zip(cycles, ENDINGS, per_cycle, strict=True):
        kinds = [e.kind for e in events]
        assert kinds == ["flush", "new" if ending == "new" else "compaction"], (session_id, count, kinds)
        flush, end = events
        assert isinstance(flush, FlushEvent) and flush.compaction_count == count and flush.error is None
        if isinstance(end, CompactionEvent):
            assert end.reason == ending and end.compaction_count == count + 1
        else:
            assert isinstance(end, NewSessionEvent) and end.flushed and end.previous_session_id == session_id
        ended.append(ending)
    assert set(ended) == {"threshold", "overflow", "manual", "new"}
    # sessions.json at each flush: the flush is recorded against the cycle it ran in.
    assert flush_records == [(sid, count, count) for sid, count in cycles]
    assert sum(isinstance(e, FlushEvent) for e in recorder.events) == len(ENDINGS)
    assert len({sid for sid, _ in cycles} | {session.entry.session_id}) == ENDINGS.count("new") + 1
