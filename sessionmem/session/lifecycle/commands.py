"""Slash commands in user messages: ``/new``, ``/reset``, ``/compact [instructions]``, ``/status``.

Parsing is pure (:func:`parse_command`); :func:`before_turn` is the dispatcher the runner's
``run_turn`` calls first, so ``await session.run_turn("/new")`` works for library users exactly as
in ``sessionmem chat``.

Rules (reference §3.3, §2.7):

- reset triggers come from ``session.resetTriggers`` (default ``/new``, ``/reset``); they match
  case-insensitively, either the whole message or the trigger followed by whitespace and more text.
  The rest is then run as the first turn of the new session (``"/new fix the build"``);
- a trigger spelled ``/reset`` emits ``command:reset``, any other trigger ``command:new``;
- ``/compact`` compacts through the gate (the flush runs first when this cycle had none), with
  what follows it as extra summary instructions;
- ``/status`` reports tokens against the thresholds, the compaction count and the flush state from
  the store, and no server path. Neither ``/compact`` nor ``/status`` calls the model for a reply;
- ``session.commands`` lists the commands end users may run (default: all four); any other is sent to
  the model as an ordinary message. The developer's own calls (``session.compact()``) are not limited.

Before an ordinary message or ``/compact``, a session that went stale (daily or idle reset,
:mod:`sessionmem.session.lifecycle.rotation`) is rotated as if the user had typed ``/new``; a ``/new`` or
``/reset`` makes that check moot. ``/status`` never rotates: it only looks, and says when the next
message will start a new session.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from sessionmem.errors import UsageError
from sessionmem.messages import Usage, text_problem
from sessionmem.session.lifecycle.rotation import rotate, stale_reason
from sessionmem.session.turn.events import CompactionResult, TurnResult
from sessionmem.session.turn.flush import cycle_flushed
from sessionmem.session.turn.gate import compact_through_gate
from sessionmem.session.turn.state import SessionState

CommandName = Literal["new", "reset", "compact", "status"]
DEFAULT_RESET_TRIGGERS = ("/new", "/reset")
ALL_COMMANDS = ("/compact", "/status", "/new", "/reset")

_COMPACT = re.compile(r"/compact(?:\s+(?P<rest>.*))?", re.IGNORECASE | re.DOTALL)
_STATUS = re.compile(r"/status", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Command:
    """A recognised command. ``rest`` is the text after it (first message, or compaction focus)."""

    name: CommandName
    trigger: str
    rest: str = ""


def rotation_name(trigger: str) -> Literal["new", "reset"]:
    """``command:reset`` for a trigger spelled /reset, ``command:new`` for every other trigger."""
    return "reset" if trigger.strip().lower().lstrip("/") == "reset" else "new"


def match_reset_trigger(text: str, triggers: Sequence[str] = DEFAULT_RESET_TRIGGERS) -> Command | None:
    """The reset trigger ``text`` starts with (whole message, or trigger + whitespace + rest)."""
    body = text.strip()
    # Longest first, so a configured "/new chat" wins over "/new" for "/new chat hello".
    for trigger in sorted((t.strip() for t in triggers if t and t.strip()), key=len, reverse=True):
        size = len(trigger)
        if body[:size].lower() != trigger.lower():
            continue
        if len(body) == size:
            return Command(rotation_name(trigger), trigger)
        if body[size].isspace():
            return Command(rotation_name(trigger), trigger, body[size:].strip())
    return None


def parse_command(
    text: str,
    reset_triggers: Sequence[str] = DEFAULT_RESET_TRIGGERS,
    allowed: Sequence[str] = ALL_COMMANDS,
) -> Command | None:
    """The command in a user message, or None for an ordinary message (or a command not ``allowed``:
    ``/compact``, ``/status``, ``/new``, ``/reset``, the last two covering the reset triggers)."""
    found = match_reset_trigger(text, reset_triggers)
    if found is None:
        body = text.strip()
        compact = _COMPACT.fullmatch(body)
        if compact is not None:
            found = Command("compact", "/compact", (compact.group("rest") or "").strip())
        elif _STATUS.fullmatch(body):
            found = Command("status", "/status")
    if found is None or f"/{found.name}" not in allowed:
        return None
    return found


# ---------------------------------------------------------------------------- status


@dataclass(frozen=True, slots=True)
class SessionStatus:
    """What ``/status`` shows: where the session stands against its thresholds (tokens projected now)."""

    session_key: str
    session_id: str
    tokens: int
    context_window: int
    flush_threshold: int
    compaction_threshold: int
    compaction_count: int
    flushed_this_cycle: bool
    memory_flush_at: int | None
    memory_flush_compaction_count: int | None
    total_tokens: int | None  # the provider's last reported prompt size, from the store
    transcript: str  # the file, or "" where the backend keeps no transcript files
    model: str
    stale: str | None = None  # "daily" / "idle": the next message starts a new session
    scaled: tuple[str, ...] = ()  # settings cut to fit this window (config.WindowBudget)
    scaled_written: bool = False  # ... values the user wrote among them (a window found at run time)

    def to_json(self) -> dict[str, Any]:
        return {
            "sessionKey": self.session_key,
            "sessionId": self.session_id,
            "tokens": self.tokens,
            "contextWindow": self.context_window,
            "flushThreshold": self.flush_threshold,
            "compactionThreshold": self.compaction_threshold,
            "compactionCount": self.compaction_count,
            "flushedThisCycle": self.flushed_this_cycle,
            "memoryFlushAt": self.memory_flush_at,
            "memoryFlushCompactionCount": self.memory_flush_compaction_count,
            "totalTokens": self.total_tokens,
            "transcript": self.transcript,
            "model": self.model,
            "stale": self.stale,
            "scaledToWindow": list(self.scaled),
        }


def session_status(state: SessionState) -> SessionStatus:
    """The status of a session, counters read fresh from the store (another process may write)."""
    stored = state.runner.store.get(state.key)
    entry = stored if stored is not None else state.entry
    data = entry.to_json_dict()
    budget = state.budget
    return SessionStatus(
        session_key=state.key,
        session_id=entry.session_id,
        tokens=state.projection().tokens,
        context_window=state.context_window,
        flush_threshold=budget.flush_threshold,
        compaction_threshold=budget.compaction_threshold,
        compaction_count=entry.compaction_count,
        flushed_this_cycle=cycle_flushed(data),
        memory_flush_at=entry.memory_flush_at,
        memory_flush_compaction_count=entry.memory_flush_compaction_count,
        total_tokens=entry.total_tokens,
        transcript=str(state.transcript.path or ""),
        model=str(getattr(state.runner.model, "name", "") or ""),
        stale=stale_reason(state),
        scaled=budget.scaled,
        scaled_written=budget.forced,
    )


def format_status(status: SessionStatus) -> str:
    """Human lines for ``/status``, which end users see: no server path (the transcript is in
    :meth:`SessionStatus.to_json` for the developer)."""
    pct = 100.0 * status.tokens / status.context_window if status.context_window else 0.0
    if status.flushed_this_cycle:
        when = _format_ms(status.memory_flush_at)
        flush = f"done this cycle{f' ({when})' if when else ''}"
    elif status.memory_flush_compaction_count is not None:
        flush = f"not yet this cycle (last flush in cycle {status.memory_flush_compaction_count})"
    else:
        flush = "not yet this cycle"
    return "\n".join(
        [
            f"Session {status.session_key} · id {status.session_id}",
            f"Model: {status.model or 'unknown'}",
            f"Tokens: {status.tokens:,} / {status.context_window:,} ({pct:.1f}%) · "
            f"flush at {status.flush_threshold:,} · compaction at {status.compaction_threshold:,}",
            *([_scaled_line(status)] if status.scaled else []),
            f"Compactions: {status.compaction_count} · memory flush: {flush}",
            *(
                [f"Expired ({status.stale} reset): the next message starts a new session"]
                if status.stale
                else []
            ),
        ]
    )


def _scaled_line(status: SessionStatus) -> str:
    keys = ", ".join(status.scaled)
    if status.scaled_written:
        window = f"{status.context_window:,}-token window"
        return f"Configured values scaled: they leave no room in this {window}: {keys}"
    return f"Thresholds: defaults scaled to this window: {keys}"


def _format_ms(ms: int | None) -> str:
    if not ms:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def compact_reply(result: CompactionResult) -> str:
    """OpenClaw's ``/compact`` replies: ``Compacted (X → Y)``, ``Compaction skipped``, ``… failed``."""
    flushed = " · memory flushed first" if result.flushed else ""
    if result.ok:
        return f"Compacted ({result.tokens_before:,} → {result.tokens_after:,} tokens){flushed}"
    if result.error == "nothing to compact":
        return f"Compaction skipped: nothing to compact{flushed}"
    return f"Compaction failed: {result.error}{flushed}"


# ---------------------------------------------------------------------------- dispatch


def check_user_text(text: object) -> str:
    """``text`` when it is a message the transcript and the model can take, else a :class:`UsageError`
    naming the problem (nothing has been written yet)."""
    if not isinstance(text, str):
        raise UsageError(f"the message must be a str, not {type(text).__name__}")
    problem = text_problem(text)
    if problem is not None:
        raise UsageError(
            f"the message {problem} (decode the input with errors='replace', or join surrogate pairs)"
        )
    return text


async def before_turn(state: SessionState, text: str) -> TurnResult | str:
    """Run what must happen before a user turn: freshness, then the command in ``text`` if any.

    Returns the finished :class:`TurnResult` when the message was wholly a command, else the text
    to run as an ordinary turn (``"/new hello"`` rotates, then ``"hello"`` is the turn). A message that
    is not text is refused first (:func:`check_user_text`).
    """
    text = check_user_text(text)
    session_cfg = state.runner.config.session
    command = parse_command(text, session_cfg.reset_triggers, session_cfg.commands)
    if command is not None and command.name in ("new", "reset"):
        rotation = await rotate(state, command.name)
        if command.rest:
            return command.rest
        return _command_result(state, command, rotation.reply())
    if command is not None and command.name == "status":  # looks only: never rotates a stale session
        return _command_result(state, command, format_status(session_status(state)))
    reason = stale_reason(state)
    if reason is not None:
        await rotate(state, reason)
    if command is None:
        return text
    result = await compact_through_gate(state, "manual", command.rest or None)
    return _command_result(state, command, compact_reply(result))


def ordinary_message(state: SessionState, text: str) -> str | None:
    """``text`` as :func:`before_turn` would run it when it is an ordinary message and nothing comes before
    it (no command, no reset due); None otherwise, or when it is refused."""
    try:
        text = check_user_text(text)
    except UsageError:
        return None
    session_cfg = state.runner.config.session
    if parse_command(text, session_cfg.reset_triggers, session_cfg.commands) is not None:
        return None
    if stale_reason(state) is not None:
        return None
    return text


def _command_result(state: SessionState, command: Command, reply: str) -> TurnResult:
    return TurnResult(reply, (), Usage(), tuple(state.events), command=command.name)
