"""The one compaction gate (DESIGN 1, 2) and what it runs: the silent flush turn and the compaction.

Every path that compacts calls :func:`compact_through_gate`: the threshold after a turn, the preflight
before one, provider context-overflow recovery, manual ``/compact``, and (flush only) the rotations
``/new``, ``/reset``, daily and idle, whose archiving the caller does. The gate runs the flush first when
the current compaction cycle has none, and records the flush against the cycle it *started* in, so a
compaction that happens during the flush (its own call overflowed) does not skip the next cycle's flush.

A flush that fails (model error) is reported in its ``flush`` event and still counts for its cycle: the
user's turn goes on, and a broken flush is not retried before every turn of the cycle.

Decisions are taken against sessions.json, never against the session's cached entry: a gateway may run
several processes (several :class:`~sessionmem.session.runner.SessionRunner` objects) on one store. A
flush is *claimed* in one locked update that re-reads the entry and records ``memoryFlushCompactionCount``
only if the stored cycle is still unflushed (:func:`claim_flush`); the loser skips. ``compactionCount`` is
incremented from the stored value in the same way.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from sessionmem.messages import Message, now_ms
from sessionmem.session.compaction import CompactionFailed, CompactionPlan, plan_compaction, summarize
from sessionmem.session.events import (
    CompactionEvent,
    CompactionFailedEvent,
    CompactionResult,
    FlushEvent,
    FlushSkippedEvent,
)
from sessionmem.session.flush import compaction_threshold, cycle_flushed, flush_prompts, guard_reason
from sessionmem.session.lifecycle import before_compaction
from sessionmem.session.projection import context_state
from sessionmem.session.store import compaction_figures
from sessionmem.session.transcript import compaction_summary_text
from sessionmem.tokens import count_tokens

if TYPE_CHECKING:
    from sessionmem.session.runner import Session
    from sessionmem.session.store import SessionEntry

CompactionReason = Literal["threshold", "overflow", "manual", "new", "reset", "daily", "idle"]
ROTATION_REASONS = ("new", "reset", "daily", "idle")


async def flush_if_unflushed(session: Session, reason: str) -> bool:
    """Run the silent flush unless this compaction cycle already had one, the flush is disabled, or a
    guardrail forbids it (reported as a ``flush_skipped`` event). True when a flush ran."""
    flush_cfg = session.runner.agent.compaction.memory_flush
    if not flush_cfg.enabled:
        return False
    # The store's word, not this session's cached entry: a stale entry may say "flushed" for a cycle
    # another runner has since compacted away (the claim below only settles the opposite case).
    stored = session.runner.store.get(session.key)
    if stored is not None:
        session.entry = stored
    if cycle_flushed(session._entry_dict()):
        return False
    guard = guard_reason(**session._guards())
    if guard is not None:
        await session._emit(FlushSkippedEvent(session_key=session.key, reason=f"{guard} (before {reason})"))
        return False
    return await run_flush(session, f"before {reason} compaction")


async def compact_through_gate(
    session: Session, reason: CompactionReason, instructions: str | None = None
) -> CompactionResult:
    """The one way to compact (DESIGN 1): flush first if this cycle is unflushed, then summarise.

    For rotations (new/reset/daily/idle) the caller archives the transcript itself; the gate only flushes.
    A compaction that already happened during the flush (the flush overflowed) is not repeated for
    threshold/overflow reasons.
    """
    before = session.compactions  # this session's own compactions: others' show in the store, not here
    if reason not in ROTATION_REASONS and _plan(session) is None:
        # Trigger: /compact (or an overflow) with a context that all fits in the kept recent part.
        # Why: a flush now would use up the cycle's one flush while nothing is summarised away, and
        # the cycle's later turns would then be compacted unsaved. Outcome: neither flush nor compaction.
        return CompactionResult(False, reason, error="nothing to compact")
    flushed = await flush_if_unflushed(session, reason)
    if reason in ROTATION_REASONS:
        return CompactionResult(True, reason, error="rotation is done by the caller", flushed=flushed)
    if reason != "manual" and session.compactions > before:
        return CompactionResult(True, reason, flushed=flushed)
    result = await compact_now(session, reason, instructions)
    return CompactionResult(
        result.ok, reason, result.tokens_before, result.tokens_after, result.error, flushed
    )


def claim_flush(session: Session) -> int | None:
    """Record a flush for the stored cycle, in one locked update, if that cycle has none yet.

    Returns the cycle claimed, or None when the store says the cycle is already flushed (another
    runner or process won it). Either way ``session.entry`` is refreshed from the store.
    """
    claimed: list[int] = []

    def claim(current: SessionEntry | None) -> SessionEntry | None:
        entry = current if current is not None else session.entry
        if cycle_flushed(entry.to_json_dict()):
            return None
        claimed.append(entry.compaction_count)
        return entry.touched(memory_flush_compaction_count=entry.compaction_count, memory_flush_at=now_ms())

    stored = session.runner.store.update(session.key, claim)
    if stored is not None:
        session.entry = stored
    return claimed[0] if claimed else None


async def run_flush(session: Session, reason: str, tokens: int | None = None) -> bool:
    """The silent flush turn; recorded against the cycle it starts in (DESIGN 2). True when it ran.

    The flush is claimed in the store first (:func:`claim_flush`): when another runner has already
    flushed this cycle, this one skips (a ``flush_skipped`` event) and goes on with the fresh entry.
    """
    if tokens is None:
        tokens = session.projection().tokens
    cycle = claim_flush(session)
    if cycle is None:
        stored = session.entry.memory_flush_compaction_count
        await session._emit(
            FlushSkippedEvent(
                session_key=session.key,
                reason=f"already flushed compaction cycle {stored} (recorded by another runner)",
            )
        )
        return False
    agent = session.runner.agent
    folder = session.tools.home.daily_folder  # memory/, or the session's own folder (memory.scope peer)
    prompts = flush_prompts(agent.compaction.memory_flush, _utc_now(), agent.user_timezone, folder=folder)
    session.tools.flush_target = prompts.relative_path
    writes_before = session.tools.writes
    error = None
    try:
        await session._turn(Message.user(prompts.prompt), kind="flush", system_extra=prompts.system_prompt)
    except Exception as exc:  # a failed flush must not cost the user their turn
        error = f"{type(exc).__name__}: {exc}"
    finally:
        session.tools.flush_target = None
    if session.tools.writes > writes_before:
        await session.tools.sync_index("memory-flush")
    await session._emit(
        FlushEvent(
            session_key=session.key,
            reason=reason,
            path=prompts.relative_path,
            compaction_count=cycle,
            tokens=tokens,
            error=error,
        )
    )
    return True


async def compact_now(session: Session, reason: str, instructions: str | None) -> CompactionResult:
    """Summarise now (no flush: callers go through the gate); a failed summary changes nothing."""
    cfg = session.runner.agent.compaction
    plan = _plan(session)
    if plan is None:
        return CompactionResult(False, reason, error="nothing to compact")
    await before_compaction(session, reason)  # the compaction:before hook
    try:
        summary = await summarize(
            session.runner.model,
            plan,
            instructions=instructions,
            reserve_tokens=cfg.effective_reserve_tokens(),
        )
    except CompactionFailed as exc:
        await session._emit(CompactionFailedEvent(session_key=session.key, reason=reason, error=str(exc)))
        return CompactionResult(False, reason, error=str(exc))
    # Both figures are the session's projection (Session.projection), the measure the thresholds, the
    # turns' figures and /status use. Before: what reached the threshold (the reported usage when fresh,
    # so tool schemas included). After: what the projection will count once the context is replaced (no
    # fresh usage then): the refreshed system prompt (it may now show the daily log the flush just
    # wrote), the summary, the kept messages and the tool schemas.
    tokens_before = session.projection().tokens
    system_prompt = session.tools.system_prompt()
    summary_message = Message.user(compaction_summary_text(summary))
    tokens_after = (
        count_tokens(system_prompt)
        + session.counter.count(summary_message)
        + session.counter.count_all(plan.kept)
        + session._schema_tokens()
    )
    session.transcript.append_compaction(summary, plan.first_kept_entry_id, tokens_before, tokens_after)
    session.context, session._stale = context_state(session.transcript)
    session.system_prompt = system_prompt
    session.compactions += 1

    def count_it(current: SessionEntry | None) -> SessionEntry:
        # From the stored count, under the lock: another runner may have compacted since our last read.
        entry = current if current is not None else session.entry
        return entry.touched(compaction_count=entry.compaction_count + 1, **compaction_figures(tokens_after))

    stored = session.runner.store.update(session.key, count_it)
    assert stored is not None
    session.entry = stored
    count = stored.compaction_count
    await session.tools.after_compaction(session.transcript.path)
    await session._emit(
        CompactionEvent(
            session_key=session.key,
            reason=reason,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            compaction_count=count,
            first_kept_entry_id=plan.first_kept_entry_id,
        )
    )
    return CompactionResult(True, reason, tokens_before, tokens_after)


def _plan(session: Session) -> CompactionPlan | None:
    """What a compaction would summarise now (None: everything fits in the kept recent part)."""
    cfg = session.runner.agent.compaction
    keep = cfg.keep_recent_tokens
    threshold = compaction_threshold(session.context_window, cfg)
    if threshold > 0:  # keeping more than half the usable window would make compaction pointless
        keep = min(keep, max(1, threshold // 2))
    return plan_compaction(session.context, session.counter, keep)


def _utc_now() -> datetime:
    return datetime.now(UTC)
