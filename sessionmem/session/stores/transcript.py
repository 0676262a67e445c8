"""The transcript format (reference §3.2, §2.4; documented field by field in transcripts/README.md):
what every transcript backend stores, whatever keeps it (JSONL files:
:mod:`~sessionmem.session.stores.transcript_folder`; PostgreSQL rows:
:mod:`~sessionmem.session.stores.postgres_transcript`).

One JSON object per entry. The header (``type: "session"``) comes first; every other entry has ``type``,
``id`` (8 hex, unique in the transcript), ``parentId`` (the previous entry's id, or null) and an ISO
``timestamp``. :class:`Message` is converted to and from entry dicts here and nowhere else
(:func:`message_to_dict`, :func:`message_from_dict`), and :class:`EntryChain` appends the typed entries
for every backend, which only writes the finished entry. Pure: no I/O here.
"""

from __future__ import annotations

import secrets
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict, Unpack

from sessionmem.errors import TranscriptError
from sessionmem.messages import Message, ToolCall, Usage

TRANSCRIPT_VERSION = 3
COMPACTION_SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
)
COMPACTION_SUMMARY_SUFFIX = "\n</summary>"


def iso_now() -> str:
    """UTC now as ISO 8601 with milliseconds and a ``Z`` suffix (JavaScript's ``toISOString`` form)."""
    return iso_from_ms(int(datetime.now(UTC).timestamp() * 1000))


def iso_from_ms(ms: int) -> str:
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def compaction_summary_text(summary: str) -> str:
    """How a compaction summary is shown to the model when the context is rebuilt."""
    return f"{COMPACTION_SUMMARY_PREFIX}{summary}{COMPACTION_SUMMARY_SUFFIX}"


# --- Message <-> entry dict: the one place -------------------------------------------------------


class MessageMeta(TypedDict, total=False):
    """What a ``message`` entry records beside the message itself (each optional)."""

    provider: str | None  # who answered (assistant messages)
    model: str | None
    stop_reason: str | None  # default: "toolUse" when the message calls tools, else "stop"
    provenance: dict[str, Any] | None  # e.g. {"kind": "memory_flush"}: readers may leave it out


def message_to_dict(msg: Message, **meta: Unpack[MessageMeta]) -> dict[str, Any]:
    """The ``message`` field of a ``message`` entry for ``msg``."""
    out = _message_dict(msg, meta)
    provenance = meta.get("provenance")
    if provenance:
        out["provenance"] = provenance
    return out


def _message_dict(msg: Message, meta: MessageMeta) -> dict[str, Any]:
    if msg.role == "user":
        return {"role": "user", "content": msg.content, "timestamp": msg.timestamp}
    if msg.role == "system":
        # Not in pi's format (the system prompt stays out of the file); readable if a caller stores one.
        return {"role": "system", "content": msg.content, "timestamp": msg.timestamp}
    if msg.role == "tool":
        return {
            "role": "toolResult",
            "toolCallId": msg.tool_call_id,
            "toolName": msg.tool_name,
            "content": [{"type": "text", "text": msg.content}],
            "isError": msg.is_error,
            "timestamp": msg.timestamp,
        }
    if msg.role == "assistant":
        content: list[dict[str, Any]] = []
        if msg.content:
            content.append({"type": "text", "text": msg.content})
        for call in msg.tool_calls:
            content.append(
                {"type": "toolCall", "id": call.id, "name": call.name, "arguments": call.arguments}
            )
        out: dict[str, Any] = {"role": "assistant", "content": content}
        if (provider := meta.get("provider")) is not None:
            out["provider"] = provider
        if (model := meta.get("model")) is not None:
            out["model"] = model
        if msg.usage is not None:
            u = msg.usage
            out["usage"] = {
                "input": u.input,
                "output": u.output,
                "cacheRead": u.cache_read,
                "cacheWrite": u.cache_write,
                "totalTokens": u.total_tokens,
            }
        out["stopReason"] = meta.get("stop_reason") or ("toolUse" if msg.tool_calls else "stop")
        out["timestamp"] = msg.timestamp
        return out
    raise TranscriptError(f"cannot record a message with role {msg.role!r}")


def _text_of(content: Any) -> str:
    """Text of a content field: a string, or the text blocks of a block list joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def message_from_dict(data: Any) -> Message | None:
    """The :class:`Message` for an entry's ``message`` field, or None for roles outside the context."""
    if not isinstance(data, dict):
        return None
    role = data.get("role")
    ts = data.get("timestamp")
    kw: dict[str, Any] = {"timestamp": ts} if isinstance(ts, int) and not isinstance(ts, bool) else {}
    if role in ("user", "system"):
        return Message(role, _text_of(data.get("content")), **kw)
    if role == "toolResult":
        return Message(
            "tool",
            _text_of(data.get("content")),
            tool_call_id=data.get("toolCallId"),
            tool_name=data.get("toolName"),
            is_error=bool(data.get("isError", False)),
            **kw,
        )
    if role == "assistant":
        content = data.get("content")
        calls: list[ToolCall] = []
        if isinstance(content, list):
            for b in content:
                if isinstance(b, dict) and b.get("type") == "toolCall":
                    args = b.get("arguments")
                    calls.append(
                        ToolCall(
                            str(b.get("id", "")),
                            str(b.get("name", "")),
                            args if isinstance(args, dict) else {},
                        )
                    )
        usage = None
        raw_usage = data.get("usage")
        if isinstance(raw_usage, dict):
            usage = Usage(
                input=_int(raw_usage.get("input")),
                output=_int(raw_usage.get("output")),
                cache_read=_int(raw_usage.get("cacheRead")),
                cache_write=_int(raw_usage.get("cacheWrite")),
            )
        return Message("assistant", _text_of(content), tool_calls=tuple(calls), usage=usage, **kw)
    return None


def message_fields(msg: Message, **meta: Unpack[MessageMeta]) -> dict[str, Any]:
    """The fields of a ``message`` entry for ``msg``."""
    return {"message": message_to_dict(msg, **meta)}


def new_entry_id(taken: set[str]) -> str:
    """A new entry id (8 hex) not in ``taken``, added to it."""
    while True:
        eid = secrets.token_hex(4)
        if eid not in taken:
            taken.add(eid)
            return eid


def new_entry(etype: str, entry_id: str, parent_id: str | None, fields: dict[str, Any]) -> dict[str, Any]:
    """A transcript entry as stored (one JSONL line, one database row): type, id, parentId, timestamp, then
    the type's fields."""
    return {"type": etype, "id": entry_id, "parentId": parent_id, "timestamp": iso_now(), **fields}


def new_header(
    session_id: str,
    cwd: str | Path | None,
    *,
    session_key: str | None = None,
    parent_session: str | None = None,
) -> dict[str, Any]:
    """A transcript's header (the JSONL file's first line; a database keeps it with the transcript)."""
    header: dict[str, Any] = {
        "type": "session",
        "version": TRANSCRIPT_VERSION,
        "id": session_id,
        "timestamp": iso_now(),
        "cwd": str(cwd if cwd is not None else Path.cwd()),
    }
    if session_key is not None:
        header["sessionKey"] = session_key
    if parent_session is not None:
        header["parentSession"] = parent_session
    return header


# --- Entries -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Entry:
    """One parsed transcript line (not the header). ``data`` is the raw dict as stored."""

    type: str
    id: str
    parent_id: str | None
    timestamp: str
    line_no: int
    data: dict[str, Any] = field(repr=False)

    @property
    def message(self) -> Message | None:
        return message_from_dict(self.data.get("message")) if self.type == "message" else None

    @property
    def provider(self) -> str | None:
        m = self.data.get("message")
        return m.get("provider") if isinstance(m, dict) else None

    @property
    def model(self) -> str | None:
        m = self.data.get("message")
        return m.get("model") if isinstance(m, dict) else None

    @property
    def stop_reason(self) -> str | None:
        m = self.data.get("message")
        return m.get("stopReason") if isinstance(m, dict) else None


def entry_from_dict(no: int, obj: dict[str, Any]) -> Entry | None:
    """The :class:`Entry` for one stored line (``no``: its 1-based position); None for the header and for
    objects that are not entries."""
    etype, eid = obj.get("type"), obj.get("id")
    if not isinstance(etype, str) or etype == "session" or not isinstance(eid, str):
        return None
    parent = obj.get("parentId")
    ts = obj.get("timestamp")
    return Entry(
        etype, eid, parent if isinstance(parent, str) else None, ts if isinstance(ts, str) else "", no, obj
    )


def context_from_entries(entries: Sequence[Entry]) -> list[tuple[str, Message]]:
    """The model context of a transcript's entries as ``(entry_id, message)`` pairs (reference §2.4).

    After a compaction: the latest compaction's summary (as a user message, keyed by the compaction
    entry's id), then the messages from ``firstKeptEntryId`` on, skipping the compaction entry itself.
    Without one: every message.
    """
    last_compaction = None
    for i, e in enumerate(entries):
        if e.type == "compaction":
            last_compaction = i
    if last_compaction is None:
        return [(e.id, m) for e in entries if (m := e.message) is not None]
    comp = entries[last_compaction]
    first_kept = comp.data.get("firstKeptEntryId")
    start = last_compaction + 1
    for i, e in enumerate(entries[:last_compaction]):
        if e.id == first_kept:
            start = i
            break
    summary = str(comp.data.get("summary", ""))
    ts = ms_from_iso(comp.timestamp)
    summary_msg = Message("user", compaction_summary_text(summary))
    if ts is not None:
        summary_msg = Message("user", summary_msg.content, timestamp=ts)
    out: list[tuple[str, Message]] = [(comp.id, summary_msg)]
    for e in entries[start:]:
        if e.type == "compaction":
            continue
        m = e.message
        if m is not None:
            out.append((e.id, m))
    return out


def ms_from_iso(text: str) -> int | None:
    """Milliseconds since the epoch of an ISO 8601 time (``Z`` allowed); None when it is not one."""
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


class EntryChain(ABC):
    """The appending half every transcript backend shares: new entry ids, the ``parentId`` chain, and the
    typed appends (``message``, ``compaction``, ``custom``) built from the functions above. A backend
    writes the finished entry (:meth:`write_entry`: one JSONL line, one database row) and tells the chain
    of the entries it reads (:meth:`note_entry`), so the next append follows the last one."""

    def __init__(self, ids: set[str] | None = None, leaf: str | None = None) -> None:
        self._ids: set[str] = ids if ids is not None else set()
        self._leaf = leaf

    @property
    def leaf_id(self) -> str | None:
        """Id of the last entry appended (or read)."""
        return self._leaf

    def note_entry(self, entry_id: str) -> None:
        """An entry read from the store: its id is taken, and it is the chain's end."""
        self._ids.add(entry_id)
        self._leaf = entry_id

    @abstractmethod
    def write_entry(self, entry: dict[str, Any]) -> None:
        """Store ``entry`` whole after the others (raise :class:`TranscriptError` when it cannot be)."""

    def append_entry(self, etype: str, fields: dict[str, Any]) -> str:
        """Append an entry of type ``etype`` with ``fields``; returns its id."""
        eid = new_entry_id(self._ids)
        self.write_entry(new_entry(etype, eid, self._leaf, fields))
        self._leaf = eid
        return eid

    def append_message(self, msg: Message, **meta: Unpack[MessageMeta]) -> str:
        """Append a ``message`` entry; returns its id. ``provenance`` (e.g. ``{"kind": "memory_flush"}``
        for the silent flush turn) is stored on the message so readers can leave such messages out."""
        return self.append_entry("message", message_fields(msg, **meta))

    def append_compaction(
        self,
        summary: str,
        first_kept_entry_id: str | None,
        tokens_before: int,
        tokens_after: int | None = None,
        *,
        details: dict[str, Any] | None = None,
    ) -> str:
        """Append a ``compaction`` entry; the context is rebuilt from it (:func:`context_from_entries`)."""
        fields: dict[str, Any] = {
            "summary": summary,
            "firstKeptEntryId": first_kept_entry_id,
            "tokensBefore": tokens_before,
        }
        if tokens_after is not None:
            fields["tokensAfter"] = tokens_after
        if details is not None:
            fields["details"] = details
        return self.append_entry("compaction", fields)

    def append_custom(self, custom_type: str, data: Any = None) -> str:
        """Append a ``custom`` entry (not part of the model's context), e.g. a flush marker."""
        return self.append_entry("custom", {"customType": custom_type, "data": data})
