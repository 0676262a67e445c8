"""What scripted runs share (the demo, the replay, and tests through :mod:`sessionmem.testing`): their
record type and the configuration they run under, defaults with a small context window.

A small window makes the silent flush and compaction happen within a short scripted conversation.
Daily logs are not preloaded into the system prompt, so a new session can only know an early fact by
searching memory; the post-compaction index sync is off because scripted runs sync themselves."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sessionmem.config import Config, MemorySearchConfig, merge

__all__ = ["Record", "RecordSink", "small_window_config"]

Record = dict[str, Any]
RecordSink = Callable[[Record], None]


def small_window_config(
    context_window: int = 3000,
    *,
    reserve_tokens: int | None = None,
    keep_recent_tokens: int | None = None,
    soft_threshold_tokens: int | None = None,
    memory_search: MemorySearchConfig | None = None,
    timezone: str | None = None,
) -> Config:
    """Defaults for every agent with a ``context_window`` of tokens whose thresholds come within a few
    turns: compaction at ``context_window − reserve_tokens`` (default: a fifth of the window), the flush
    ``soft_threshold_tokens`` earlier (a tenth), ``keep_recent_tokens`` kept verbatim (a fifth).
    ``memory_search`` defaults to keyword-only (provider ``none``); ``timezone`` is the userTimezone."""
    reserve_tokens = max(1, context_window // 5) if reserve_tokens is None else reserve_tokens
    keep_recent_tokens = max(1, context_window // 5) if keep_recent_tokens is None else keep_recent_tokens
    if soft_threshold_tokens is None:
        soft_threshold_tokens = max(1, context_window // 10)
    search = memory_search or MemorySearchConfig(provider="none")
    defaults: dict[str, Any] = {
        "contextTokens": context_window,
        "loadDailyLogs": False,
        "compaction": {
            "reserveTokens": reserve_tokens,
            "reserveTokensFloor": reserve_tokens,
            "keepRecentTokens": keep_recent_tokens,
            "postIndexSync": "off",
            "memoryFlush": {"softThresholdTokens": soft_threshold_tokens},
        },
        "memorySearch": search.model_dump(by_alias=True),
    }
    if timezone:
        defaults["userTimezone"] = timezone
    return merge(Config(), {"agents": {"defaults": defaults}})
