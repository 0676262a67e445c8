"""Copying every session of one store to another, whatever their backends (``sessionmem sessions
export/import``), through the store seam only (:mod:`sessionmem.session.stores.backend`), so a new backend
gets it by implementing the seam and :class:`~sessionmem.session.stores.backend.TranscriptImport`.

For each session of the source, in key order: its transcript is read line by line as stored
(:class:`~sessionmem.session.stores.backend.StoredLines`) and written whole to the target first (the
transcript is the record), then its entry is stored, field for field (``sessionFile`` names the target's
file). Between two file-keeping backends the transcripts are byte-identical. A target that holds sessions is
refused unless ``force``: then the copied keys are replaced and the target's other sessions stay.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

from sessionmem.errors import UsageError
from sessionmem.session.stores.backend import (
    EntryUpdate,
    SessionBackend,
    StoredLines,
    TranscriptImport,
    TranscriptLog,
)
from sessionmem.session.stores.entry import SessionEntry

Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class CopyReport:
    sessions: int  # entries copied
    transcript_lines: int  # lines written to the target's transcripts, headers included


def copy_sessions(
    source: SessionBackend,
    target: SessionBackend,
    *,
    cwd: Path,
    force: bool = False,
    progress: Progress | None = None,
) -> CopyReport:
    """Copy every session of ``source`` to ``target`` (see the module docstring).

    ``cwd`` is recorded in the header of a transcript the source did not have yet (opening it creates an
    empty one, as the runner would). ``progress(done, total)`` is called after each session.
    """
    if not isinstance(target, TranscriptImport):
        raise UsageError(f"{type(target).__name__} cannot be the target of a copy (no import_transcript)")
    entries = source.all()
    if not force:
        held = len(target.all())
        if held:
            raise UsageError(
                f"the target store already holds {held} session(s); refusing to overwrite them "
                "(use --force to replace the copied keys and keep the others)"
            )
    lines_written = 0
    total = len(entries)
    for done, key in enumerate(sorted(entries), start=1):
        entry = entries[key]
        lines = _stored_lines(source.open_transcript(key, entry, cwd=cwd))
        copied = target.import_transcript(key, entry, lines)
        target.update(key, _replacing_with(copied))
        lines_written += len(lines)
        if progress is not None:
            progress(done, total)
    return CopyReport(sessions=total, transcript_lines=lines_written)


def _replacing_with(entry: SessionEntry) -> EntryUpdate:
    """An ``update`` function storing ``entry`` whatever the target held."""
    return lambda _current: entry


def _stored_lines(transcript: TranscriptLog) -> list[bytes]:
    if isinstance(transcript, StoredLines):
        return list(transcript.stored_lines())
    return [orjson.dumps(entry.data) for entry in transcript.entries()]
