"""JSONL session transcripts (reference §3.2, §2.4; documented field by field in transcripts/README.md).

One JSON object per line. Line 1 is the header (``type: "session"``); every other line is an entry with
``type``, ``id`` (8 hex, unique in the file), ``parentId`` (the previous entry's id, or null) and an ISO
``timestamp``. :class:`Message` is converted to and from entry dicts here and nowhere else
(:func:`message_to_dict`, :func:`message_from_dict`).

Why appends cannot tear a line in the middle of the file: each entry is written with a single
``os.write`` of the whole line (newline included) on an ``O_APPEND`` descriptor, under an advisory
``flock`` where the platform has one, so concurrent writers interleave whole lines. A writer killed
mid-write can leave a partial *last* line; readers skip it, and the next append first writes the
missing ``\\n`` so the torn fragment stays alone on its line.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

try:
    import fcntl
except ImportError:  # Windows: appends are still single writes
    fcntl = None  # type: ignore[assignment]

from sessionmem.errors import FileWriteError, TranscriptError, os_error_reason
from sessionmem.messages import Message, ToolCall, Usage
from sessionmem.safefs import PRIVATE_FILE_MODE, make_private_dirs, write_at_end

log = logging.getLogger(__name__)

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


def message_to_dict(
    msg: Message, *, provider: str | None = None, model: str | None = None, stop_reason: str | None = None
) -> dict[str, Any]:
    """The ``message`` field of a ``message`` entry for ``msg``."""
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
        if provider is not None:
            out["provider"] = provider
        if model is not None:
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
        out["stopReason"] = stop_reason or ("toolUse" if msg.tool_calls else "stop")
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


def message_fields(
    msg: Message,
    *,
    provider: str | None = None,
    model: str | None = None,
    stop_reason: str | None = None,
    provenance: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The fields of a ``message`` entry for ``msg`` (every transcript backend writes these)."""
    data = message_to_dict(msg, provider=provider, model=model, stop_reason=stop_reason)
    if provenance:
        data["provenance"] = provenance
    return {"message": data}


def compaction_fields(
    summary: str,
    first_kept_entry_id: str | None,
    tokens_before: int,
    tokens_after: int | None = None,
    *,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The fields of a ``compaction`` entry (every transcript backend writes these)."""
    fields: dict[str, Any] = {
        "summary": summary,
        "firstKeptEntryId": first_kept_entry_id,
        "tokensBefore": tokens_before,
    }
    if tokens_after is not None:
        fields["tokensAfter"] = tokens_after
    if details is not None:
        fields["details"] = details
    return fields


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


def read_entries(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Every valid line of a transcript as ``(line_no, dict)`` (1-based, header included).

    Malformed lines (bad JSON, not an object, a torn last line) are skipped, never raised.
    A missing file yields nothing.
    """
    for no, _end, obj, _line in _read_lines(path):
        yield no, obj


def _read_lines(path: str | Path) -> Iterator[tuple[int, int, dict[str, Any], bytes]]:
    """:func:`read_entries` with the byte offset at which each line ends (its newline included), and the
    line itself (without its newline)."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise TranscriptError(f"cannot read transcript {path}: {exc}") from exc
    end = 0
    for no, line in enumerate(raw.split(b"\n"), start=1):
        end = min(len(raw), end + len(line) + 1)
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            log.debug("skipping malformed line %d of %s", no, path)
            continue
        if isinstance(obj, dict):
            yield no, end, obj, line


def read_messages(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """The ``message`` entries of a transcript as ``(line_no, entry dict)``, for readers (hook, indexing).

    Use :func:`message_from_dict` on ``entry["message"]`` to get a :class:`Message`.
    """
    return [
        (no, obj)
        for no, obj in read_entries(path)
        if obj.get("type") == "message" and isinstance(obj.get("message"), dict)
    ]


def read_header(path: str | Path) -> dict[str, Any] | None:
    for _, obj in read_entries(path):
        return obj if obj.get("type") == "session" else None
    return None


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


# --- The transcript file -------------------------------------------------------------------------


class Transcript:
    """An append-only JSONL transcript. Open with :meth:`open`; every append is one whole line."""

    def __init__(
        self,
        path: Path,
        session_id: str,
        header: dict[str, Any],
        ids: set[str],
        leaf: str | None,
        compaction_end: int = 0,
    ) -> None:
        self.path = path
        self.session_id = session_id
        self.header = header
        self._ids = ids
        self._leaf = leaf
        # Byte offset at which the latest compaction entry's line ends (0 without one): the size-forced
        # flush measures the growth after it (see bytes_since_compaction).
        self._compaction_end = compaction_end

    @classmethod
    def open(
        cls,
        path: str | Path,
        session_id: str,
        cwd: str | Path | None = None,
        *,
        session_key: str | None = None,
        parent_session: str | None = None,
    ) -> Transcript:
        """Open ``path``, creating it with a header line when it does not exist (or is empty)."""
        p = Path(path)
        try:
            make_private_dirs(p.parent)
        except OSError as exc:
            raise TranscriptError(
                f"cannot create transcript folder {p.parent}: {os_error_reason(exc)}"
            ) from exc
        header: dict[str, Any] | None = None
        ids: set[str] = set()
        leaf: str | None = None
        any_line = False
        compaction_end = 0
        for no, end, obj, _line in _read_lines(p):
            any_line = True
            if obj.get("type") == "session":
                header = header or obj
                continue
            entry = entry_from_dict(no, obj)
            if entry is not None:
                ids.add(entry.id)
                leaf = entry.id
                if entry.type == "compaction":
                    compaction_end = end
        if header is None:
            header = new_header(session_id, cwd, session_key=session_key, parent_session=parent_session)
            if not any_line:  # a new (or empty, or wholly unreadable) file gets its header first
                _append_line(p, header, only_if_empty=True)
        return cls(p, session_id, header, ids, leaf, compaction_end)

    @property
    def leaf_id(self) -> str | None:
        """Id of the last entry appended (or read on open)."""
        return self._leaf

    def _append(self, etype: str, fields: dict[str, Any]) -> str:
        eid = new_entry_id(self._ids)
        entry = new_entry(etype, eid, self._leaf, fields)
        end = _append_line(self.path, entry, header=self.header)
        self._leaf = eid
        if etype == "compaction":
            self._compaction_end = end
        return eid

    def append_message(
        self,
        msg: Message,
        *,
        provider: str | None = None,
        model: str | None = None,
        stop_reason: str | None = None,
        provenance: dict[str, Any] | None = None,
    ) -> str:
        """Append a ``message`` entry; returns its id. ``provenance`` (e.g. ``{"kind": "memory_flush"}``
        for the silent flush turn) is stored on the message so readers can leave such messages out."""
        return self._append(
            "message",
            message_fields(
                msg, provider=provider, model=model, stop_reason=stop_reason, provenance=provenance
            ),
        )

    def append_compaction(
        self,
        summary: str,
        first_kept_entry_id: str | None,
        tokens_before: int,
        tokens_after: int | None = None,
        *,
        details: dict[str, Any] | None = None,
    ) -> str:
        """Append a ``compaction`` entry; the context is rebuilt from it (see :meth:`context_messages`)."""
        return self._append(
            "compaction",
            compaction_fields(summary, first_kept_entry_id, tokens_before, tokens_after, details=details),
        )

    def append_custom(self, custom_type: str, data: Any = None) -> str:
        """Append a ``custom`` entry (not part of the model's context), e.g. a flush marker."""
        return self._append("custom", {"customType": custom_type, "data": data})

    def entries(self) -> list[Entry]:
        """All entries after the header, in file order; malformed lines skipped."""
        out = []
        for no, obj in read_entries(self.path):
            entry = entry_from_dict(no, obj)
            if entry is not None:
                out.append(entry)
        return out

    def stored_lines(self) -> Iterator[bytes]:
        """Every line of the file that holds a JSON object, the header first, byte for byte (without its
        newline): what a copy to another backend writes
        (:class:`~sessionmem.session.stores.backend.StoredLines`).
        Blank, torn and unreadable lines are left out, as every reader skips them."""
        for _no, _end, _obj, line in _read_lines(self.path):
            yield line

    def context_messages(self) -> list[tuple[str, Message]]:
        """The model context as ``(entry_id, message)`` pairs (:func:`context_from_entries`)."""
        return context_from_entries(self.entries())

    def messages(self) -> list[Message]:
        """Just the messages of :meth:`context_messages`."""
        return [m for _, m in self.context_messages()]

    def size_bytes(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def version(self) -> tuple[int, int, int] | None:
        """What changes whenever a line is appended, by anyone: the file's device, inode and size (it
        only grows; a replaced file is another inode). None when there is no file. One ``stat``."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_dev, st.st_ino, st.st_size)

    def bytes_since_compaction(self) -> int:
        """How much the file grew after the latest compaction entry (the whole file without one).

        Why not :meth:`size_bytes`: the transcript only grows, so once it passed
        ``forceFlushTranscriptBytes`` every new cycle would flush on its first turn, before it said
        anything worth saving. A file now shorter than the offset was replaced: all of it counts.
        """
        size = self.size_bytes()
        return size - self._compaction_end if size >= self._compaction_end else size


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


def archive_name(path: Path, when: datetime) -> Path:
    """``<file>.reset.<ISO 8601 UTC, ms, ':' replaced by '-'>`` (OpenClaw's archive name)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    stamp = when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return path.with_name(f"{path.name}.reset.{stamp.replace(':', '-')}")


def archive_transcript_file(path: Path, when: datetime) -> Path | None:
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


def ms_from_iso(text: str) -> int | None:
    """Milliseconds since the epoch of an ISO 8601 time (``Z`` allowed); None when it is not one."""
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def _append_line(
    path: Path, obj: dict[str, Any], *, header: dict[str, Any] | None = None, only_if_empty: bool = False
) -> int:
    """Append ``obj`` as one line with one ``os.write``; repair a torn last line first. Returns the byte
    offset at which the line ends (the file size right after the write).

    ``header`` is written first when the file is empty (it was archived or deleted under us), so a
    transcript never lacks its header. ``only_if_empty`` writes nothing unless the file is empty (two
    processes creating one transcript write one header).

    A write that cannot finish (a full disk: the kernel writes what fits, then refuses the rest) is rolled
    back to the size the file had, under the same lock, and raised as a :class:`TranscriptError` that
    names the file and the reason ("no space left on device"): no torn line is left behind.
    """
    line = orjson.dumps(obj) + b"\n"
    try:
        fd = os.open(
            path, os.O_RDWR | os.O_APPEND | os.O_CREAT, PRIVATE_FILE_MODE
        )  # read: the torn-line check
    except OSError as exc:
        raise TranscriptError(f"cannot open transcript {path} for append: {os_error_reason(exc)}") from exc
    try:
        if fcntl is not None:
            # Serialise the torn-line check with other writers: without it, a large concurrent append
            # seen half-way (i_size grows page by page) would make us add a needless blank line.
            fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if only_if_empty and size > 0:
            return size
        if size == 0 and header is not None:
            line = orjson.dumps(header) + b"\n" + line
        # Trigger: a writer died mid-line. Why: our line must start on a fresh line.
        # Outcome: the fragment stays alone on its (skipped) line and ours parses.
        if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line
        write_at_end(fd, line, size, str(path))
        return size + len(line)
    except FileWriteError as exc:
        # Trigger: the disk filled up (or another write error) part-way through our line. Why: the part
        # written would be a torn line, and the caller is told the entry was not recorded. Outcome: the
        # file was cut back to its size before the append (we still hold its lock).
        raise TranscriptError(
            f"cannot append to transcript {path}: {exc.reason} ({exc.detail}; the entry was not recorded)"
        ) from exc
    except OSError as exc:
        raise TranscriptError(f"cannot append to transcript {path}: {os_error_reason(exc)}") from exc
    finally:
        os.close(fd)  # also releases the flock
