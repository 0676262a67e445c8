"""A context window smaller than the default reserves still flushes and compacts: the reserve and the
soft threshold are scaled to the window (at most a quarter and an eighth of it) instead of leaving both
thresholds at 0, where no flush and no compaction would ever run."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionmem.config import CompactionConfig, Config, MemoryFlushConfig
from sessionmem.errors import ConfigError
from sessionmem.model.scripted import ScriptedModel, flush_aware
from sessionmem.session.runner import SessionRunner
from sessionmem.session.turn.flush import compaction_threshold, flush_threshold, window_budget


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


# ---------------------------------------------------------------------------- what the user wrote


def status_of(config: Config, tmp_path: Path) -> str:
    runner = SessionRunner(
        ScriptedModel(responder=flush_aware()),
        config=config,
        workspace=tmp_path / "workspace",
        state_dir=tmp_path / "state",
    )
    return runner.open().run_turn_sync("/status").reply or ""


def seeds_config(window: int, floor: int, soft: int, where: str = "defaults") -> Config:
    agent = {
        "contextTokens": window,
        "compaction": {"reserveTokensFloor": floor, "memoryFlush": {"softThresholdTokens": soft}},
    }
    if where == "defaults":
        return Config.from_dict({"agents": {"defaults": agent}})
    return Config.from_dict({"agents": {"list": [{"id": "main", **agent}]}})


def test_values_the_user_wrote_are_honoured_as_written(tmp_path: Path) -> None:
    # The seeds' formula: flush at contextWindow - reserveTokensFloor - softThresholdTokens
    config = seeds_config(30_000, 20_000, 4_000)
    budget = window_budget(30_000, config.for_agent().compaction)
    assert (budget.flush_threshold, budget.compaction_threshold) == (6_000, 10_000)
    assert not budget.scaled
    status = status_of(config, tmp_path)
    assert "flush at 6,000 · compaction at 10,000" in status
    assert "scaled" not in status


def test_only_defaults_are_scaled_in_a_small_window_and_status_says_so(tmp_path: Path) -> None:
    written = Config.from_dict(
        {
            "agents": {
                "defaults": {
                    "contextTokens": 8000,
                    "compaction": {"memoryFlush": {"softThresholdTokens": 500}},
                }
            }
        }
    )
    budget = window_budget(8000, written.for_agent().compaction)
    # the default 20,000-token reserve is cut to a quarter of the window; the written 500 stays
    assert (budget.reserve, budget.soft_threshold) == (2000, 500)
    assert budget.scaled == ("compaction.reserveTokensFloor", "compaction.reserveTokens")
    status = status_of(written, tmp_path)
    assert "flush at 5,500 · compaction at 6,000" in status
    assert "defaults scaled to this window: compaction.reserveTokensFloor, compaction.reserveTokens" in status


@pytest.mark.parametrize("where", ["defaults", "list"])
def test_a_config_that_leaves_no_room_is_an_error_at_load_naming_the_keys(where: str) -> None:
    with pytest.raises(ConfigError) as caught:
        seeds_config(30_000, 20_000, 12_000, where)
    message = str(caught.value)
    assert "contextTokens 30,000" in message
    assert "compaction.reserveTokensFloor 20,000" in message
    assert "compaction.memoryFlush.softThresholdTokens 12,000" in message
    with pytest.raises(ConfigError, match=r"models\.small\.contextWindow 8,000"):
        Config.from_dict(
            {
                "agents": {
                    "defaults": {
                        "models": {"small": {"contextWindow": 8000}},
                        "compaction": {
                            "reserveTokensFloor": 6000,
                            "memoryFlush": {"softThresholdTokens": 3000},
                        },
                    }
                }
            }
        )


def test_written_values_a_window_found_at_run_time_cannot_hold_are_scaled_and_status_says_so() -> None:
    # A provider stated a 16,385-token window in an overflow error (no config to refuse at load).
    written = seeds_config(200_000, 20_000, 4_000).for_agent().compaction
    budget = window_budget(16_385, written)
    assert (budget.reserve, budget.soft_threshold) == (4_096, 2_048)
    assert budget.scaled == (
        "compaction.reserveTokensFloor",
        "compaction.reserveTokens",
        "compaction.memoryFlush.softThresholdTokens",
    )
    assert budget.forced
