"""Transcripts as JSONL files in one sessions folder: the file (:class:`Transcript`), and what every
file-keeping backend shares (:class:`TranscriptFolderBackend`).

A transcript file holds one JSON object per line (:mod:`~sessionmem.session.stores.transcript`): line 1 is
the header, every other line an entry. Why appends cannot tear a line in the middle of the file: each
entry is written with a single ``os.write`` of the whole line (newline included) on an ``O_APPEND``
descriptor, under an advisory ``flock`` where the platform has one, so concurrent writers interleave whole
lines. A writer killed mid-write can leave a partial *last* line; readers skip it, and the next append
first writes the missing ``\\n`` so the torn fragment stays alone on its line.

:class:`TranscriptFolderBackend` is the base of the backends whose transcripts are files in a sessions
folder, whatever keeps the entries (sessions.json:
:class:`~sessionmem.session.stores.sessions_json.SessionStore`; a SQLite database:
:class:`~sessionmem.session.stores.sessions_sqlite.SqliteSessionStore`). Hooks and the memory index read
those files, so the naming and confinement rules live here once:

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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

try:
    import fcntl
except ImportError:  # Windows: appends are still single writes
    fcntl = None  # type: ignore[assignment]

from sessionmem.errors import FileWriteError, TranscriptError, os_error_reason
from sessionmem.memory.sync.transcript_names import HEADER_BYTES
from sessionmem.messages import Message
from sessionmem.safefs import (
    PRIVATE_FILE_MODE,
    atomic_write_bytes,
    fsync_folder,
    make_private_dirs,
    write_at_end,
)
from sessionmem.session.stores import keys
from sessionmem.session.stores.backend import (
    DEFAULT_TURN_LOCK_TIMEOUT_S,
    KeptTranscript,
    SessionBackendABC,
    TranscriptLog,
)
from sessionmem.session.stores.entry import SessionEntry
from sessionmem.session.stores.filelock import TurnLock
from sessionmem.session.stores.transcript import (
    Entry,
    EntryChain,
    context_from_entries,
    entry_from_dict,
    new_header,
)

log = logging.getLogger(__name__)

TURN_LOCK_DIR = "locks"  # in the sessions folder: one lock file per session key


# --- The JSONL file ------------------------------------------------------------------------------


class Transcript(EntryChain):
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
        super().__init__(ids, leaf)
        self.path = path
        self.session_id = session_id
        self.header = header
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

    def write_entry(self, entry: dict[str, Any]) -> None:
        """One whole line (:func:`_append_line`), the header first if the file was emptied under us."""
        end = _append_line(self.path, entry, header=self.header)
        if entry["type"] == "compaction":
            self._compaction_end = end

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
        (:class:`~sessionmem.session.stores.backend.StoredLines`). Blank, torn and unreadable lines are left
        out, as every reader skips them."""
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


# --- The sessions folder -------------------------------------------------------------------------


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
