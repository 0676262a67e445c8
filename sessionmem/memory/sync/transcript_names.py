"""Which files of a sessions folder are transcripts, and whose: the one place these rules live.

A live transcript is ``<name>.jsonl``; ``/new``, ``/reset`` and daily/idle resets rename it
``<name>.jsonl.reset.<ISO 8601 UTC with ':' -> '-'>`` (OpenClaw's archive name), and a deleted session
leaves ``<name>.jsonl.deleted.<time>``. The index searches live transcripts and reset archives, never
deleted ones; the delta tracker and the session layer follow live transcripts only. Who may see a
transcript is decided by the session key its header line names (:func:`sessionmem.privacy.transcript_label`).

Stdlib only and cheap to import: discovery (:mod:`sessionmem.memory.sync.sources`), the transcript readers and
the session layer all use it, and a search of notes alone must not load the transcript code.
"""

from __future__ import annotations

import os
import re

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
