"""Append-only indexing of a session transcript: chunk only what is new (reference §5).

A transcript only ever grows by whole lines at its end. So instead of re-reading, re-flattening and
re-chunking the whole file on every change, the index remembers per file where its *last chunk* starts
(JSONL line and byte offset) and how far it read. The next pass reads from that offset to the end,
flattens and chunks only those lines (starting a fresh chunk at the old last chunk's first line, so the
boundaries of every earlier chunk stay exactly where they were), and replaces only chunks that start at
or after that line. Earlier chunks keep their rows, ids and vectors; the embedder only ever sees text
that is new.

The remembered state (:class:`TailState`) is stored in the ``files.hash`` column of the transcript's row
(``"jsonl-tail:v1:" + JSON``): it changes whenever the indexed content does, is written in the same
transaction as the chunks, and goes away with the row. No extra table, nothing to keep in step.

When the file no longer continues what was indexed (it shrank; its first bytes or the bytes of the last
chunk's lines changed: a rewrite, a truncation after compaction, another file renamed over it), the
whole file is indexed again from line 1. A partial last line (a writer mid-append) is left for the next
pass: only bytes up to the last newline count as read.

Everything but :func:`plan_shelved` (which reads the transcript from its shelf) is pure.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from sessionmem.memory.sync.chunk_context import chunk_context
from sessionmem.memory.sync.chunking import Chunk, chunk_markdown, drop_blank
from sessionmem.memory.sync.session_text import flatten_lines
from sessionmem.memory.sync.transcript_names import TranscriptShelf, first_line_session_key
from sessionmem.privacy import OWNER, transcript_label

TAIL_PREFIX = "jsonl-tail:v1:"
HEAD_BYTES = 4096  # the first bytes (header line, first entries) fingerprint the file's identity

__all__ = ["TAIL_PREFIX", "TailState", "TranscriptPlan", "chunk_region", "plan_shelved"]


@dataclass(frozen=True, slots=True)
class TailState:
    """Where the last indexed chunk of a transcript starts, and what was read.

    ``size`` is the byte length read (always just after a newline); ``line``/``offset`` are the JSONL
    line number and byte offset where the next pass starts re-chunking; ``head`` hashes the first
    ``head_len`` bytes and ``tail`` hashes bytes ``[offset, size)``, so a pass can tell a continued
    file from a rewritten one by reading only the region it re-chunks anyway.
    """

    size: int
    line: int
    offset: int
    head_len: int
    head: str
    tail: str

    def encode(self) -> str:
        return TAIL_PREFIX + json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def decode(cls, value: str | None) -> TailState | None:
        """The state stored in ``files.hash``; None for anything else (a whole-file hash, garbage)."""
        if not value or not value.startswith(TAIL_PREFIX):
            return None
        try:
            data = json.loads(value[len(TAIL_PREFIX) :])
            state = cls(**data)
        except (ValueError, TypeError):
            return None
        if min(state.size, state.line, state.offset, state.head_len) < 0 or state.offset > state.size:
            return None
        return state


@dataclass(frozen=True, slots=True)
class TranscriptPlan:
    """What one pass writes for a transcript.

    ``from_line`` None: replace every chunk of the file; else replace only chunks starting at or after
    that JSONL line. ``chunks`` carry JSONL line numbers and each chunk's date (its first message's).
    ``unchanged``: nothing new was read; only the file's stat needs recording.
    """

    from_line: int | None
    chunks: list[tuple[Chunk, str | None]]
    state: TailState
    unchanged: bool = False
    audience: str = OWNER  # from the header's session key (sessionmem.privacy)

    @property
    def hash(self) -> str:
        return self.state.encode()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def chunk_region(
    data: bytes, first_line: int, tokens: int, overlap: int, default_date: str | None
) -> tuple[list[tuple[Chunk, str | None]], int, int]:
    """Flatten and chunk whole JSONL lines ``data`` (line ``first_line`` first); pure.

    Returns the chunks (JSONL line numbers, dated by their first message) and the line number and
    byte offset (relative to ``data``) where the last chunk starts: the next pass resumes there. With
    no message in ``data``, no chunk starts in it and the next pass may resume after it.
    """
    raw_lines = data.split(b"\n")
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()
    texts, line_map, dates = flatten_lines(raw_lines, first_line=first_line)
    if not texts:
        return [], first_line + len(raw_lines), len(data)
    chunks = drop_blank(chunk_markdown("\n".join(texts), tokens, overlap))
    out: list[tuple[Chunk, str | None]] = []
    last = len(line_map)
    for chunk in chunks:
        start = min(max(chunk.start_line, 1), last)
        end = min(max(chunk.end_line, 1), last)
        day = dates[start - 1] or default_date
        first, last_line = line_map[start - 1], max(line_map[start - 1], line_map[end - 1])
        out.append((Chunk(first, last_line, chunk.text, chunk.hash, chunk_context("", day)), day))
    if not out:
        return [], first_line + len(raw_lines), len(data)
    resume_line = out[-1][0].start_line
    offset = 0
    for raw in raw_lines[: resume_line - first_line]:
        offset += len(raw) + 1
    return out, resume_line, offset


def _read_from(shelf: TranscriptShelf, name: str, offset: int) -> tuple[bytes, bytes]:
    """(first HEAD_BYTES bytes, bytes from ``offset`` to the end) of transcript ``name``."""
    head = shelf.read(name, 0, HEAD_BYTES)
    if offset <= len(head) < HEAD_BYTES:  # the whole transcript is in the head
        return head, head[offset:]
    return head, shelf.read(name, offset)


def plan_shelved(
    shelf: TranscriptShelf,
    name: str,
    old_hash: str | None,
    tokens: int,
    overlap: int,
    default_date: str | None = None,
) -> TranscriptPlan:
    """Plan one pass over transcript ``name`` on ``shelf`` (a sessions folder, or a store's own shelf:
    the same bytes either way) given its stored ``files.hash`` (None = full pass).

    Raises ``OSError`` (``FileNotFoundError``) when the transcript cannot be read.
    """
    previous = TailState.decode(old_hash)
    start = previous.offset if previous is not None else 0
    head, rest = _read_from(shelf, name, start)
    if previous is not None and not _continues(previous, head, rest):
        previous, start = None, 0
        head, rest = _read_from(shelf, name, 0)
    complete = rest[: rest.rfind(b"\n") + 1]  # whole lines only; b"" when there is none
    size = start + len(complete)
    audience = transcript_label(first_line_session_key(head))
    if previous is not None and size == previous.size:
        return TranscriptPlan(previous.line, [], previous, unchanged=True, audience=audience)
    first_line = previous.line if previous is not None else 1
    chunks, resume_line, rel_offset = chunk_region(complete, first_line, tokens, overlap, default_date)
    head_len = min(len(head), size)
    state = TailState(
        size=size,
        line=resume_line,
        offset=start + rel_offset,
        head_len=head_len,
        head=_sha(head[:head_len]),
        tail=_sha(complete[rel_offset:]),
    )
    return TranscriptPlan(previous.line if previous is not None else None, chunks, state, audience=audience)


def _continues(previous: TailState, head: bytes, rest: bytes) -> bool:
    """True when the file still holds exactly what the previous pass read (and maybe more)."""
    if len(head) < previous.head_len or _sha(head[: previous.head_len]) != previous.head:
        return False
    region = previous.size - previous.offset
    return len(rest) >= region and _sha(rest[:region]) == previous.tail
