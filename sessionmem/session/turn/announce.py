"""Events and hooks out of a session: the turn's result, the developer's ``on_event``, the hook registry.

:func:`emit` records an event for the current turn (``TurnResult.events``), passes it to ``on_event``,
and, when its kind is a hook point, emits the hook event of that kind (one table,
:data:`sessionmem.hooks.HOOK_NAMES`: ``flush`` -> ``memory:flush``, ``compaction_start`` ->
``compaction:before``, ...): every hook event comes from an event, so ``on_event`` sees what hooks see.
:func:`emit_hook` emits a hook event; hooks fail open: an error in one is logged, reported to ``on_event``
as a ``hook_error`` event, and never costs the turn.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

from sessionmem.model.routing import model_for
from sessionmem.session.turn.events import (
    CompactionStartEvent,
    Event,
    HookErrorEvent,
    SessionStartEvent,
    deliver,
)
from sessionmem.session.turn.state import SessionState

if TYPE_CHECKING:
    from sessionmem.hooks import HookOutcome

log = logging.getLogger(__name__)


async def emit(state: SessionState, event: Event, **hook_fields: Any) -> list[HookOutcome]:
    """Report ``event``: in this turn's result, to ``on_event``, and to the hook of its kind if it is a
    hook point (the outcomes are returned). ``hook_fields`` are what the hook event carries beside the
    event's own fields (which go in its ``extra``): ``session_entry`` (the session's current entry when
    not given), ``transcript_path``, ``transcript``, ``command_source``, ... (see
    :class:`~sessionmem.hooks.HookEvent`). An event without its session id gets the session's current
    one."""
    from sessionmem.hooks import HOOK_NAMES

    if not event.session_id:
        event = replace(event, session_id=state.entry.session_id)
    state.events.append(event)
    await deliver(state.runner.on_event, event)
    name = HOOK_NAMES.get(event.kind)
    if name is None:
        return []
    details = {k: v for k, v in asdict(event).items() if k not in ("kind", "session_key")}
    extra = {**details, **(hook_fields.pop("extra", None) or {})}
    hook_fields.setdefault("session_entry", state.entry.to_json_dict())
    return await emit_hook(state, name, extra=extra, **hook_fields)


async def emit_queued(state: SessionState) -> None:
    """Emit what the tools reported during their call (memory writes)."""
    queued = list(state.queued)
    state.queued.clear()  # in place: the tools hold its append
    for event in queued:
        await emit(state, event)


async def emit_hook(state: SessionState, name: str, **fields: Any) -> list[HookOutcome]:
    """Emit hook event ``name`` for this session; never raises. Every hook that failed on it is reported
    to ``on_event`` as a ``hook_error`` event (the registry has already logged it)."""
    from sessionmem.hooks import HookEvent

    runner = state.runner
    try:
        registry = runner.hook_registry()
        if not registry.names(name):
            return []
        extra = dict(fields.pop("extra", {}) or {})
        sessions_dir = runner.store.sessions_dir
        if sessions_dir is not None:
            extra.setdefault("sessions_dir", str(sessions_dir))
        event = HookEvent(
            name=name,
            workspace=runner.workspace,
            state_dir=runner.state_dir,
            session_key=state.key,
            agent_id=runner.agent_id,
            model=model_for(runner.model, runner.agent, "slug"),  # compaction.model when set
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
            await emit(
                state,
                HookErrorEvent(
                    session_key=state.key,
                    hook=outcome.hook,
                    hook_event=outcome.event,
                    error=outcome.error or "failed",
                ),
            )
    return outcomes


async def announce_created(state: SessionState) -> None:
    """``session_start`` (the ``session:start`` hook) for a session the runner created (reason
    ``created``); the runner calls it once, at the start of the session's first turn. Rotations announce
    theirs themselves."""
    await emit(
        state,
        SessionStartEvent(session_key=state.key, reason="created"),
        transcript_path=state.transcript.path,
        command_source=state.runner.command_source,
    )


async def before_compaction(state: SessionState, reason: str) -> None:
    """``compaction_start`` (the ``compaction:before`` hook), once a compaction has something to
    summarise."""
    event = CompactionStartEvent(
        session_key=state.key, reason=reason, compaction_count=state.entry.compaction_count
    )
    await emit(state, event, transcript_path=state.transcript.path)
