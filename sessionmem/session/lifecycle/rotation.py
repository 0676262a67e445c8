"""Session rotation (``/new``, ``/reset``, daily and idle resets) and the hooks around it.

A rotation ends the current session and starts a new one under the same session key. In order:

1. the compaction gate: the silent flush runs first when this compaction cycle had none (DESIGN 1),
   so what the model knew is saved before the context goes away;
2. the ``command:new`` / ``command:reset`` hooks, awaited, with ``transcript_path`` pointing at the
   *live* transcript (DESIGN 6), and ``transcript`` the transcript itself (a database store has no
   file): the bundled session-memory hook writes ``memory/peers/<chat>/<date>-<slug>.md`` from it
   (the chat's own folder: DESIGN 14), its slug asked of ``compaction.model`` when one is set, else of
   the session's model;
3. the store names the new sessionId (one atomic update: the rotation's commit point); the counters
   start again: ``compactionCount`` 0, no flush record, no token figures;
4. the old transcript is archived as ``<file>.reset.<ISO time with ':' → '-'>``, and the new one opened;
5. ``session:end`` (old) and ``session:start`` (new) hooks, then a ``new`` event for ``on_event``.

A process killed at any step loses nothing: before step 3 the session goes on with its conversation (a
``/new`` typed again redoes the rotation), after it the new session starts and the old conversation is
in its transcript under its own session id, archived unless the kill came between steps 3 and 4.

A session that :meth:`~sessionmem.session.runner.SessionRunner.open` creates (no store entry yet)
gets its ``session:start`` (reason ``created``) at the start of its first turn
(:func:`~sessionmem.session.turn.announce.announce_created`).

Freshness (reference §3.3): with ``session.reset.mode`` ``daily`` a session last active before the most
recent ``atHour`` (default 4, in the user's time zone) is stale; with ``idle`` (or ``idleMinutes`` set in
daily mode) one idle longer than ``idleMinutes`` is. A stale session is rotated at the start of the next
turn like ``/new``, flush and hook included; OpenClaw skips both there and loses the conversation.
A session without any conversation is never stale, and ending one writes no memory file (nothing to save).

Hooks fail open (:mod:`sessionmem.session.turn.announce`): an error in one is logged, reported to ``on_event``
as a ``hook_error`` event (for a rotation also in the ``new`` event), and never costs the turn.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from sessionmem.clock import user_zone
from sessionmem.config import ResetConfig
from sessionmem.messages import now_ms
from sessionmem.session.stores.entry import SessionEntry
from sessionmem.session.turn.announce import emit
from sessionmem.session.turn.events import (
    CommandEvent,
    MemoryWriteEvent,
    NewSessionEvent,
    SessionEndEvent,
    SessionStartEvent,
)
from sessionmem.session.turn.gate import compact_through_gate
from sessionmem.session.turn.state import SessionState

if TYPE_CHECKING:
    from sessionmem.hooks import HookOutcome

log = logging.getLogger(__name__)

RotationReason = Literal["new", "reset", "daily", "idle"]
DEFAULT_IDLE_MINUTES = 60  # idle mode without idleMinutes (OpenClaw's default)

# Per-session figures that must not leak into the next session (reference §3.3).
RESET_FIELDS = (
    "compactionCount",
    "memoryFlushAt",
    "memoryFlushCompactionCount",
    "memoryFlushContextHash",
    "totalTokens",
    "totalTokensFresh",
    "inputTokens",
    "outputTokens",
    "cacheRead",
    "cacheWrite",
    "estimatedCostUsd",
    "contextTokens",
    "cliSessionIds",
    "cliSessionBindings",
    "claudeCliSessionId",
    "systemSent",
    "abortedLastRun",
)


@dataclass(frozen=True, slots=True)
class Rotation:
    """What a rotation did."""

    reason: RotationReason
    previous_session_id: str
    session_id: str
    archived_path: Path | None  # the old transcript's new name
    memory_file: Path | None  # written by the session-memory hook
    flushed: bool  # the gate ran the silent flush first
    hook_errors: tuple[str, ...] = ()

    def reply(self) -> str:
        """The confirmation shown for a bare ``/new`` or ``/reset``."""
        verb = "Session reset" if self.reason == "reset" else "New session started"
        parts = [f"{verb} · session id {self.session_id}"]
        if self.memory_file is not None:
            parts.append(f"saved {self.memory_file.parent.name}/{self.memory_file.name}")
        return " · ".join(parts)


# ---------------------------------------------------------------------------- freshness (pure)


def daily_boundary(now: datetime, at_hour: int, zone: tzinfo) -> datetime:
    """The most recent ``at_hour``:00 in ``zone`` at or before ``now`` (naive ``now`` is UTC)."""
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    local = now.astimezone(zone)
    boundary = local.replace(hour=at_hour, minute=0, second=0, microsecond=0)
    if boundary > local:
        boundary = boundary - timedelta(days=1)  # wall-clock arithmetic: same hour the day before
    return boundary


def stale_reason_at(
    updated_at_ms: int | None, now: datetime, cfg: ResetConfig, zone: tzinfo
) -> Literal["daily", "idle"] | None:
    """Why a session last active at ``updated_at_ms`` is stale at ``now``, or None when it is fresh.

    ``daily``: active before the latest ``atHour`` boundary. ``idle``: inactive longer than
    ``idleMinutes`` (checked in idle mode, and in daily mode when ``idleMinutes`` is set; whichever
    expires first wins).
    """
    if cfg.mode == "off" or not updated_at_ms:
        return None
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    now_ms_value = int(now.timestamp() * 1000)
    if cfg.mode == "daily":
        boundary_ms = int(daily_boundary(now, cfg.at_hour, zone).timestamp() * 1000)
        if updated_at_ms < boundary_ms:
            return "daily"
    idle = cfg.idle_minutes
    if cfg.mode == "idle" and idle is None:
        idle = DEFAULT_IDLE_MINUTES
    if idle is not None and now_ms_value - updated_at_ms > idle * 60_000:
        return "idle"
    return None


def has_conversation(state: SessionState) -> bool:
    """Whether the session holds anything worth saving (a user or assistant message, or a summary)."""
    return any(message.role in ("user", "assistant") for _, message in state.context)


def stale_reason(state: SessionState) -> Literal["daily", "idle"] | None:
    """Whether the session must rotate before its next turn (reads updatedAt from the store)."""
    runner = state.runner
    cfg = runner.config.session.reset
    if cfg.mode == "off" or not has_conversation(state):
        return None
    stored = runner.store.get(state.key)
    updated_at = (stored or state.entry).updated_at
    return stale_reason_at(updated_at, datetime.now(UTC), cfg, user_zone(runner.agent.user_timezone))


# ---------------------------------------------------------------------------- rotation pieces


def rotated_entry(current: SessionEntry, session_id: str, session_file: str | Path | None) -> SessionEntry:
    """The store entry of the new session: identity and overrides kept, counters reset."""
    data = {k: v for k, v in current.to_json_dict().items() if k not in RESET_FIELDS}
    data.update(sessionId=session_id, updatedAt=now_ms(), compactionCount=0)
    data.pop("sessionFile", None)  # the old transcript's; a backend without files records none
    if session_file is not None:
        data["sessionFile"] = str(session_file)
    return SessionEntry.model_validate(data)


def _memory_file(outcomes: list[HookOutcome], workspace: Path) -> Path | None:
    for outcome in outcomes:
        result = outcome.result
        if outcome.ok and isinstance(result, Path) and result.is_file():
            try:
                result.resolve().relative_to(workspace.resolve())
            except ValueError:
                continue
            return result
    return None


# ---------------------------------------------------------------------------- rotate


async def rotate(
    state: SessionState, reason: RotationReason, *, command_source: str | None = None
) -> Rotation:
    """End the session's current conversation and start a new one (see the module docstring).

    ``state`` is updated in place: afterwards it has the new transcript, entry and an empty context.
    """
    runner = state.runner
    conversation = has_conversation(state)
    flushed = False
    if conversation:
        flushed = (await compact_through_gate(state, reason)).flushed

    store = runner.store
    previous = state.entry
    old_transcript = state.transcript
    new_id = str(uuid.uuid4())
    new_file = store.new_session_file(new_id)
    source = command_source or runner.command_source or reason
    outcomes: list[HookOutcome] = []
    if conversation:
        command = CommandEvent(
            session_key=state.key, kind="command_reset" if reason == "reset" else "command_new", reason=reason
        )
        outcomes = await emit(
            state,
            command,
            previous_session_entry=previous.to_json_dict(),
            session_entry={"sessionId": new_id, "sessionFile": new_file},
            transcript_path=old_transcript.path,
            transcript=old_transcript,
            command_source=source,
        )
    memory_file = _memory_file(outcomes, runner.workspace)

    # Trigger: the process is killed between archiving the old transcript and updating the store. Why:
    # the store would still name the old session, whose transcript is gone: reopened, it would start an
    # empty transcript under the old id, the conversation left only in the archive. Outcome: the store
    # names the new session first; a kill before the archive leaves the old transcript under its own
    # name, the conversation still whole and found by the memory index, the new session started.
    entry = store.update(state.key, lambda current: rotated_entry(current or previous, new_id, new_file))
    assert entry is not None
    try:
        archived = store.archive_transcript(old_transcript, datetime.now(UTC))
    except OSError as exc:  # the new session must still start; the old file simply keeps its name
        log.warning("could not archive transcript %s: %s", old_transcript.path, exc)
        archived = None
    # A fresh context, token caches and system prompt (MEMORY.md and daily logs may have changed).
    state.attach(store.open_transcript(state.key, entry, cwd=runner.workspace), entry)
    # A new memory file, or an archive (searched as sessions/<file>.reset.<ts> once the index moves the
    # old transcript's rows to it): either way the memory index is due for a sync.
    if (memory_file is not None or archived is not None) and runner.memory_index is not None:
        runner.memory_index.mark_dirty()

    end = SessionEndEvent(
        session_key=state.key, session_id=previous.session_id, reason=reason, next_session_id=new_id
    )
    ended = await emit(
        state,
        end,
        session_entry=previous.to_json_dict(),
        transcript_path=archived,
        transcript=old_transcript,
        command_source=source,
    )
    start = SessionStartEvent(session_key=state.key, reason=reason, resumed_from=previous.session_id)
    started = await emit(
        state,
        start,
        session_entry=entry.to_json_dict(),
        previous_session_entry=previous.to_json_dict(),
        transcript_path=state.transcript.path,
        command_source=source,
    )
    errors = tuple(o.error for o in (*outcomes, *ended, *started) if not o.ok and o.error)
    rotation = Rotation(reason, previous.session_id, new_id, archived, memory_file, flushed, errors)
    if memory_file is not None:
        rel = memory_file.resolve().relative_to(runner.workspace.resolve()).as_posix()
        chars = len(memory_file.read_text(encoding="utf-8"))
        written = MemoryWriteEvent(  # the ended session's conversation, saved
            session_key=state.key, session_id=previous.session_id, path=rel, mode="create", chars=chars
        )
        await emit(state, written)
    await emit(
        state,
        NewSessionEvent(
            session_key=state.key,
            reason=reason,
            previous_session_id=previous.session_id,
            session_id=new_id,
            archived_path=str(archived) if archived else None,
            memory_file=str(memory_file) if memory_file else None,
            flushed=flushed,
            hook_errors=errors,
        ),
    )
    return rotation
