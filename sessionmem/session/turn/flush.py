"""The pre-compaction memory flush: when it runs, and what the model is told (reference §1.3-§1.6).

Pure: no file or model I/O here. The runner asks :func:`should_flush` before each turn and the
compaction gate asks :func:`cycle_flushed` before every compaction (DESIGN 1); the silent turn itself
goes through the runner's ordinary turn loop with :func:`flush_prompts`.

Differences from OpenClaw, on purpose:
- the threshold uses the effective reserve ``max(reserveTokensFloor, reserveTokens)`` (DESIGN 3), so
  the flush always comes before threshold compaction;
- a window too small for the default reserves gets them scaled (:func:`window_budget`) instead of
  thresholds of 0 that would never flush nor compact; values the user wrote are kept as written (DESIGN 22);
- a flush is recorded against the cycle it *started* in (DESIGN 2), and only once its turn has ended
  (DESIGN 16): ``memoryFlushCompactionCount`` is written then, by the gate
  (:mod:`sessionmem.session.turn.gate`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sessionmem.clock import current_time_line, date_stamp, user_zone, zone_label
from sessionmem.config import CompactionConfig, MemoryFlushConfig, WindowBudget

TARGET_HINT = "Store durable memories only in memory/YYYY-MM-DD.md (create memory/ if needed)."
APPEND_ONLY_HINT = (
    "If memory/YYYY-MM-DD.md already exists, APPEND new content only and do not overwrite existing entries."
)
READ_ONLY_HINT = (
    "Treat workspace bootstrap/reference files such as MEMORY.md, SOUL.md, TOOLS.md, and AGENTS.md as "
    "read-only during this flush; never overwrite, replace, or edit them."
)
NO_REPLY_HINT = "If no user-visible reply is needed, start with NO_REPLY."

DEFAULT_FLUSH_PROMPT = " ".join(
    [
        "Pre-compaction memory flush.",
        TARGET_HINT,
        READ_ONLY_HINT,
        APPEND_ONLY_HINT,
        "Do NOT create timestamped variant files (e.g., YYYY-MM-DD-HHMM.md); always use the canonical "
        "YYYY-MM-DD.md filename.",
        "If nothing to store, reply with NO_REPLY.",
    ]
)
DEFAULT_FLUSH_SYSTEM_PROMPT = " ".join(
    [
        "Pre-compaction memory flush turn.",
        "The session is near auto-compaction; capture durable memories to disk.",
        TARGET_HINT,
        READ_ONLY_HINT,
        APPEND_ONLY_HINT,
        "You may reply, but usually NO_REPLY is correct.",
    ]
)


@dataclass(frozen=True, slots=True)
class FlushDecision:
    """Whether to flush now. ``skipped`` marks a due flush refused by a guardrail (worth an event)."""

    run: bool
    reason: str
    skipped: bool = False


def window_budget(context_window: int, compaction: CompactionConfig) -> WindowBudget:
    """The reserve, soft threshold and kept-recent budget for ``context_window``: values the user wrote
    as written, defaults scaled to a small window (:meth:`~sessionmem.config.CompactionConfig.budget`)."""
    return compaction.budget(context_window)


def flush_threshold(context_window: int, compaction: CompactionConfig) -> int:
    """``contextWindow − reserve − softThresholdTokens`` of the window's budget (0 = never flush)."""
    return window_budget(context_window, compaction).flush_threshold


def compaction_threshold(context_window: int, compaction: CompactionConfig) -> int:
    """Projected tokens at which the runner compacts: ``contextWindow − reserve`` of the window's budget."""
    return window_budget(context_window, compaction).compaction_threshold


def cycle_flushed(entry: Mapping[str, Any] | None) -> bool:
    """True when this compaction cycle already had its flush (``memoryFlushCompactionCount`` equals
    ``compactionCount``, a missing count being 0; an unset flush count means never flushed)."""
    if not entry:
        return False
    flushed = entry.get("memoryFlushCompactionCount")
    if not isinstance(flushed, int) or isinstance(flushed, bool):
        return False
    return flushed == int(entry.get("compactionCount") or 0)


def guard_reason(*, heartbeat: bool, writable: bool, provider_owns_compaction: bool) -> str | None:
    """Why a flush may not run in this session at all, or None."""
    if heartbeat:
        return "heartbeat run"
    if not writable:
        return "workspace is read-only"
    if provider_owns_compaction:
        return "provider owns compaction"
    return None


def should_flush(
    projected: int | None,
    context_window: int,
    compaction: CompactionConfig,
    entry: Mapping[str, Any] | None,
    transcript_bytes: int,
    *,
    budget: WindowBudget | None = None,
    heartbeat: bool = False,
    writable: bool = True,
    provider_owns_compaction: bool = False,
) -> FlushDecision:
    """Decide the pre-turn flush: due by tokens (inclusive threshold) or by transcript growth; once per cycle.

    ``transcript_bytes`` is how much the transcript grew since its latest compaction entry (since the
    session started without one), not the file size: the file only grows, so its size would force the
    flush on the first turn of every cycle once past the limit, and that cycle's turns would then be
    compacted unsaved (the gate sees the cycle already flushed).

    ``budget``: the window's budget when the caller holds it (the session's state keeps one per window),
    else it is computed from ``context_window`` and ``compaction``.
    """
    flush_cfg = compaction.memory_flush
    if not flush_cfg.enabled:
        return FlushDecision(False, "flush disabled")
    if cycle_flushed(entry):
        return FlushDecision(False, "already flushed this compaction cycle")
    threshold = (budget or window_budget(context_window, compaction)).flush_threshold
    force_bytes = flush_cfg.force_flush_transcript_bytes
    if force_bytes > 0 and transcript_bytes >= force_bytes:
        reason = f"transcript grew {transcript_bytes:,} >= {force_bytes:,} bytes since the last compaction"
    elif threshold > 0 and projected is not None and projected >= threshold:
        reason = f"flush threshold {threshold:,} reached"
    else:
        return FlushDecision(False, "below threshold")
    guard = guard_reason(
        heartbeat=heartbeat, writable=writable, provider_owns_compaction=provider_owns_compaction
    )
    if guard is not None:
        return FlushDecision(False, guard, skipped=True)
    return FlushDecision(True, reason)


# ---------------------------------------------------------------------------- prompts and dates


def ensure_hints(text: str) -> str:
    """Append any missing required hint (target, append-only, read-only) and the NO_REPLY hint."""
    out = text.strip()
    for hint in (TARGET_HINT, APPEND_ONLY_HINT, READ_ONLY_HINT):
        if hint not in out:
            out += "\n\n" + hint
    if "NO_REPLY" not in out:
        out += "\n\n" + NO_REPLY_HINT
    return out


@dataclass(frozen=True, slots=True)
class FlushPrompts:
    prompt: str  # the user message of the flush turn
    system_prompt: str  # appended to the session's system prompt for the flush turn
    relative_path: str  # memory/YYYY-MM-DD.md, the only file the flush may write


def flush_prompts(
    cfg: MemoryFlushConfig, now: datetime, timezone_name: str | None, *, folder: str = "memory"
) -> FlushPrompts:
    """The flush turn's prompts with hints ensured, ``YYYY-MM-DD`` replaced by the user's date, and the
    ``Current time:`` line appended to the prompt (unless it already has one).

    ``folder``: where the session's daily logs live (``memory``, or its own ``memory/peers/<chat>`` with
    ``memory.scope: peer``, see :func:`sessionmem.privacy.home_for`); the prompts name the log there."""
    zone = user_zone(timezone_name)
    stamp = date_stamp(now, zone)
    prompt = _dated(ensure_hints((cfg.prompt or "").strip() or DEFAULT_FLUSH_PROMPT), folder, stamp)
    system = _dated(
        ensure_hints((cfg.system_prompt or "").strip() or DEFAULT_FLUSH_SYSTEM_PROMPT), folder, stamp
    )
    if "Current time:" not in prompt:
        prompt += "\n" + current_time_line(now, zone, zone_label(timezone_name))
    return FlushPrompts(prompt=prompt, system_prompt=system, relative_path=f"{folder}/{stamp}.md")


def _dated(text: str, folder: str, stamp: str) -> str:
    if folder != "memory":
        text = text.replace("memory/YYYY-MM-DD", f"{folder}/YYYY-MM-DD").replace(
            "memory/ if", f"{folder}/ if"
        )
    return text.replace("YYYY-MM-DD", stamp)


def workspace_writable(workspace: Path) -> bool:
    """Whether the flush can write its daily log: ``memory/`` (or the nearest folder that exists on the
    way to it, since the writer creates the rest) is writable."""
    target = workspace / "memory"
    while not target.exists():
        if target.parent == target:
            return False
        target = target.parent
    return target.is_dir() and os.access(target, os.W_OK)
