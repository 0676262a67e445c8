"""Flush decision (threshold, once per cycle, guardrails) and the flush prompts, per reference §1.3-§1.6."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from sessionmem.config import CompactionConfig, MemoryFlushConfig
from sessionmem.session.turn.flush import (
    DEFAULT_FLUSH_PROMPT,
    cycle_flushed,
    flush_prompts,
    flush_threshold,
    should_flush,
)


def compaction(window_reserve: int = 0, floor: int = 0, soft: int = 0, **flush: object) -> CompactionConfig:
    return CompactionConfig(
        reserve_tokens=window_reserve,
        reserve_tokens_floor=floor,
        memory_flush=MemoryFlushConfig(soft_threshold_tokens=soft, **flush),
    )


def test_threshold_uses_the_effective_reserve() -> None:
    # reserveTokens 30k above the floor: OpenClaw would use the 20k floor and flush after compacting.
    cfg = compaction(30_000, 20_000, 4_000)
    assert flush_threshold(100_000, cfg) == 100_000 - 30_000 - 4_000


def test_threshold_boundary_is_inclusive() -> None:
    cfg = compaction(0, 10, 5)
    assert should_flush(85, 100, cfg, {}, 0).run
    assert not should_flush(84, 100, cfg, {}, 0).run


def test_no_flush_under_threshold_or_without_tokens() -> None:
    cfg = compaction(0, 20_000, 10_000)
    assert not should_flush(10_000, 100_000, cfg, None, 0).run
    assert not should_flush(None, 100_000, cfg, None, 0).run


def test_reserves_larger_than_the_window_are_scaled_not_left_at_zero() -> None:
    # OpenClaw's formula gives max(0, 100 - 60 - 40) = 0: never flush. The reserve becomes a quarter of
    # the window and the soft threshold an eighth.
    cfg = compaction(0, 60, 40)
    assert flush_threshold(100, cfg) == 100 - 25 - 12
    assert should_flush(63, 100, cfg, {}, 0).run
    assert not should_flush(62, 100, cfg, {}, 0).run


@pytest.mark.parametrize(
    ("entry", "flushed"),
    [
        ({"compactionCount": 3, "memoryFlushCompactionCount": 3}, True),
        ({"compactionCount": 3, "memoryFlushCompactionCount": 2}, False),
        ({"compactionCount": 3}, False),
        ({"memoryFlushCompactionCount": 0}, True),
        (None, False),
    ],
)
def test_once_per_compaction_cycle(entry: dict | None, flushed: bool) -> None:
    assert cycle_flushed(entry) is flushed
    cfg = compaction(0, 10, 5)
    assert should_flush(96, 100, cfg, entry, 0).run is (not flushed)


def test_transcript_growth_forces_a_flush_even_without_tokens() -> None:
    cfg = compaction(0, 20_000, 4_000, force_flush_transcript_bytes=1000)
    decision = should_flush(None, 200_000, cfg, {}, 1000)
    assert decision.run and "transcript grew" in decision.reason
    assert not should_flush(None, 200_000, cfg, {}, 999).run
    off = compaction(0, 20_000, 4_000, force_flush_transcript_bytes=0)
    assert not should_flush(None, 200_000, off, {}, 10**9).run


@pytest.mark.parametrize(
    ("guards", "reason"),
    [
        ({"heartbeat": True}, "heartbeat run"),
        ({"writable": False}, "workspace is read-only"),
        ({"provider_owns_compaction": True}, "provider owns compaction"),
    ],
)
def test_guardrails_skip_a_due_flush_with_a_reason(guards: dict, reason: str) -> None:
    decision = should_flush(96, 100, compaction(0, 10, 5), {}, 0, **guards)
    assert decision == decision.__class__(False, reason, skipped=True)
    # Not due: nothing to report.
    assert not should_flush(1, 100, compaction(0, 10, 5), {}, 0, **guards).skipped


def test_disabled_flush_never_runs() -> None:
    assert not should_flush(10**6, 100, compaction(0, 10, 5, enabled=False), {}, 10**9).run


def test_default_prompts_verbatim_with_date_and_time_in_users_zone() -> None:
    now = datetime(2026, 2, 16, 15, 0, tzinfo=UTC)
    prompts = flush_prompts(MemoryFlushConfig(), now, "America/New_York")
    assert prompts.relative_path == "memory/2026-02-16.md"
    assert prompts.prompt == (
        DEFAULT_FLUSH_PROMPT.replace("YYYY-MM-DD", "2026-02-16")
        + "\nCurrent time: Monday, February 16th, 2026 — 10:00 AM (America/New_York) / 2026-02-16 15:00 UTC"
    )
    assert prompts.prompt.startswith(
        "Pre-compaction memory flush. Store durable memories only in memory/2026-02-16.md (create "
        "memory/ if needed). Treat workspace bootstrap/reference files such as MEMORY.md, SOUL.md, "
        "TOOLS.md, and AGENTS.md as read-only during this flush; never overwrite, replace, or edit "
        "them. If memory/2026-02-16.md already exists, APPEND new content only and do not overwrite "
        "existing entries. Do NOT create timestamped variant files (e.g., 2026-02-16-HHMM.md); always "
        "use the canonical 2026-02-16.md filename. If nothing to store, reply with NO_REPLY."
    )
    assert prompts.system_prompt == (
        "Pre-compaction memory flush turn. The session is near auto-compaction; capture durable "
        "memories to disk. Store durable memories only in memory/2026-02-16.md (create memory/ if "
        "needed). Treat workspace bootstrap/reference files such as MEMORY.md, SOUL.md, TOOLS.md, and "
        "AGENTS.md as read-only during this flush; never overwrite, replace, or edit them. If "
        "memory/2026-02-16.md already exists, APPEND new content only and do not overwrite existing "
        "entries. You may reply, but usually NO_REPLY is correct."
    )


def test_date_is_the_users_not_utc() -> None:
    late_evening_in_la = datetime(2026, 11, 23, 5, 30, tzinfo=UTC)
    assert flush_prompts(MemoryFlushConfig(), late_evening_in_la, "America/Los_Angeles").relative_path == (
        "memory/2026-11-22.md"
    )


def test_custom_prompt_keeps_its_text_and_gains_the_required_hints() -> None:
    now = datetime(2026, 2, 16, 15, 0, tzinfo=UTC)
    prompts = flush_prompts(MemoryFlushConfig(prompt="Write notes.", system_prompt="Flush now."), now, "UTC")
    assert prompts.prompt.startswith("Write notes.")
    for text in (prompts.prompt, prompts.system_prompt):
        assert "memory/2026-02-16.md" in text and "MEMORY.md" in text and "NO_REPLY" in text
        assert "YYYY-MM-DD" not in text
    assert prompts.prompt.count("Current time:") == 1


def test_existing_current_time_line_is_not_duplicated() -> None:
    now = datetime(2026, 2, 16, 15, 0, tzinfo=UTC)
    prompts = flush_prompts(MemoryFlushConfig(prompt="Save. Current time: whenever"), now, "UTC")
    assert prompts.prompt.count("Current time:") == 1


def test_a_workspace_that_does_not_exist_yet_is_writable(tmp_path: Path) -> None:
    from sessionmem.session.turn.flush import workspace_writable

    assert workspace_writable(tmp_path / "new-agent")
    (tmp_path / "file").write_text("x")
    assert not workspace_writable(tmp_path / "file" / "ws")
