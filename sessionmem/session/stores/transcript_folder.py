"""Transcripts as JSONL files in one sessions folder: what every file-keeping backend shares.

:class:`TranscriptFolderBackend` is the base of the backends whose transcripts are files in a sessions
folder, whatever keeps the entries (sessions.json:
:class:`~sessionmem.session.stores.sessions_json.SessionStore`; a
SQLite database: :class:`~sessionmem.session.stores.sessions_sqlite.SqliteSessionStore`). Hooks and the
memory index
read those files, so the naming and confinement rules live here once:

- a transcript is ``<sessionId>.jsonl`` (or OpenClaw's ``<sessionId>-topic-<id>.jsonl``) directly in the
  folder; a ``sessionFile`` elsewhere with the session's own name is followed to that name here (the state
  folder moved), anything else is refused before anything is opened (:meth:`transcript_file`);
- a rotation archives it as ``<file>.reset.<time>`` beside the live ones;
- the turn lock is ``flock`` on ``<folder>/locks/<sha256 of the key>.lock``, a file never deleted;
- a copy from another backend writes a transcript whole, atomically (:meth:`import_transcript`);
- ``forget`` finds every transcript file by its header and unlinks it (:meth:`erase`).

Subclasses keep the entries (``get``, ``all``, ``update``, ``delete``) and say where the folder is.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path

import orjson

from sessionmem.errors import TranscriptError, os_error_reason
from sessionmem.memory.sync.transcript_names import HEADER_BYTES
from sessionmem.safefs import atomic_write_bytes, fsync_folder
from sessionmem.session.stores import keys
from sessionmem.session.stores.backend import (
    DEFAULT_TURN_LOCK_TIMEOUT_S,
    KeptTranscript,
    SessionBackendABC,
    TranscriptLog,
)
from sessionmem.session.stores.entry import SessionEntry
from sessionmem.session.stores.filelock import TurnLock
from sessionmem.session.stores.transcript import Transcript, archive_transcript_file

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

    # --- erasure (backend.ErasableStore) ---

    def kept_transcripts(self) -> list[KeptTranscript]:
        """Every transcript file in the folder (``*.jsonl``, archives ``*.jsonl.reset.*`` and
        ``*.jsonl.deleted.*``, copies being written ``*.jsonl.<hex>.tmp``), with what its header names.
        Symlinks are left out: they are not the store's files."""
        out: list[KeptTranscript] = []
        try:
            found = sorted(os.scandir(self.sessions_dir), key=lambda e: e.name)
        except FileNotFoundError:
            return out
        for item in found:
            try:
                if ".jsonl" not in item.name or not item.is_file(follow_symlinks=False):
                    continue
            except OSError:
                continue
            key, session_id = _header_names(Path(item.path))
            out.append(KeptTranscript(item.name, key, session_id, Path(item.path)))
        return out

    def transcript_lines(self, kept: KeptTranscript) -> Iterator[bytes]:
        if kept.path is None:
            return
        try:
            with open(kept.path, "rb") as handle:
                for line in handle:
                    yield line.rstrip(b"\n")
        except FileNotFoundError:
            return

    def erase(self, session_keys: Sequence[str], transcripts: Sequence[KeptTranscript]) -> list[str]:
        """Unlink the transcript files (only files directly in the sessions folder), sync the folder, then
        remove the entries (:meth:`erase_entries`). A file system keeps no name of an unlinked file; its
        blocks are free space (README, Privacy)."""
        folder = os.path.realpath(self.sessions_dir)
        for kept in transcripts:
            if kept.path is None or os.path.dirname(os.path.realpath(kept.path)) != folder:
                raise TranscriptError(f"refusing to erase {kept.name}: not a file of {self.sessions_dir}")
            with contextlib.suppress(FileNotFoundError):
                os.unlink(kept.path)
        if transcripts:
            fsync_folder(self.sessions_dir)
        return self.erase_entries(session_keys)

    def erase_entries(self, session_keys: Sequence[str]) -> list[str]:
        """Remove the entries of ``session_keys`` (a backend whose storage keeps deleted bytes scrubs them);
        returns what could not be done."""
        for key in session_keys:
            self.delete(key)
        return []


def _header_names(path: Path) -> tuple[str | None, str | None]:
    """The session key and id a transcript's header line names (None for each it does not)."""
    try:
        with open(path, "rb") as handle:
            first = handle.read(HEADER_BYTES).split(b"\n", 1)[0]
        header = orjson.loads(first)
    except (OSError, orjson.JSONDecodeError):
        return None, None
    if not isinstance(header, dict) or header.get("type") != "session":
        return None, None
    key, session_id = header.get("sessionKey"), header.get("id")
    return (
        key if isinstance(key, str) and key.strip() else None,
        session_id if isinstance(session_id, str) and session_id else None,
    )


def _naming(current: SessionEntry | None, session_id: str, path: Path) -> SessionEntry | None:
    """``current`` naming ``path`` as its transcript, if it is still that session's entry."""
    if current is None or current.session_id != session_id:
        return None
    return current.with_updates(session_file=str(path))
