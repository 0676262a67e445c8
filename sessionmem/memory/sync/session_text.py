"""Session transcripts as searchable text (reference §5, DESIGN decision 8).

A transcript (JSONL, reference §3.2) is flattened to one line per user/assistant message,
``User: …`` / ``Assistant: …``, whitespace collapsed and secrets redacted. ``line_map`` keeps the
1-based JSONL line of each flattened line, so a search hit on flattened lines 3–5 can cite (and
``memory_get`` can read back) the JSONL lines it came from. ``dates`` carries each message's UTC date
for the date dimension of search (DESIGN decision 11).

This module knows transcript files on disk only, never sessions: the index calls it, the session
layer never does. Everything but the small readers is pure.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from sessionmem.memory.sync.redact import redact_secrets
from sessionmem.memory.sync.transcript_names import FolderShelf, TranscriptShelf, is_live_transcript_name
from sessionmem.messages import written_in_a_flush

_NEWLINE_RUN = re.compile(r"\s*\n+\s*")
_SPACE_RUN = re.compile(r"\s+")
_LABELS = {"user": "User", "assistant": "Assistant"}


@dataclass(frozen=True, slots=True)
class SessionEntryText:
    """A transcript flattened for indexing; ``hash`` changes whenever content or line numbers do."""

    path: Path
    content: str
    line_map: list[int]  # 1-based JSONL line of each content line
    dates: list[str | None]  # YYYY-MM-DD (UTC) of each content line, None when the entry has no time
    hash: str
    size: int
    mtime_ns: int


# ---------------------------------------------------------------------------- pure flattening


def normalize_text(text: str) -> str:
    """Collapse newlines and runs of whitespace to single spaces (as OpenClaw does)."""
    return _SPACE_RUN.sub(" ", _NEWLINE_RUN.sub(" ", text)).strip()


def message_text(content: Any) -> str:
    """Text of a message's content: the string, or all ``text`` blocks joined with a space."""
    if isinstance(content, str):
        return normalize_text(content)
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            piece = normalize_text(block["text"])
            if piece:
                parts.append(piece)
    return " ".join(parts)


def entry_date(entry: dict[str, Any]) -> str | None:
    """UTC date of a transcript entry: its ``timestamp``, else its message's (OpenClaw writes ISO text
    on the entry and epoch milliseconds in the message; other tools put either form, or epoch seconds,
    in either place)."""
    message = entry.get("message")
    inner = message.get("timestamp") if isinstance(message, dict) else None
    return _utc_date(entry.get("timestamp")) or _utc_date(inner)


# Epoch values below this are seconds (it is 1973 in milliseconds, 5138 in seconds).
_MILLIS_FROM = 100_000_000_000


def _utc_date(stamp: Any) -> str | None:
    """``YYYY-MM-DD`` (UTC) of an ISO 8601 string or an epoch number (milliseconds or seconds)."""
    parsed: datetime | None = None
    if isinstance(stamp, str) and stamp.strip():
        try:
            parsed = datetime.fromisoformat(stamp.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
    elif isinstance(stamp, int | float) and not isinstance(stamp, bool):
        seconds = stamp / 1000 if abs(stamp) >= _MILLIS_FROM else stamp
        try:
            parsed = datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    return parsed.astimezone(UTC).date().isoformat() if parsed is not None else None


def flatten_line(raw: str | bytes) -> tuple[str, str | None] | None:
    """One JSONL line as ``("User: …", date)``, or None when it is not a user/assistant message.

    Blank, malformed and torn lines are not messages; neither are tool results, compaction or
    custom entries, nor the silent flush turn's messages (``provenance.kind == "memory_flush"``).
    """
    if not raw.strip():
        return None
    try:
        entry = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(entry, dict) or entry.get("type") != "message":
        return None
    message = entry.get("message")
    if not isinstance(message, dict):
        return None
    label = _LABELS.get(message.get("role"))  # type: ignore[arg-type]
    if label is None:
        return None
    if written_in_a_flush(message):
        return None  # the silent flush turn: its prompt is boilerplate, its notes are in memory files
    text = message_text(message.get("content"))
    if not text:
        return None
    return f"{label}: {redact_secrets(text)}", entry_date(entry)


def flatten_lines(
    lines: Iterable[str | bytes], first_line: int = 1
) -> tuple[list[str], list[int], list[str | None]]:
    """Flatten JSONL lines numbered from ``first_line``: (content lines, line map, dates)."""
    texts: list[str] = []
    line_map: list[int] = []
    dates: list[str | None] = []
    for number, raw in enumerate(lines, start=first_line):
        flat = flatten_line(raw)
        if flat is None:
            continue
        texts.append(flat[0])
        line_map.append(number)
        dates.append(flat[1])
    return texts, line_map, dates


def content_hash(content: str, line_map: list[int]) -> str:
    """OpenClaw's hash: ``sha256(content + "\\n" + ",".join(line_map))``."""
    payload = content + "\n" + ",".join(str(n) for n in line_map)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def remap_lines(start: int, end: int, line_map: list[int]) -> tuple[int, int]:
    """Map a chunk's 1-based flattened line range to JSONL lines; unchanged without a map."""
    if not line_map:
        return start, end
    last = len(line_map)
    lo = line_map[min(max(start, 1), last) - 1]
    hi = line_map[min(max(end, 1), last) - 1]
    return lo, max(lo, hi)


# ---------------------------------------------------------------------------- readers


@dataclass(frozen=True, slots=True)
class FlatTranscript:
    """A transcript's JSONL bytes flattened: the content, each content line's JSONL line and date, and
    OpenClaw's hash of content and line map."""

    content: str
    line_map: list[int]
    dates: list[str | None]
    hash: str


def flatten_transcript(data: bytes) -> FlatTranscript:
    """Flatten a whole transcript given as its JSONL bytes (pure)."""
    texts, line_map, dates = flatten_lines(data.split(b"\n"))
    content = "\n".join(texts)
    return FlatTranscript(content, line_map, dates, content_hash(content, line_map))


def build_session_entry(path: str | os.PathLike[str]) -> SessionEntryText:
    """Read and flatten one transcript file. Raises ``OSError`` if it cannot be read."""
    path = Path(path)
    with path.open("rb") as handle:
        stat = os.fstat(handle.fileno())
        data = handle.read()
    flat = flatten_transcript(data)
    return SessionEntryText(
        path=path,
        content=flat.content,
        line_map=flat.line_map,
        dates=flat.dates,
        hash=flat.hash,
        size=stat.st_size,
        mtime_ns=stat.st_mtime_ns,
    )


def _window(lines: Iterable[bytes], start: int, stop: int | None) -> Iterator[bytes]:
    for number, raw in enumerate(lines, start=1):
        if stop is not None and number >= stop:
            return
        if number >= start:
            yield raw


def read_session_lines(path: str | os.PathLike[str], start: int = 1, lines: int | None = None) -> str:
    """Flattened, redacted text of JSONL lines ``[start, start + lines)`` (``memory_get`` on a session hit).

    Lines that are not user/assistant messages contribute nothing, so the result can have fewer
    lines than asked. The raw JSONL (tool output, unredacted secrets) is never returned.
    """
    return "\n".join(session_window(path, start, lines)[0])


def session_window(
    path: str | os.PathLike[str], start: int = 1, lines: int | None = None
) -> tuple[list[str], list[int]]:
    """The flattened messages of JSONL lines ``[start, start + lines)`` and the JSONL line of each."""
    path = Path(path)
    return shelved_window(FolderShelf(path.parent), path.name, start, lines)


def shelved_window(
    shelf: TranscriptShelf, name: str, start: int = 1, lines: int | None = None
) -> tuple[list[str], list[int]]:
    """:func:`session_window` of transcript ``name`` on ``shelf`` (its JSONL form, whatever the store)."""
    start = max(1, start)
    stop = None if lines is None else start + max(0, lines)
    raw = shelf.read(name).split(b"\n")
    texts, line_map, _ = flatten_lines(_window(raw, start, stop), first_line=start)
    return texts, line_map


def list_session_files(sessions_dir: str | os.PathLike[str]) -> list[Path]:
    """The live transcripts in a sessions folder (regular files whose names pass
    :func:`~sessionmem.memory.sync.transcript_names.is_live_transcript_name`), sorted."""
    folder = Path(sessions_dir)
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = [
        folder / e.name
        for e in entries
        if is_live_transcript_name(e.name) and e.is_file(follow_symlinks=False)
    ]
    return sorted(found)


def count_newlines(path: str | os.PathLike[str], start: int, end: int, block: int = 64 * 1024) -> int:
    """Number of ``\\n`` bytes in ``[start, end)`` of a file, read in 64 KiB blocks."""
    if end <= start:
        return 0
    total = 0
    with open(path, "rb") as handle:
        handle.seek(start)
        remaining = end - start
        while remaining > 0:
            chunk = handle.read(min(block, remaining))
            if not chunk:
                break
            total += chunk.count(b"\n")
            remaining -= len(chunk)
    return total


# ---------------------------------------------------------------------------- delta tracking


@dataclass(slots=True)
class DeltaState:
    last_size: int = 0
    pending_bytes: int = 0
    pending_messages: int = 0


NewlineCounter = Callable[[int, int], int]


@dataclass(slots=True)
class SessionDeltaTracker:
    """When has a growing transcript changed enough to re-index it? (reference §5)

    Per file, bytes and newlines (≈ messages) appended since the last index are accumulated; a file
    is a hit once either reaches its threshold, and the threshold is subtracted so the remainder
    carries over. A file that shrank (rewritten or truncated) counts as entirely new. No I/O: the
    caller gives the current size and the newline count of :meth:`newline_range`, or a counter
    that is called only when the count matters.
    """

    delta_bytes: int = 100_000
    delta_messages: int = 50
    states: dict[str, DeltaState] = field(default_factory=dict)

    def state(self, path: str | os.PathLike[str]) -> DeltaState:
        return self.states.setdefault(os.fspath(path), DeltaState())

    def newline_range(self, path: str | os.PathLike[str], size: int) -> tuple[int, int]:
        """The byte range whose newlines :meth:`observe` wants for a file now ``size`` bytes long."""
        last = self.state(path).last_size
        return (0, size) if size < last else (last, size)

    def observe(
        self, path: str | os.PathLike[str], size: int, new_bytes_newlines: int | NewlineCounter
    ) -> bool:
        """Record the file's new size; True (and the thresholds consumed) when it should be re-indexed."""
        state = self.state(path)
        if size == state.last_size:
            return self._hit(state)
        start, end = self.newline_range(path, size)
        state.pending_bytes += end - start
        state.last_size = size
        bytes_hit_already = self.delta_bytes > 0 and state.pending_bytes >= self.delta_bytes
        if self.delta_messages > 0 and not bytes_hit_already:
            newlines = new_bytes_newlines(start, end) if callable(new_bytes_newlines) else new_bytes_newlines
            state.pending_messages += max(0, newlines)
        return self._hit(state)

    def observe_file(self, path: str | os.PathLike[str]) -> bool:
        """:meth:`observe` with a ``stat`` and a newline count of the file itself."""
        size = os.stat(path).st_size
        return self.observe(path, size, lambda lo, hi: count_newlines(path, lo, hi))

    def observe_shelved(self, shelf: TranscriptShelf, name: str) -> bool:
        """:meth:`observe` of transcript ``name`` on ``shelf`` (tracked by name); ``FileNotFoundError``
        when the shelf no longer keeps it (archived by ``/new``, deleted)."""
        found = shelf.scan([name])
        if not found:
            raise FileNotFoundError(name)
        return self.observe(name, found[0].size, lambda lo, hi: shelf.read(name, lo, hi - lo).count(b"\n"))

    def reset(self, path: str | os.PathLike[str], size: int) -> None:
        """After the file was indexed (or found unchanged): nothing is pending."""
        self.states[os.fspath(path)] = DeltaState(last_size=size)

    def forget(self, path: str | os.PathLike[str]) -> None:
        self.states.pop(os.fspath(path), None)

    def _hit(self, state: DeltaState) -> bool:
        if self.delta_bytes <= 0:
            bytes_hit = state.pending_bytes > 0
        else:
            bytes_hit = state.pending_bytes >= self.delta_bytes
        if self.delta_messages <= 0:
            messages_hit = state.pending_messages > 0
        else:
            messages_hit = state.pending_messages >= self.delta_messages
        if not (bytes_hit or messages_hit):
            return False
        state.pending_bytes = max(0, state.pending_bytes - self.delta_bytes) if self.delta_bytes > 0 else 0
        state.pending_messages = (
            max(0, state.pending_messages - self.delta_messages) if self.delta_messages > 0 else 0
        )
        return True
