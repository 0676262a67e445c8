"""sessions.json: the per-agent map from session key to :class:`SessionEntry` (reference §1.10).

Every mutation re-reads the file under a cross-process lock (see :class:`StoreLock`), applies a
function, and writes the whole store atomically (temp file in the same folder, fsync, ``os.replace``,
fsync of the folder), so readers see either the old file or the new one and concurrent processes lose
no update.

A writer killed between creating its temp file and renaming it leaves ``sessions.json.<32 hex>.tmp``
behind. The first transaction of each :class:`SessionStore` object removes such files while it holds
the lock: every writer holds the lock from creating its temp file to renaming it, so a temp file found
under the lock has no live writer. Once per object, not per update: the runner updates the store every
turn, and the folder also holds every transcript.

The lock is ``flock`` on ``sessions.json.lock``, a file that is created once and never deleted
(:class:`~sessionmem.session.stores.filelock.StoreLock`, whose module says why not OpenClaw's lock file). A
holder that hangs makes waiters fail with :class:`~sessionmem.errors.StoreLockTimeout` instead of writing
over it.

A corrupt store (invalid JSON, wrong shape, or an empty file) is never silently emptied: it is moved
aside as ``sessions.json.corrupt-<ts>``, reported in :attr:`SessionStore.issues` and the log, and
rebuilt from the transcripts in the same folder (one entry per ``*.jsonl``, keyed by the header's
``sessionKey`` when present, else ``agent:<agentId>:recovered:<sessionId>``), with the compaction
count, model and last usage the runner would have recorded from that transcript, and the last flush's
cycle and time (``memoryFlushCompactionCount``, ``memoryFlushAt``), so a rebuilt session does not flush
its current cycle twice (:mod:`sessionmem.session.stores.recovery`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import orjson

from sessionmem.errors import SessionError, os_error_reason
from sessionmem.messages import now_ms
from sessionmem.pathnames import given_path
from sessionmem.safefs import atomic_write_bytes, is_atomic_temp_of
from sessionmem.session.stores import keys
from sessionmem.session.stores.backend import updated_entry
from sessionmem.session.stores.entry import SessionEntry, entry_from_json
from sessionmem.session.stores.filelock import StoreLock
from sessionmem.session.stores.recovery import entries_from_transcripts
from sessionmem.session.stores.transcript_folder import TranscriptFolderBackend

log = logging.getLogger(__name__)

_ACTIVE = threading.local()  # open transactions of this thread, by store path


class CorruptStore(SessionError):
    """Raised internally when sessions.json cannot be parsed; the store recovers from it."""


def parse_store(raw: bytes) -> dict[str, SessionEntry]:
    """Parse sessions.json content. Keys are normalised; legacy mixed-case duplicates merge (newest wins).

    Empty (or whitespace-only) content is corrupt too: the store is never written that way (writes are
    atomic), so an empty file means something truncated it, and the transcripts can still rebuild it.
    """
    if not raw.strip():
        raise CorruptStore("the file is empty")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise CorruptStore(f"invalid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise CorruptStore(f"expected a JSON object, found {type(data).__name__}")
    out: dict[str, SessionEntry] = {}
    for key, value in data.items():
        try:
            entry = entry_from_json(value)
        except ValueError as exc:
            raise CorruptStore(f"entry {key!r} is invalid: {exc}") from None
        norm = keys.normalize_key(key)
        if not norm:
            continue
        if norm not in out or entry.updated_at >= out[norm].updated_at:
            out[norm] = entry
    return out


def serialize_store(entries: dict[str, SessionEntry]) -> bytes:
    return orjson.dumps({k: e.to_json_dict() for k, e in entries.items()}, option=orjson.OPT_INDENT_2) + b"\n"


class SessionStore(TranscriptFolderBackend):
    """sessions.json at ``path``, the transcripts beside it. Thread- and process-safe; see the module
    docstring. The default backend of the store seam (:mod:`sessionmem.session.stores.backend`)."""

    def __init__(
        self,
        path: str | Path,
        *,
        agent_id: str | None = None,
        lock_timeout_s: float = 10.0,
    ) -> None:
        self.path = given_path(path)
        super().__init__(self.path.parent)  # the transcripts live beside sessions.json (as in OpenClaw)
        self.agent_id = agent_id or _agent_id_from_path(self.path)
        self.issues: list[str] = []
        self.recovered = False
        self._swept = False  # orphaned temp files removed (the first transaction does it)
        self._lock = StoreLock(self.path.with_name(self.path.name + ".lock"), timeout_s=lock_timeout_s)

    @classmethod
    def for_agent(
        cls, state_dir: str | Path, agent_id: str = keys.DEFAULT_AGENT_ID, store: str | Path | None = None
    ) -> SessionStore:
        """The agent's store: ``store`` (``session.store``; ``~`` and ``{agentId}`` expanded), else
        ``<state>/agents/<agentId>/sessions/sessions.json``
        (:func:`sessionmem.session.stores.keys.store_path`)."""
        return cls(keys.store_path(state_dir, agent_id, store), agent_id=agent_id)

    # --- reading ---

    def _read_raw(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise SessionError(f"cannot read session store {self.path}: {exc}") from exc

    def _load_locked(self) -> dict[str, SessionEntry]:
        """Read the store; must hold the lock (recovery writes)."""
        raw = self._read_raw()
        if raw is None:
            return {}
        try:
            return parse_store(raw)
        except CorruptStore as exc:
            aside = self.path.with_name(f"{self.path.name}.corrupt-{now_ms()}")
            entries = entries_from_transcripts(self.sessions_dir, self.agent_id)
            # Trigger: the rebuilt store cannot be written (a full disk). Why: moving the corrupt file
            # aside first would leave no store at all, and the next read would start every session anew.
            # Outcome: the corrupt file is kept aside by a second name (a hard link), then replaced
            # atomically; if the write fails it is still there, and the next read tries again.
            try:
                os.link(self.path, aside)
            except OSError:
                os.replace(self.path, aside)
            self._write(entries)
            self._report(
                f"{self.path} was corrupt ({exc}); moved aside to {aside.name} and rebuilt "
                f"{len(entries)} entries from transcripts"
            )
            return entries

    def _load(self) -> dict[str, SessionEntry]:
        raw = self._read_raw()
        if raw is None:
            return {}
        try:
            return parse_store(raw)
        except CorruptStore:  # recovery writes, so it takes the lock (and re-reads under it)
            with self._lock:
                return self._load_locked()

    def get(self, key: str) -> SessionEntry | None:
        return self._load().get(keys.normalize_key(key))

    def all(self) -> dict[str, SessionEntry]:
        return self._load()

    # --- writing ---

    def update(
        self, key: str, fn: Callable[[SessionEntry | None], SessionEntry | None]
    ) -> SessionEntry | None:
        """Apply ``fn`` to the current entry under the lock and save what it returns.

        ``fn`` sees a fresh copy read inside the lock (never a cached one). Returning None leaves the
        store unchanged (use :meth:`delete` to remove). Returns the entry now stored for ``key``.
        """
        norm = keys.normalize_key(key)
        with self.transaction() as entries:
            current = entries.get(norm)
            new = updated_entry(fn, current.model_copy(deep=True) if current is not None else None)
            if new is None:
                return current
            entries[norm] = new
            return new

    def delete(self, key: str) -> SessionEntry | None:
        """Remove ``key``; returns the entry it had, if any."""
        norm = keys.normalize_key(key)
        with self.transaction() as entries:
            return entries.pop(norm, None)

    def erase_entries(self, session_keys: Sequence[str]) -> list[str]:
        """Remove the entries of ``session_keys`` in one atomic rewrite of sessions.json (``forget``)."""
        with self.transaction() as entries:
            for key in session_keys:
                entries.pop(keys.normalize_key(key), None)
        return []

    @contextlib.contextmanager
    def transaction(self) -> Iterator[dict[str, SessionEntry]]:
        """Hold the lock and edit the whole map in place; it is written atomically on exit (if changed).

        Nothing is written if the block raises. A transaction opened inside another one on the same
        store file (same thread, any :class:`SessionStore` instance) shares the outer map, so nested
        writes are not lost when the outer one saves.
        """
        active: dict[str, dict[str, SessionEntry]] = _ACTIVE.__dict__.setdefault("maps", {})
        key = os.path.realpath(self.path)
        with self._lock:
            if key in active:
                yield active[key]
                return
            if not self._swept:
                self._swept = True
                self._remove_orphaned_temp_files()
            entries = self._load_locked()
            before = serialize_store(entries)
            active[key] = entries
            try:
                yield entries
            finally:
                del active[key]
            normalised = {keys.normalize_key(k): v for k, v in entries.items()}
            after = serialize_store(normalised)
            if after != before:
                self._write(normalised, payload=after)

    def _write(self, entries: dict[str, SessionEntry], *, payload: bytes | None = None) -> None:
        data = payload if payload is not None else serialize_store(entries)
        try:
            atomic_write_bytes(self.path, data)
        except OSError as exc:  # e.g. a full disk: the old file is intact (the write is atomic)
            raise SessionError(
                f"cannot write session store {self.path}: {os_error_reason(exc)} "
                "(the store is unchanged; this update was not saved)"
            ) from exc

    # --- recovery ---

    def _remove_orphaned_temp_files(self) -> None:
        """Remove the temp files of writes that never finished; must hold the lock (see module docstring).

        Only names :func:`atomic_write_bytes` gives this store's temp files match; a file that cannot be
        removed is logged and left, never a reason to fail the update.
        """
        try:
            with os.scandir(self.sessions_dir) as found:
                names = [e.name for e in found if is_atomic_temp_of(e.name, self.path.name)]
        except OSError:  # no folder yet (the lock creates it; a store path may point elsewhere)
            return
        for name in names:
            try:
                os.unlink(self.sessions_dir / name)
            except FileNotFoundError:
                continue
            except OSError as exc:
                log.warning("cannot remove orphaned temp file %s: %s", self.sessions_dir / name, exc)
                continue
            log.info("removed %s, left by a writer that died before renaming it", self.sessions_dir / name)

    def _report(self, message: str) -> None:
        self.issues.append(message)
        self.recovered = True
        log.warning("%s", message)


def _agent_id_from_path(path: Path) -> str:
    # <state>/agents/<agentId>/sessions/sessions.json
    parts = path.parts
    if len(parts) >= 4 and parts[-4] == "agents":
        return parts[-3]
    return keys.DEFAULT_AGENT_ID
