"""What the scripted demo and the replay share: their record type, the configuration they run under
(defaults with a small context window), and how their scripted agents find the flush's target file.

A small window makes the silent flush and compaction happen within a short scripted conversation.
Daily logs are not preloaded into the system prompt, so a new session can only know an early fact by
searching memory; the post-compaction index sync is off because both runs sync themselves."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sessionmem.config import Config, MemorySearchConfig, merge
from sessionmem.model.base import ModelRequest

__all__ = ["Record", "RecordSink", "flush_write_target", "small_window_config"]

Record = dict[str, Any]
RecordSink = Callable[[Record], None]


def small_window_config(
    context_window: int,
    *,
    reserve_tokens: int,
    keep_recent_tokens: int,
    soft_threshold_tokens: int,
    memory_search: MemorySearchConfig | None = None,
    timezone: str | None = None,
) -> Config:
    """Defaults for every agent with ``context_window`` tokens: compaction at ``context_window -
    reserve_tokens``, the flush ``soft_threshold_tokens`` earlier; ``memory_search`` defaults to
    keyword-only (provider ``none``)."""
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


def flush_write_target(request: ModelRequest) -> str | None:
    """The daily log the flush may write: the ``path`` enum of its ``write`` tool."""
    for schema in request.tools:
        function = schema.get("function", {})
        if function.get("name") == "write":
            allowed = function.get("parameters", {}).get("properties", {}).get("path", {}).get("enum")
            if allowed:
                return str(allowed[0])
    return None
