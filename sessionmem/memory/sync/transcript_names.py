"""Which files of a sessions folder are transcripts, whose, and the shelf they are read from: the one place
these rules live.

A live transcript is ``<name>.jsonl``; ``/new``, ``/reset`` and daily/idle resets rename it
``<name>.jsonl.reset.<ISO 8601 UTC with ':' -> '-'>`` (OpenClaw's archive name), and a deleted session
leaves ``<name>.jsonl.deleted.<time>``. The index searches live transcripts and reset archives, never
deleted ones; the delta tracker and the session layer follow live transcripts only. Who may see a
transcript is decided by the session key its header line names (:func:`sessionmem.privacy.transcript_label`).

The index reads transcripts through a :class:`TranscriptShelf`, never from a folder directly: each
transcript is a name of the shapes above and the bytes of its JSONL form, read from any offset. A
:class:`FolderShelf` is a sessions folder; a session store that keeps transcripts elsewhere (PostgreSQL
rows, :mod:`sessionmem.session.stores.postgres_transcript`) hands the index a shelf of its own that
names and serialises its transcripts the same way, so delta tracking, append-only indexing, the line
numbers of hits and ``memory_get`` are one code path whatever the store.

Stdlib only and cheap to import: discovery (:mod:`sessionmem.memory.sync.sources`), the transcript readers and
the session layer all use it, and a search of notes alone must not load the transcript code.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

ARCHIVE_MARKERS = (".reset.", ".deleted.")
HEADER_BYTES = 64 * 1024  # a transcript's header line is well under this

_RESET_ARCHIVE = re.compile(
    r"^(?P<live>[^/\\\x00]+\.jsonl)\.reset\.\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d{1,9})?Z$"
)


def is_archive_name(name: str) -> bool:
    """True for rotated transcripts (``<file>.reset.<time>``, ``<file>.deleted.<time>``)."""
    return any(marker in name for marker in ARCHIVE_MARKERS)


def is_live_transcript_name(name: str) -> bool:
    """``<name>.jsonl`` that is not hidden and not an archive (``.reset.``/``.deleted.`` inside)."""
    return (
        name.endswith(".jsonl")
        and not name.startswith(".")
        and not is_archive_name(name)
        and not any(ch in name for ch in "/\\\x00")
    )


def reset_archive_of(name: str) -> str | None:
    """The live transcript name a reset archive was renamed from, or None when ``name`` is not exactly
    ``<live>.jsonl.reset.<timestamp>``. ``*.jsonl.deleted.*`` (a deleted session) is never an archive
    to search."""
    match = _RESET_ARCHIVE.match(name)
    if match is None or not is_live_transcript_name(match.group("live")):
        return None
    return match.group("live")


def is_transcript_name(name: str) -> bool:
    """A transcript the index searches: a live ``*.jsonl`` or a reset archive of one."""
    return is_live_transcript_name(name) or reset_archive_of(name) is not None


def header_session_key(path: str | os.PathLike[str]) -> str | None:
    """The ``sessionKey`` a transcript's header line names, or None (no header, none named, unreadable)."""
    try:
        with open(path, "rb") as handle:
            first = handle.read(HEADER_BYTES).split(b"\n", 1)[0]
    except OSError:
        return None
    return session_key_of_header(first)


def session_key_of_header(line: bytes) -> str | None:
    """The ``sessionKey`` of a transcript's first line when it is the header (``type: "session"``)."""
    import orjson

    try:
        header = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(header, dict) or header.get("type") != "session":
        return None
    key = header.get("sessionKey")
    return key if isinstance(key, str) and key.strip() else None


def first_line_session_key(head: bytes) -> str | None:
    """The ``sessionKey`` of the header line at the start of ``head`` (a transcript's first bytes)."""
    return session_key_of_header(head.split(b"\n", 1)[0])


# ---------------------------------------------------------------------------- the shelf


@dataclass(frozen=True, slots=True)
class ShelvedTranscript:
    """One transcript on a shelf: its name, the byte length of its JSONL form, and when it last changed."""

    name: str  # <id>.jsonl or <id>.jsonl.reset.<time>
    size: int
    mtime_ns: int


@runtime_checkable
class TranscriptShelf(Protocol):
    """Where the ``sessions`` source reads an agent's transcripts from (see the module docstring).

    ``scan`` lists the transcripts the index searches (live ones and reset archives; ``only``: just
    these names); ``read`` gives bytes ``[offset, offset + limit)`` of one transcript's JSONL form (to
    its end without ``limit``) and raises ``FileNotFoundError`` for a name it does not keep.
    ``where`` names the shelf in messages (never a password); ``folder`` is the sessions folder when the
    transcripts are files there, else None."""

    @property
    def where(self) -> str: ...

    @property
    def folder(self) -> Path | None: ...

    def scan(self, only: Collection[str] | None = None) -> list[ShelvedTranscript]: ...

    def read(self, name: str, offset: int = 0, limit: int | None = None) -> bytes: ...


class FolderShelf:
    """The transcripts of a sessions folder: regular files named as above (symlinks never followed)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self._folder = Path(folder)

    @property
    def where(self) -> str:
        return str(self._folder)

    @property
    def folder(self) -> Path:
        return self._folder

    def scan(self, only: Collection[str] | None = None) -> list[ShelvedTranscript]:
        out: list[ShelvedTranscript] = []
        try:
            entries = sorted(os.scandir(self._folder), key=lambda e: e.name)
        except OSError:
            return out
        for entry in entries:
            if only is not None and entry.name not in only:
                continue
            try:
                if is_transcript_name(entry.name) and entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    out.append(ShelvedTranscript(entry.name, st.st_size, st.st_mtime_ns))
            except OSError:
                continue
        return out

    def read(self, name: str, offset: int = 0, limit: int | None = None) -> bytes:
        if not is_transcript_name(name):
            raise FileNotFoundError(f"not a transcript of {self._folder}: {name!r}")
        fd = os.open(self._folder / name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as handle:
            if offset:
                handle.seek(offset)
            return handle.read() if limit is None else handle.read(max(0, limit))


def shelved_session_key(shelf: TranscriptShelf, name: str) -> str | None:
    """The ``sessionKey`` the header of transcript ``name`` names, or None (none named, unreadable)."""
    try:
        return first_line_session_key(shelf.read(name, 0, HEADER_BYTES))
    except OSError:
        return None
