"""The size-forced flush (``forceFlushTranscriptBytes``) over many compaction cycles: it counts the
transcript's growth since the last compaction, so every cycle flushes once its own turns add up to the
limit (never on its first turn just because the file is long), and each compaction is preceded by the
flush of its own cycle."""

from __future__ import annotations

from pathlib import Path

from sessionmem.model.scripted import ScriptedModel, flush_aware
from sessionmem.session.turn.events import CompactionEvent, FlushEvent
from tests.scenarios.harness import make_runner, small_config

FORCE_BYTES = 6000


def growth_since_compaction(path: Path) -> int:
    """Bytes of the transcript after the line of its latest compaction entry (all of it without one)."""
    raw = path.read_bytes()
    end = 0
    offset = 0
    for line in raw.split(b"\n"):
        offset += len(line) + 1
        if b'"type":"compaction"' in line:
            end = offset
    return len(raw) - end


def growth_at_latest_flush(path: Path) -> int:
    """Bytes of the transcript between its latest compaction entry before the latest flush and that
    flush's first line: the growth the flush was decided on (it runs after the reply of the turn that
    reached the limit, so that turn counts)."""
    growth = end = offset = 0
    in_flush = False
    for line in path.read_bytes().split(b"\n"):
        if b'"kind":"memory_flush"' in line:
            if not in_flush:
                growth = offset - end
            in_flush = True
        else:
            in_flush = False
        offset += len(line) + 1
        if b'"type":"compaction"' in line:
            end = offset
    return growth


def test_size_forced_flush_waits_for_each_cycles_own_growth(tmp_path: Path, workspace: Path) -> None:
    model = ScriptedModel(responder=flush_aware(lambda r: "Noted. " + " ".join(f"d{i}" for i in range(40))))
    config = small_config(
        window=6000,
        compaction={
            "reserveTokens": 1000,
            "reserveTokensFloor": 1000,
            "keepRecentTokens": 800,
            "memoryFlush": {"softThresholdTokens": 500, "forceFlushTranscriptBytes": FORCE_BYTES},
        },
    )
    runner, recorder = make_runner(model, tmp_path, workspace, config)
    session = runner.open()
    flush_turns: list[tuple[int, int]] = []  # (turn, growth since the last compaction when it flushed)
    compaction_turns: list[int] = []
    for turn in range(60):
        seen = len(recorder.events)
        session.run_turn_sync(f"topic {turn}: " + " ".join(f"w{turn}-{i}" for i in range(60)))
        for event in recorder.events[seen:]:
            if isinstance(event, FlushEvent):
                flush_turns.append((turn, growth_at_latest_flush(session.transcript.path)))
            elif isinstance(event, CompactionEvent):
                compaction_turns.append(turn)

    flushes = [e for e in recorder.events if isinstance(e, FlushEvent)]
    compactions = [e for e in recorder.events if isinstance(e, CompactionEvent)]
    assert len(compactions) >= 5, "the scenario must run through many compaction cycles"
    # Each flush was forced by its own cycle's growth, not by the file's total size.
    assert all("transcript grew" in f.reason for f in flushes)
    assert all(growth >= FORCE_BYTES for _, growth in flush_turns), flush_turns
    # ... so it never lands on the first turn after a compaction.
    assert not {turn for turn, _ in flush_turns} & {turn + 1 for turn in compaction_turns}
    # Every compaction is preceded by the flush of its own cycle.
    order = [e.kind for e in recorder.events if e.kind in ("flush", "compaction")]
    assert order[: 2 * len(compactions)] == ["flush", "compaction"] * len(compactions)
    assert [f.compaction_count for f in flushes[: len(compactions)]] == list(range(len(compactions)))
    assert [c.compaction_count for c in compactions] == list(range(1, len(compactions) + 1))
