"""What the runner reports as it works: turns, flushes, compactions, tool calls, memory writes, sessions
ending and starting, failed hooks.

Events are plain frozen dataclasses with a ``kind`` literal. They and the hooks speak one vocabulary: the
kinds that are hook points are emitted to the hook of the same meaning too (the table is
:data:`sessionmem.hooks.HOOK_NAMES`: ``compaction_start`` -> ``compaction:before``, ``compaction`` ->
``compaction:after``, ``flush`` -> ``memory:flush``, ``command_new`` -> ``command:new``, ...).

The developer's ``on_event`` callback may be sync or async; an exception in it is logged and never
breaks the user's turn. In JSON (``chat``,
``demo`` and ``replay --json``) an event is :func:`event_record`: its kind as ``event``, its fields in
camelCase like every JSON output (``sessionKey``, ``sessionId``, ``tokensBefore``).
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from sessionmem.config_base import camel_case
from sessionmem.messages import Message, ToolCall, Usage, now_ms

log = logging.getLogger(__name__)

EventKind = Literal[
    "turn",
    "flush",
    "flush_skipped",
    "compaction_start",
    "compaction",
    "compaction_failed",
    "tool_call",
    "memory_write",
    "command_new",
    "command_reset",
    "session_end",
    "session_start",
    "new",
    "hook_error",
    "memory_work_start",
    "memory_work_end",
]


@dataclass(frozen=True, kw_only=True)
class Event:
    """What every event carries: its kind, the session key and the id of the session (the transcript)
    it happened in, so one session can be followed in the stream of a runner serving many."""

    kind: EventKind
    session_key: str
    session_id: str = ""  # filled in when the event is emitted
    timestamp: int = field(default_factory=now_ms)


@dataclass(frozen=True, kw_only=True)
class TurnEvent(Event):
    kind: EventKind = "turn"
    turn_kind: Literal["turn", "flush"] = "turn"
    reply: str | None = None  # what the user receives (None when silent, or for a flush)
    usage: Usage = field(default_factory=Usage)
    model_calls: int = 0
    stopped: str | None = None  # "max_tool_iterations" when the tool loop was cut off
    early: bool = False  # its first model call was answered while the last reply's memory work ran


@dataclass(frozen=True, kw_only=True)
class FlushEvent(Event):
    kind: EventKind = "flush"
    reason: str = ""
    path: str = ""  # memory/YYYY-MM-DD.md the flush was allowed to append to
    compaction_count: int = 0  # the cycle this flush belongs to
    tokens: int = 0  # the projected prompt when the flush was decided
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class FlushSkippedEvent(Event):
    kind: EventKind = "flush_skipped"
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class CompactionStartEvent(Event):
    """A compaction has something to summarise and starts now (the ``compaction:before`` hook)."""

    kind: EventKind = "compaction_start"
    reason: str = ""  # threshold | overflow | manual
    compaction_count: int = 0  # compactions before this one


@dataclass(frozen=True, kw_only=True)
class CompactionEvent(Event):
    kind: EventKind = "compaction"
    reason: str = ""  # threshold | overflow | manual | ...
    tokens_before: int = 0
    tokens_after: int = 0
    compaction_count: int = 0
    first_kept_entry_id: str | None = None


@dataclass(frozen=True, kw_only=True)
class CompactionFailedEvent(Event):
    kind: EventKind = "compaction_failed"
    reason: str = ""
    error: str = ""


@dataclass(frozen=True, kw_only=True)
class ToolCallEvent(Event):
    kind: EventKind = "tool_call"
    turn_kind: Literal["turn", "flush"] = "turn"
    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    is_error: bool = False
    result: str = ""


@dataclass(frozen=True, kw_only=True)
class MemoryWriteEvent(Event):
    kind: EventKind = "memory_write"
    path: str = ""  # workspace-relative
    mode: Literal["append", "replace", "create"] = "append"  # create: a new file (the /new hook's)
    chars: int = 0


@dataclass(frozen=True, kw_only=True)
class NewSessionEvent(Event):
    """A rotation: /new, /reset, or a daily/idle reset at the start of a turn (session.lifecycle)."""

    kind: EventKind = "new"
    reason: str = ""  # new | reset | daily | idle
    previous_session_id: str = ""
    session_id: str = ""  # the new session's
    archived_path: str | None = None  # the old transcript, renamed <file>.reset.<ts>
    memory_file: str | None = None  # what the session-memory hook wrote
    flushed: bool = False  # the gate flushed the old session first
    hook_errors: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class CommandEvent(Event):
    """A rotation is about to end the session's conversation (``/new``, ``/reset``, a daily or idle
    reset), its transcript not yet archived: the ``command:new`` / ``command:reset`` hooks (kind
    ``command_reset`` for ``/reset``, else ``command_new``) save what they want of it."""

    kind: EventKind = "command_new"
    reason: str = ""  # new | reset | daily | idle


@dataclass(frozen=True, kw_only=True)
class SessionEndEvent(Event):
    """A session ended (rotated away; ``session_id`` is the ended one's): the ``session:end`` hook."""

    kind: EventKind = "session_end"
    reason: str = ""
    next_session_id: str = ""


@dataclass(frozen=True, kw_only=True)
class SessionStartEvent(Event):
    """A session started: the runner created it (reason ``created``) or a rotation did (``resumed_from``
    the ended one): the ``session:start`` hook."""

    kind: EventKind = "session_start"
    reason: str = ""
    resumed_from: str | None = None


@dataclass(frozen=True, kw_only=True)
class HookErrorEvent(Event):
    """A hook failed or timed out on a hook event; the turn went on (hooks fail open)."""

    kind: EventKind = "hook_error"
    hook: str = ""  # the hook's name
    hook_event: str = ""  # the hook event it failed on: "compaction:after", "command:new", ...
    error: str = ""


@dataclass(frozen=True, kw_only=True)
class MemoryWorkStartEvent(Event):
    """The memory work a turn made due starts, its reply already delivered (replies first): ``work`` is
    ``flush`` or ``compaction`` (through the gate: the flush first when the cycle has had none), due at a
    projection of ``tokens``. The session's next turn waits until :class:`MemoryWorkEndEvent`."""

    kind: EventKind = "memory_work_start"
    work: str = ""  # flush | compaction
    reason: str = ""  # why it is due: the threshold, or the flush's reason
    tokens: int = 0


@dataclass(frozen=True, kw_only=True)
class MemoryWorkEndEvent(Event):
    """The memory work after a reply has ended (its ``flush`` and ``compaction`` events came before; the
    two timestamps say how long it ran); ``error`` when it failed unexpectedly (the next turn of the session
    reloads its state and does what is still due first)."""

    kind: EventKind = "memory_work_end"
    work: str = ""
    error: str | None = None


# ---------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class TurnResult:
    reply: str | None  # what the user receives; None when the model stayed silent
    messages: tuple[Message, ...]  # everything this turn appended (user, assistant, tool results)
    usage: Usage
    events: tuple[Event, ...]
    stopped: str | None = None  # "max_tool_iterations" when the tool loop was cut off
    command: str | None = None  # "new" | "reset" | "compact" | "status" when the message was a command
    # the caller's own tools the model called (run_turn(..., tools=...)): the turn is suspended until
    # Session.submit_tool_results gives their results
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True, slots=True)
class CompactionResult:
    ok: bool
    reason: str
    tokens_before: int = 0
    tokens_after: int = 0
    error: str | None = None  # why it failed or was skipped
    flushed: bool = False  # the gate ran the flush first


EventCallback = Callable[[Event], Awaitable[None] | None]


def event_record(event: Event, *, without: tuple[str, ...] = ()) -> dict[str, Any]:
    """``event`` as a JSON-ready record: ``{"event": kind, ...fields}``, field names in camelCase (the
    spelling of every JSON output), nested records (``usage``) too, tuples as lists; the values of a
    mapping field (a tool call's ``arguments``) as they are. ``without``: field names left out."""
    fields = {f.name: getattr(event, f.name) for f in dataclasses.fields(event)}
    return {
        "event": event.kind,
        **{camel_case(k): json_value(v) for k, v in fields.items() if k != "kind" and k not in without},
    }


def json_value(value: Any) -> Any:
    """A field's value for :func:`event_record`: a dataclass as a camelCase record, a tuple as a list."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {camel_case(f.name): json_value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [json_value(v) for v in value]
    return value


async def deliver(callback: EventCallback | None, event: Event) -> None:
    """Call the developer's callback; log (never raise) what it throws."""
    if callback is None:
        return
    try:
        result = callback(event)
        if inspect.isawaitable(result):
            await result
    except Exception:
        log.exception("on_event callback failed for %s event", event.kind)
