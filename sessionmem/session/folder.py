"""Transcripts as JSONL files in one sessions folder: what every file-keeping backend shares.

:class:`TranscriptFolderBackend` is the base of the backends whose transcripts are files in a sessions
folder, whatever keeps the entries (sessions.json: :class:`~sessionmem.session.store.SessionStore`; a
SQLite database: :class:`~sessionmem.session.store_sqlite.SqliteSessionStore`). Hooks and the memory index
read those files, so the naming and confinement rules live here once:

- a transcript is ``<sessionId>.jsonl`` (or OpenClaw's ``<sessionId>-topic-<id>.jsonl``) directly in the
  folder; a ``sessionFile`` elsewhere with the session's own name is followed to that name here (the state
  folder moved), anything else is refused before anything is opened (:meth:`transcript_file`);
- a rotation archives it as ``<file>.reset.<time>`` beside the live ones;
- the turn lock is ``flock`` on ``<folder>/locks/<sha256 of the key>.lock``, a file never deleted;
- a copy from another backend writes a transcript whole, atomically (:meth:`import_transcript`).

Subclasses keep the entries (``get``, ``all``, ``update``, ``delete``) and say where the folder is.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from sessionmem.errors import TranscriptError, os_error_reason
from sessionmem.safefs import atomic_write_bytes
from sessionmem.session import keys
from sessionmem.session.backend import DEFAULT_TURN_LOCK_TIMEOUT_S, SessionBackendABC, TranscriptLog
from sessionmem.session.entry import SessionEntry
from sessionmem.session.filelock import TurnLock
from sessionmem.session.transcript import Transcript, archive_transcript_file

log = logging.getLogger(__name__)

TURN_LOCK_DIR = "locks"  # in the sessions folder: one lock file per session key


class TranscriptFolderBackend(SessionBackendABC):
    """A backend whose transcripts are JSONL files directly in :attr:`sessions_dir`."""

    def __init__(self, sessions_dir: Path) -> None:
        self._folder = sessions_dir

    @property
    def sessions_dir(self) -> Path:
        """The folder of the transcripts (and of the store file: OpenClaw keeps them together)."""
        return self._folder

    def transcript_path(self, session_id: str) -> Path:
        """``<sessions_dir>/<sessionId>.jsonl``: where a new session's transcript goes."""
        return self.sessions_dir / f"{keys.validate_session_id(session_id)}.jsonl"

    def new_session_file(self, session_id: str) -> str:
        return str(self.transcript_path(session_id))

    def open_transcript(self, key: str, entry: SessionEntry, *, cwd: Path) -> Transcript:
        """The transcript ``entry`` names, in the sessions folder (:meth:`transcript_file`). When it
        was found there by its name only (the state folder moved), the entry's ``sessionFile`` is
        updated to say where it is now."""
        norm = keys.normalize_key(key)
        path, followed = self._locate(norm, entry)
        if followed:
            found = "found there" if path.exists() else "not there either: a new one is started"
            log.warning(
                "session %s: transcript %s is not in the sessions folder %s; using %s (%s)",
                norm,
                entry.session_file,
                self.sessions_dir,
                path.name,
                found,
            )
            self.update(norm, lambda current: _naming(current, entry.session_id, path))
        return Transcript.open(path, entry.session_id, cwd, session_key=norm)

    def transcript_file(self, key: str, entry: SessionEntry) -> Path:
        """Where ``entry``'s transcript lives: always directly in :attr:`sessions_dir`, named by its
        session id (``<sessionId>.jsonl``, or OpenClaw's ``<sessionId>-topic-<id>.jsonl``).

        ``sessionFile`` names the file; a relative value is resolved against the folder. An absolute
        one in another folder with the session's own name is followed to that name here (the state
        folder was moved, or the store was copied from another machine): nothing is read or written
        there. Anything else (another name, a path out of the folder, a symlink out of it) raises
        :class:`~sessionmem.errors.TranscriptError`, before anything is opened.
        """
        return self._locate(keys.normalize_key(key), entry)[0]

    def _locate(self, key: str, entry: SessionEntry) -> tuple[Path, bool]:
        """:meth:`transcript_file`, and whether it was followed from another folder."""
        session_id = keys.validate_session_id(entry.session_id)
        folder = self.sessions_dir
        real_folder = os.path.realpath(folder)
        stored = entry.session_file

        def refuse(why: str) -> TranscriptError:
            return TranscriptError(
                f"session {key}: its sessionFile {stored!r} {why}; refusing to read or write it. "
                f"Transcripts live in the sessions folder {folder} as <sessionId>.jsonl: set the "
                f"entry's sessionFile to {session_id}.jsonl, or remove it"
            )

        name, elsewhere = f"{session_id}.jsonl", False
        if stored:
            given = Path(stored)
            candidate = given if given.is_absolute() else folder / given
            if not keys.is_transcript_name(candidate.name, session_id):
                raise refuse(f"does not name the transcript of session {session_id}")
            elsewhere = os.path.realpath(candidate.parent) != real_folder
            if elsewhere and not given.is_absolute():
                raise refuse(f"is not in the sessions folder {folder}")
            # Trigger: an absolute sessionFile in another folder, named for this session. Why:
            # sessions.json stores absolute paths, so a moved or copied state folder leaves every entry
            # pointing at the old place; using it would recreate the old folder and start the session
            # empty. Outcome: the same name here, where the transcript moved with sessions.json;
            # nothing is done at the old path.
            name = candidate.name
        target = folder / name
        real_target = os.path.realpath(target)
        if real_target != os.path.join(real_folder, name):
            raise TranscriptError(
                f"session {key}: its transcript {target} is a symlink to {real_target}, outside the "
                f"sessions folder; refusing to read or write it (put the file itself in {folder})"
            )
        return target, elsewhere

    def archive_transcript(self, transcript: TranscriptLog, when: datetime) -> Path | None:
        """Rename the transcript ``<file>.reset.<time>`` (OpenClaw's archive name), beside the live ones."""
        return archive_transcript_file(transcript.path, when) if transcript.path is not None else None

    def turn_lock(self, key: str, *, timeout_s: float = DEFAULT_TURN_LOCK_TIMEOUT_S) -> TurnLock:
        """``flock`` on ``<sessions_dir>/locks/<sha256 of the key>.lock``, a file never deleted."""
        norm = keys.normalize_key(key)
        digest = hashlib.sha256(norm.encode("utf-8")).hexdigest()[:32]
        return TurnLock(self.sessions_dir / TURN_LOCK_DIR / f"{digest}.lock", norm, timeout_s=timeout_s)

    def import_transcript(self, key: str, entry: SessionEntry, lines: Iterable[bytes]) -> SessionEntry:
        """Write a transcript copied from another backend: ``lines`` (JSON objects, header first, without
        their newline) become the file ``entry`` names here, byte for byte, written atomically (a temp
        file renamed over it). Returns ``entry`` naming that file (``sessionFile`` re-pointed at this
        folder). When the file already is the source (two backends sharing one folder), it is left as is.
        """
        name = Path(entry.session_file).name if entry.session_file else f"{entry.session_id}.jsonl"
        moved = entry.with_updates(session_file=str(self.sessions_dir / name))
        target = self.transcript_file(key, moved)
        data = b"".join(line + b"\n" for line in lines)
        try:
            if target.is_file() and target.read_bytes() == data:
                return moved
            atomic_write_bytes(target, data)
        except OSError as exc:
            raise TranscriptError(
                f"session {key}: cannot write transcript {target}: {os_error_reason(exc)}"
            ) from exc
        return moved


def _naming(current: SessionEntry | None, session_id: str, path: Path) -> SessionEntry | None:
    """``current`` naming ``path`` as its transcript, if it is still that session's entry."""
    if current is None or current.session_id != session_id:
        return None
    return current.with_updates(session_file=str(path))
