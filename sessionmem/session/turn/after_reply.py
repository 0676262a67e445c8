"""Replies first: the flush and the compaction a turn made due run after its reply, not on the user's time.

A turn's reply (the return value, ``on_partial``, a gateway's response) reaches the caller as soon as the
model has answered. What the turn made due then runs right after, in the same hold of the session's turn
lock (:meth:`~sessionmem.session.runner.Session.locked`): the projection is read again (for the flush,
the turn's own message standing in for the next one: :func:`memory_work_due`), and the gate's own decision
(:func:`~sessionmem.session.turn.gate.memory_work_at`) says whether a compaction (the flush first, when
the cycle has had none) or the flush is due. So the next turn of the session waits only for what is still
running when it arrives, other sessions never wait, and the transcript reads as before: the flush, then
its compaction, once per cycle.

What stays inline, before the reply: overflow recovery (the turn cannot be answered otherwise), and the
preflight of a turn that arrives with the context already past a threshold (after a crash between a reply
and its work, or a message that alone crosses one). A process killed between the reply and the work has
recorded nothing of it; the transcript is the record, and the next turn's preflight does it first.

A failure here is reported, never raised: nobody awaits the reply any more. The ``memory_work_end`` event
carries the error, the log has the traceback, and the runner reloads the session's state before its next
turn (:func:`run_memory_work` raises :class:`MemoryWorkFailed` for that).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sessionmem.messages import Message
from sessionmem.session.turn.announce import emit
from sessionmem.session.turn.events import MemoryWorkEndEvent, MemoryWorkStartEvent
from sessionmem.session.turn.gate import MemoryWork, do_memory_work, memory_work_at
from sessionmem.session.turn.state import SessionState

log = logging.getLogger(__name__)


class MemoryWorkFailed(Exception):
    """The memory work after a reply failed unexpectedly; already reported (event and log)."""


def memory_work_due(state: SessionState, next_like: Message | None = None) -> MemoryWork | None:
    """What the turn that just ended made due: a compaction or a flush at the context as it is now, or the
    flush that the next message would make due, ``next_like`` (the turn's own message, at most the soft
    threshold's worth of tokens) standing in for it: it runs now rather than in the next turn's preflight,
    on the user's time, at most one message early. A compaction is never brought forward (it would give up
    verbatim context for a message that may not come); the preflight, which projects the real message,
    does what this did not. Not a flush a guardrail forbids (the next turn's preflight reports it, as
    before), nor a second flush in one turn: one whose note could not be saved (a full disk) runs again at
    the next turn, once a turn."""
    projected = state.projection().tokens
    work = memory_work_at(state, projected)
    if work is None and next_like is not None:
        ahead = min(state.counter.count(next_like), state.budget.soft_threshold)
        work = memory_work_at(state, projected + ahead, compact=False)
    if work is None or work.what == "flush_skipped":
        return None
    if work.what == "flush" and any(event.kind == "flush" for event in state.events):
        return None
    return work


async def run_memory_work(
    state: SessionState,
    next_like: Message | None = None,
    *,
    next_turn_waits: Callable[[], bool] = lambda: False,
) -> None:
    """Run what the turn made due, each piece between ``memory_work_start`` and ``memory_work_end``
    events: a flush, then the compaction when the flush's own messages took the context past its
    threshold (a small window: better now than in the next turn's preflight, on the user's time), unless
    ``next_turn_waits()`` by then: the next turn's first call is being answered on the context before this
    work (:mod:`~sessionmem.session.turn.early_call`), and that compaction runs after its reply instead. An
    unexpected failure is logged, reported in the end event and raised as :class:`MemoryWorkFailed`."""
    done: set[str] = set()
    while (work := memory_work_due(state, next_like)) is not None and work.what not in done:
        if done and next_turn_waits():
            return
        done.add(work.what)
        start = MemoryWorkStartEvent(
            session_key=state.key, work=work.what, reason=work.reason, tokens=work.tokens
        )
        await emit(state, start)
        error: str | None = None
        try:
            await do_memory_work(state, work)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            log.exception("session %s: the %s after the reply failed", state.key, work.what)
        await emit(state, MemoryWorkEndEvent(session_key=state.key, work=work.what, error=error))
        if error is not None:
            raise MemoryWorkFailed(error)
