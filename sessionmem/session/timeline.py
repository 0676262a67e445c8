"""A session's history read from its transcripts: one point per turn, a marker per flush, compaction,
``/new`` and overflow, and the entries shown one by one (the inspector's chart and transcript view).

The transcript is the record (``transcripts/README.md``), so everything here is derived from its lines
and nothing from the store's counters:

- a *turn* starts at each user message that is not part of the silent flush; its point carries the
  context size at that turn: the prompt tokens the provider reported for the turn's last model call
  (``usage``: input + cacheRead + cacheWrite, the figure the thresholds are compared with), or None
  when the provider reported none;
- a *flush* marker groups the consecutive messages of one flush turn (``provenance.kind`` =
  ``memory_flush``) and carries what it wrote: the arguments of its calls to the memory write tools
  (:data:`~sessionmem.session.turn.toolset.WRITTEN_TEXT_ARGUMENT`) and whether each one succeeded;
- a *compaction* marker is a ``compaction`` entry and carries what the summary kept (the summary, the
  first entry kept verbatim, the sizes before and after); one whose ``details.reason`` is ``overflow``
  (the provider said the context was over its window) is an *overflow* marker instead;
- a *new* marker stands between two transcripts of one session key: ``/new``, ``/reset`` or a daily or
  idle reset archived the first and started the second.

A marker's ``afterTurn`` is the number of turns before it (0: before the first). Pure: the caller reads
the lines (:mod:`sessionmem.session.overview`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sessionmem.memory.tools.writing import WRITTEN_TEXT_ARGUMENT
from sessionmem.messages import Message, flush_cycle, flush_write_failed, written_in_a_flush
from sessionmem.session.stores.transcript import Entry, message_from_dict

MAX_TEXT_CHARS = 4_000  # a message's text, a tool call's argument, as shown (the file keeps it whole)
MAX_SUMMARY_CHARS = 20_000  # a compaction summary, as shown


@dataclass(frozen=True, slots=True)
class HistoryPart:
    """One transcript of a session key: its name (a file name, or a session id where the store keeps
    rows), its session id, when it started (the header's ``timestamp``), and its entries in order."""

    name: str
    session_id: str | None
    started: str
    entries: Sequence[Entry]


@dataclass(slots=True)
class Timeline:
    """What :func:`build_timeline` found: ``points`` (one per turn) and ``markers`` (in order)."""

    points: list[dict[str, Any]] = field(default_factory=list)
    markers: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"turns": len(self.points), "points": self.points, "markers": self.markers}


def capped_text(text: str, limit: int = MAX_TEXT_CHARS) -> dict[str, Any]:
    """``{"text"}``, cut to ``limit`` characters with ``"truncated": true`` and the full length when over."""
    if len(text) <= limit:
        return {"text": text}
    return {"text": text[:limit], "truncated": True, "chars": len(text)}


def _shown_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """A tool call's arguments as shown: strings capped, other values kept (they are bounded on write)."""
    return {
        name: value[:MAX_TEXT_CHARS] if isinstance(value, str) else value for name, value in arguments.items()
    }


def _written(message: Message) -> list[dict[str, Any]]:
    """The memory writes among ``message``'s tool calls: tool, path (when the tool takes one), the text."""
    out = []
    for call in message.tool_calls:
        argument = WRITTEN_TEXT_ARGUMENT.get(call.name)
        if argument is None:
            continue
        text = call.arguments.get(argument)
        path = call.arguments.get("path")
        out.append(
            {
                "callId": call.id,
                "tool": call.name,
                "path": path if isinstance(path, str) else None,
                **capped_text(text if isinstance(text, str) else ""),
                "ok": None,  # set from its tool result
            }
        )
    return out


def _prompt_tokens(message: Message) -> int | None:
    usage = message.usage
    return usage.prompt_tokens if usage is not None and usage.prompt_tokens > 0 else None


def build_timeline(parts: Iterable[HistoryPart]) -> Timeline:
    """The points and markers of a session key's transcripts, oldest first (see the module docstring)."""
    timeline = Timeline()
    turn = 0
    point: dict[str, Any] | None = None
    flush: dict[str, Any] | None = None
    for index, part in enumerate(parts):
        if index > 0:
            timeline.markers.append(
                {"kind": "new", "afterTurn": turn, "at": part.started, "sessionId": part.session_id}
            )
            point, flush = None, None
        for entry in part.entries:
            if entry.type == "compaction":
                flush = None
                timeline.markers.append(_compaction_marker(entry, turn))
                continue
            raw = entry.data.get("message")
            message = message_from_dict(raw) if entry.type == "message" else None
            if message is None or not isinstance(raw, dict):
                continue
            if written_in_a_flush(raw):
                cycle = flush_cycle(raw)
                if flush is None or flush["cycle"] != cycle or message.role == "user":
                    flush = _flush_marker(entry, turn, cycle)
                    timeline.markers.append(flush)
                _add_to_flush(flush, message, failed=flush_write_failed(raw))
                continue
            flush = None
            if message.role == "user":
                turn += 1
                point = {"turn": turn, "tokens": None, "at": entry.timestamp, "entryId": entry.id}
                timeline.points.append(point)
            elif message.role == "assistant" and point is not None:
                tokens = _prompt_tokens(message)
                if tokens is not None:
                    point["tokens"] = tokens  # the turn's last call: the largest context of the turn
    return timeline


def _flush_marker(entry: Entry, turn: int, cycle: int | None) -> dict[str, Any]:
    return {
        "kind": "flush",
        "afterTurn": turn,
        "at": entry.timestamp,
        "entryId": entry.id,
        "cycle": cycle,
        "tokens": None,  # the context size when the flush's first call was made
        "writes": [],
        "ended": False,  # an assistant message without tool calls closed it (the flush counts)
        "writeFailed": False,
    }


def _add_to_flush(flush: dict[str, Any], message: Message, *, failed: bool) -> None:
    if failed:
        flush["writeFailed"] = True
    if message.role == "assistant":
        if flush["tokens"] is None:
            flush["tokens"] = _prompt_tokens(message)
        flush["writes"].extend(_written(message))
        if not message.tool_calls:
            flush["ended"] = True
    elif message.role == "tool":
        for write in flush["writes"]:
            if write["callId"] == message.tool_call_id:
                write["ok"] = not message.is_error


def _compaction_marker(entry: Entry, turn: int) -> dict[str, Any]:
    data = entry.data
    details = data.get("details")
    reason = details.get("reason") if isinstance(details, dict) else None
    summary = data.get("summary")
    before, after = data.get("tokensBefore"), data.get("tokensAfter")
    kept = data.get("firstKeptEntryId")
    summary_shown = capped_text(summary if isinstance(summary, str) else "", MAX_SUMMARY_CHARS)
    return {
        "kind": "overflow" if reason == "overflow" else "compaction",
        "afterTurn": turn,
        "at": entry.timestamp,
        "entryId": entry.id,
        "reason": reason if isinstance(reason, str) else None,
        "summary": summary_shown["text"],
        "summaryTruncated": bool(summary_shown.get("truncated")),
        "firstKeptEntryId": kept if isinstance(kept, str) else None,
        "tokensBefore": before if isinstance(before, int) else None,
        "tokensAfter": after if isinstance(after, int) else None,
    }


def shown_entry(entry: Entry, number: int, part: HistoryPart) -> dict[str, Any]:
    """One entry as the transcript view shows it: ``number`` (1-based over the key's whole history), the
    transcript it is in, its kind (``message``, ``flush`` for the flush turn's messages,
    ``compaction``, or the entry's own type), and its text capped (the file keeps it whole)."""
    out: dict[str, Any] = {
        "n": number,
        "transcript": part.name,
        "id": entry.id,
        "type": entry.type,
        "kind": entry.type,
        "at": entry.timestamp,
    }
    if entry.type == "compaction":
        marker = _compaction_marker(entry, 0)
        out.update({k: v for k, v in marker.items() if k not in ("kind", "afterTurn", "at", "entryId")})
        return out
    raw = entry.data.get("message")
    message = message_from_dict(raw) if entry.type == "message" else None
    if message is None or not isinstance(raw, dict):
        custom = entry.data.get("customType")
        if isinstance(custom, str):
            out["customType"] = custom
        return out
    if written_in_a_flush(raw):
        out["kind"] = "flush"
        out["cycle"] = flush_cycle(raw)
    out["role"] = message.role
    out.update(capped_text(message.content))
    if message.tool_calls:
        out["toolCalls"] = [
            {"id": c.id, "name": c.name, "arguments": _shown_arguments(c.arguments)}
            for c in message.tool_calls
        ]
    if message.role == "tool":
        out["toolName"] = message.tool_name
        out["isError"] = message.is_error
    if message.usage is not None:
        usage = message.usage
        out["usage"] = {
            "input": usage.input,
            "output": usage.output,
            "cacheRead": usage.cache_read,
            "cacheWrite": usage.cache_write,
            "promptTokens": usage.prompt_tokens,
        }
    return out
