"""A context window smaller than the default reserves still flushes and compacts: the reserve and the
soft threshold are scaled to the window (at most a quarter and an eighth of it) instead of leaving both
thresholds at 0, where no flush and no compaction would ever run."""

from __future__ import annotations

from pathlib import Path

from sessionmem.config import CompactionConfig, Config, MemoryFlushConfig
from sessionmem.model.scripted import ScriptedModel, flush_aware
from sessionmem.session.flush import compaction_threshold, flush_threshold, window_budget
from sessionmem.session.runner import SessionRunner


def test_a_window_the_default_reserves_would_swallow_gets_a_scaled_budget() -> None:
    budget = window_budget(3000, CompactionConfig())
    assert (budget.reserve, budget.soft_threshold) == (750, 375)
    assert (budget.compaction_threshold, budget.flush_threshold) == (2250, 1875)
    assert budget.keep_recent == 1125 and budget.scaled
    assert compaction_threshold(3000, CompactionConfig()) == 2250
    assert flush_threshold(3000, CompactionConfig()) == 1875


def test_a_window_with_room_for_its_reserves_keeps_them_as_configured() -> None:
    budget = window_budget(200_000, CompactionConfig())
    assert (budget.reserve, budget.soft_threshold, budget.keep_recent) == (20_000, 4_000, 20_000)
    assert (budget.compaction_threshold, budget.flush_threshold) == (180_000, 176_000)
    assert not budget.scaled
    # smaller configured values are kept when scaling: only what is over its share shrinks
    small_soft = CompactionConfig(memory_flush=MemoryFlushConfig(soft_threshold_tokens=100))
    assert window_budget(3000, small_soft).soft_threshold == 100


def test_the_readme_window_of_3000_tokens_flushes_then_compacts(tmp_path: Path) -> None:
    config = Config.from_dict({"agents": {"defaults": {"contextTokens": 3000}}})
    events: list[str] = []
    runner = SessionRunner(
        ScriptedModel(responder=flush_aware()),
        config=config,
        workspace=tmp_path / "workspace",
        state_dir=tmp_path / "state",
        on_event=lambda event: events.append(event.kind),
    )
    session = runner.open()
    for turn in range(12):
        session.run_turn_sync(f"Note {turn}: " + " ".join(f"fact{turn}-{i}" for i in range(60)))
    assert "flush" in events and "compaction" in events
    assert events.index("flush") < events.index("compaction")
    assert session.projection().tokens < 2250
