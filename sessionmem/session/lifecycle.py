"""Session rotation (``/new``, ``/reset``, daily and idle resets) and the hooks around it.

A rotation ends the current session and starts a new one under the same session key. In order:

1. the compaction gate: the silent flush runs first when this compaction cycle had none (DESIGN 1),
   so what the model knew is saved before the context goes away;
2. the ``command:new`` / ``command:reset`` hooks, awaited, with ``transcript_path`` pointing at the
   *live* transcript (DESIGN 6): the bundled session-memory hook writes ``memory/<date>-<slug>.md``
   from it, its slug asked of the session's own model;
3. the old transcript is archived as ``<file>.reset.<ISO time with ':' → '-'>``;
4. a new sessionId and transcript; in sessions.json (under its lock) the counters start again:
   ``compactionCount`` 0, no flush record, no token figures;
5. ``session:end`` (old) and ``session:start`` (new) hooks, then a ``new`` event for ``on_event``.

A session that :meth:`~sessionmem.session.runner.SessionRunner.open` creates (no sessions.json entry yet)
gets its ``session:start`` (reason ``created``) at the start of its first turn (:func:`announce_created`).

Freshness (reference §3.3): with ``session.reset.mode`` ``daily`` a session last active before the most
recent ``atHour`` (default 4, in the user's time zone) is stale; with ``idle`` (or ``idleMinutes`` set in
daily mode) one idle longer than ``idleMinutes`` is. A stale session is rotated at the start of the next
turn like ``/new``, flush and hook included; OpenClaw skips both there and loses the conversation.
A session without any conversation is never stale, and ending one writes no memory file (nothing to save).

Hooks fail open: an error in one is logged, reported to ``on_event`` as a ``hook_error`` event (whatever
the hook event; for a rotation also in the ``new`` event), and never costs the turn.
"""

from __future__ import annotations

import logging
import os
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from sessionmem.config import ResetConfig
from sessionmem.messages import now_ms
from sessionmem.session.entry import SessionEntry
from sessionmem.session.events import Event, HookErrorEvent, MemoryWriteEvent, NewSessionEvent
from sessionmem.session.flush import user_zone
from sessionmem.session.transcript import Transcript

if TYPE_CHECKING:
    from sessionmem.hooks import HookOutcome, HookRegistry
    from sessionmem.session.runner import Session, SessionRunner

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


def has_conversation(session: Session) -> bool:
    """Whether the session holds anything worth saving (a user or assistant message, or a summary)."""
    return any(message.role in ("user", "assistant") for _, message in session.context)


def stale_reason(session: Session) -> Literal["daily", "idle"] | None:
    """Whether ``session`` must rotate before its next turn (reads updatedAt from sessions.json)."""
    runner = session.runner
    cfg = runner.config.session.reset
    if cfg.mode == "off" or not has_conversation(session):
        return None
    stored = runner.store.get(session.key)
    updated_at = (stored or session.entry).updated_at
    return stale_reason_at(updated_at, datetime.now(UTC), cfg, user_zone(runner.agent.user_timezone))


# ---------------------------------------------------------------------------- rotation pieces


def rotated_entry(current: SessionEntry, session_id: str, session_file: Path) -> SessionEntry:
    """The sessions.json entry of the new session: identity and overrides kept, counters reset."""
    data = {k: v for k, v in current.to_json_dict().items() if k not in RESET_FIELDS}
    data.update(sessionId=session_id, sessionFile=str(session_file), updatedAt=now_ms(), compactionCount=0)
    return SessionEntry.model_validate(data)


def archive_name(path: Path, when: datetime) -> Path:
    """``<file>.reset.<ISO 8601 UTC, ms, ':' replaced by '-'>`` (OpenClaw's archive name)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    stamp = when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return path.with_name(f"{path.name}.reset.{stamp.replace(':', '-')}")


def archive_transcript(path: Path, when: datetime) -> Path | None:
    """Rename the transcript to its archive name (never over an existing archive); None if absent."""
    if not path.is_file():
        return None
    target = archive_name(path, when)
    for n in range(1, 1000):
        if not target.exists():
            break
        target = target.with_name(f"{archive_name(path, when).name}-{n}")
    os.replace(path, target)
    return target


# ---------------------------------------------------------------------------- hooks


def hook_registry(runner: SessionRunner) -> HookRegistry:
    """The runner's hooks; loaded from disk on first use when none were given."""
    from sessionmem.hooks import HookRegistry, load_hooks

    registry = getattr(runner, "hooks", None)
    if registry is None:
        try:
            registry = load_hooks(runner.config, runner.workspace, runner.state_dir / "hooks")
        except Exception:  # hooks fail open, their loading too
            log.warning("could not load hooks; running without them", exc_info=True)
            registry = HookRegistry()
        runner.hooks = registry
    return registry


async def emit_hook(session: Session, name: str, **fields: Any) -> list[HookOutcome]:
    """Emit hook event ``name`` for ``session``; never raises. Every hook that failed on it is reported
    to ``on_event`` as a ``hook_error`` event (the registry has already logged it)."""
    from sessionmem.hooks import HookEvent

    runner = session.runner
    try:
        registry = hook_registry(runner)
        if not registry.names(name):
            return []
        extra = dict(fields.pop("extra", {}) or {})
        extra.setdefault("sessions_dir", str(runner.store.sessions_dir))
        event = HookEvent(
            name=name,
            workspace=runner.workspace,
            state_dir=runner.state_dir,
            session_key=session.key,
            agent_id=runner.agent_id,
            model=runner.model,
            config=runner.config,
            extra=extra,
            **fields,
        )
        outcomes = await registry.emit(event)
    except Exception:
        log.warning("hook event %s could not be emitted", name, exc_info=True)
        return []
    for outcome in outcomes:
        if not outcome.ok:
            await session._emit(
                HookErrorEvent(
                    session_key=session.key,
                    hook=outcome.hook,
                    hook_event=outcome.event,
                    error=outcome.error or "failed",
                )
            )
    return outcomes


async def announce_created(session: Session) -> None:
    """``session:start`` for a session :meth:`SessionRunner.open` created (reason ``created``); the
    runner calls it once, at the start of the session's first turn. Rotations announce theirs in
    :func:`rotate`."""
    from sessionmem.hooks import SESSION_START

    runner = session.runner
    await emit_hook(
        session,
        SESSION_START,
        session_entry=session.entry.to_json_dict(),
        transcript_path=session.transcript.path,
        command_source=runner.command_source,
        extra={"reason": "created"},
    )


async def relay_event(session: Session, event: Event) -> None:
    """Turn runner events into hook events: ``memory:flush`` after a flush, ``compaction:after``
    (``compaction:before`` is emitted by the gate through :func:`before_compaction`)."""
    from dataclasses import asdict

    from sessionmem.hooks import COMPACTION_AFTER, MEMORY_FLUSH

    name = {"flush": MEMORY_FLUSH, "compaction": COMPACTION_AFTER}.get(event.kind)
    if name is None:
        return
    details = {k: v for k, v in asdict(event).items() if k not in ("kind", "session_key")}
    await emit_hook(session, name, session_entry=session.entry.to_json_dict(), extra=details)


async def before_compaction(session: Session, reason: str) -> None:
    """The ``compaction:before`` hook, once a compaction has something to summarise."""
    from sessionmem.hooks import COMPACTION_BEFORE

    await emit_hook(
        session,
        COMPACTION_BEFORE,
        session_entry=session.entry.to_json_dict(),
        transcript_path=session.transcript.path,
        extra={"reason": reason, "compaction_count": session.entry.compaction_count},
    )


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


async def rotate(session: Session, reason: RotationReason, *, command_source: str | None = None) -> Rotation:
    """End ``session``'s current conversation and start a new one (see the module docstring).

    ``session`` is updated in place: afterwards it has the new transcript, entry and an empty context.
    """
    from sessionmem.hooks import COMMAND_NEW, COMMAND_RESET, SESSION_END, SESSION_START
    from sessionmem.session.runner import compact_through_gate

    runner = session.runner
    stored = runner.store.get(session.key)
    if stored is not None:
        session.entry = stored
    conversation = has_conversation(session)
    flushed = False
    if conversation:
        flushed = (await compact_through_gate(session, reason)).flushed

    previous = session.entry
    old_path = session.transcript.path
    new_id = str(uuid.uuid4())
    new_path = runner.store.transcript_path(new_id)
    source = command_source or runner.command_source or reason
    outcomes: list[HookOutcome] = []
    if conversation:
        outcomes = await emit_hook(
            session,
            COMMAND_RESET if reason == "reset" else COMMAND_NEW,
            previous_session_entry=previous.to_json_dict(),
            session_entry={"sessionId": new_id, "sessionFile": str(new_path)},
            transcript_path=old_path,
            command_source=source,
            extra={"reason": reason},
        )
    memory_file = _memory_file(outcomes, runner.workspace)

    try:
        archived = archive_transcript(old_path, datetime.now(UTC))
    except OSError as exc:  # the new session must still start; the old file simply keeps its name
        log.warning("could not archive transcript %s: %s", old_path, exc)
        archived = None
    entry = runner.store.update(
        session.key, lambda current: rotated_entry(current or previous, new_id, new_path)
    )
    assert entry is not None
    # A fresh context, token caches and system prompt (MEMORY.md and daily logs may have changed).
    session.attach(Transcript.open(new_path, new_id, runner.workspace, session_key=session.key), entry)
    # A new memory file, or an archive (searched as sessions/<file>.reset.<ts> once the index moves the
    # old transcript's rows to it): either way the memory index is due for a sync.
    if (memory_file is not None or archived is not None) and runner.memory_index is not None:
        mark_dirty = getattr(runner.memory_index, "mark_dirty", None)
        if callable(mark_dirty):
            mark_dirty()

    ended = await emit_hook(
        session,
        SESSION_END,
        session_entry=previous.to_json_dict(),
        transcript_path=archived,
        command_source=source,
        extra={"reason": reason, "next_session_id": new_id},
    )
    started = await emit_hook(
        session,
        SESSION_START,
        session_entry=entry.to_json_dict(),
        previous_session_entry=previous.to_json_dict(),
        transcript_path=new_path,
        command_source=source,
        extra={"reason": reason, "resumed_from": previous.session_id},
    )
    errors = tuple(o.error for o in (*outcomes, *ended, *started) if not o.ok and o.error)
    rotation = Rotation(reason, previous.session_id, new_id, archived, memory_file, flushed, errors)
    if memory_file is not None:
        rel = memory_file.resolve().relative_to(runner.workspace.resolve()).as_posix()
        chars = len(memory_file.read_text(encoding="utf-8"))
        await session._emit(MemoryWriteEvent(session_key=session.key, path=rel, mode="create", chars=chars))
    await session._emit(
        NewSessionEvent(
            session_key=session.key,
            reason=reason,
            previous_session_id=previous.session_id,
            session_id=new_id,
            archived_path=str(archived) if archived else None,
            memory_file=str(memory_file) if memory_file else None,
            flushed=flushed,
            hook_errors=errors,
        )
    )
    return rotation
