"""Which embedder an index uses: chosen from the config at first need, and replaced once by
``memorySearch.fallback`` when the configured provider fails at runtime (reference §8)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from sessionmem.errors import EmbedderUnavailable
from sessionmem.memory.embed.embedder import EmbedderSelection

if TYPE_CHECKING:
    from sessionmem.config import MemorySearchConfig

__all__ = ["can_fall_back", "fallback_selection", "select_from_config"]

log = logging.getLogger(__name__)


def select_from_config(settings: MemorySearchConfig, env: Mapping[str, str]) -> EmbedderSelection:
    """The provider ``settings`` ask for (API keys looked up in ``env``); keyword-only when the
    embedding providers are not installed."""
    try:
        from sessionmem.memory.embed.choice import select_embedder
    except ImportError:
        reason = "embedding providers are not available (sessionmem.memory.embed.choice is missing)"
        return EmbedderSelection(None, settings.provider, reason=reason)
    selection: EmbedderSelection = select_embedder(settings, env=env)
    return selection


def can_fall_back(settings: MemorySearchConfig, current: EmbedderSelection | None) -> bool:
    """A fallback is configured and ``current`` is a configured embedder, not already a fallback."""
    return (
        settings.fallback != "none"
        and current is not None
        and current.embedder is not None
        and current.fallback_from is None
    )


def fallback_selection(
    settings: MemorySearchConfig,
    env: Mapping[str, str],
    current: EmbedderSelection,
    error: Exception,
    *,
    agent_id: str,
) -> EmbedderSelection | None:
    """The fallback that replaces ``current`` after ``error`` (recording what failed and why), or None
    when it cannot be created (logged)."""
    if current.embedder is None:  # keyword-only: nothing failed that a fallback could replace
        return None
    try:
        from sessionmem.memory.embed.choice import create_fallback

        embedder = create_fallback(settings, env, current.embedder)
    except (ImportError, EmbedderUnavailable) as exc:
        log.warning("memory index %s: fallback %s unavailable: %s", agent_id, settings.fallback, exc)
        return None
    if embedder is None:
        return None
    return EmbedderSelection(embedder, current.requested, fallback_from=current.actual, reason=str(error))
