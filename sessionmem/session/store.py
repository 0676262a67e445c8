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

The lock is ``flock`` on ``sessions.json.lock``, a file that is created once and never deleted (the
``filelock`` package where there is no ``fcntl``). Why not OpenClaw's lock file (created ``O_EXCL``,
holding ``{pid, createdAt}``, removed by whoever judges it stale): judging and removing are two steps,
so two waiters can both judge one stale file, and the second removes the lock the first has just
taken; a process killed between creating the file and writing its body leaves a lock that only ages
out; a slow holder past the stale age is robbed while it still writes. With ``flock`` the kernel
releases the lock when its holder dies, so there is nothing stale to recover and nothing to race on: a
dead holder's lock is free at once, whatever the file contains, and a live one is never taken. A
holder that hangs makes waiters fail with :class:`StoreLockTimeout` instead of writing over it. The
file is never removed, so every process locks the same inode (if someone removes or replaces it
anyway, a waiter notices the inode changed and locks the new file). This lock does not exclude
OpenClaw processes, which use the ``O_EXCL`` protocol: do not point both at one store at once.

A corrupt store (invalid JSON, wrong shape, or an empty file) is never silently emptied: it is moved
aside as ``sessions.json.corrupt-<ts>``, reported in :attr:`SessionStore.issues` and the log, and
rebuilt from the transcripts in the same folder (one entry per ``*.jsonl``, keyed by the header's
``sessionKey`` when present, else ``agent:<agentId>:recovered:<sessionId>``), with the compaction
count, model and last usage the runner would have recorded from that transcript, and the last flush's
cycle and time (``memoryFlushCompactionCount``, ``memoryFlushAt``), so a rebuilt session does not flush
its current cycle twice.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

try:
    import fcntl
except ImportError:  # Windows: StoreLock uses the filelock package instead
    fcntl = None  # type: ignore[assignment]

from sessionmem.errors import SessionError, StoreLockTimeout, UsageError
from sessionmem.messages import Usage, now_ms, written_in_a_flush
from sessionmem.safefs import PRIVATE_FILE_MODE
from sessionmem.session import keys
from sessionmem.session.transcript import _ms_from_iso, message_from_dict, read_entries

log = logging.getLogger(__name__)


# --- The lock ------------------------------------------------------------------------------------


class _PathLock:
    """This process's hold on one lock file: a re-entrant thread lock, the nesting depth, the handle.

    Shared by every :class:`StoreLock` on the same file (keyed by real path), so two store objects for
    one file nest instead of waiting on each other: ``flock`` locks of two descriptors conflict even
    within one process.
    """

    def __init__(self) -> None:
        self.rlock = threading.RLock()
        self.depth = 0  # guarded by rlock
        self.handle: Any = None  # the locked descriptor (a FileLock without fcntl) while depth > 0


_REGISTRY_GUARD = threading.Lock()
_PATH_LOCKS: dict[str, _PathLock] = {}
_ACTIVE = threading.local()  # open transactions of this thread, by store path


def _real(path: Path) -> str:
    """The key for ``path`` in this process's registries: one key per file, whatever the symlinks."""
    return os.path.realpath(path)


def _path_lock_for(path: Path) -> _PathLock:
    key = _real(path)
    with _REGISTRY_GUARD:
        return _PATH_LOCKS.setdefault(key, _PathLock())


def _reset_after_fork() -> None:
    # A forked child holds no locks, whatever its parent's threads held at fork time. It inherits the
    # parent's locked descriptors: close them without unlocking (an unlock would free the parent's lock).
    global _REGISTRY_GUARD
    _REGISTRY_GUARD = threading.Lock()
    for held in _PATH_LOCKS.values():
        if isinstance(held.handle, int):
            with contextlib.suppress(OSError):
                os.close(held.handle)
    _PATH_LOCKS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


class StoreLock:
    """Cross-process lock (``flock`` on a lock file that is never deleted) plus an in-process RLock.

    Re-entrant within a thread. Contention backs off ``min(1000, 50*attempt)`` ms; after ``timeout_s``
    of waiting it raises :class:`StoreLockTimeout`. Waiting time is the sum of the sleeps, not a clock
    reading, so frozen clocks in tests cannot hang it. See the module docstring for why ``flock``.
    """

    def __init__(self, path: Path, *, timeout_s: float = 10.0) -> None:
        self.path = path
        self.timeout_s = timeout_s
        self._held = _path_lock_for(path)

    def __enter__(self) -> StoreLock:
        held = self._held
        if not held.rlock.acquire(timeout=self.timeout_s):
            raise StoreLockTimeout(str(self.path), self.timeout_s)
        try:
            if held.depth == 0:
                self._acquire_file()
            held.depth += 1
        except BaseException:
            held.rlock.release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        held = self._held
        try:
            held.depth -= 1
            if held.depth == 0:
                handle, held.handle = held.handle, None
                if isinstance(handle, int):
                    # Unlock before closing: a child forked meanwhile shares the descriptor, and
                    # closing ours alone would leave the lock held until the child closes its copy.
                    try:
                        fcntl.flock(handle, fcntl.LOCK_UN)
                    finally:
                        os.close(handle)  # the file stays, for the next holder
                elif handle is not None:
                    handle.release()
        finally:
            held.rlock.release()

    def _acquire_file(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        waited = 0.0
        attempt = 0
        while True:
            handle = self._try_lock()
            if handle is not None:
                self._held.handle = handle
                return
            attempt += 1
            if waited >= self.timeout_s:
                raise StoreLockTimeout(str(self.path), self.timeout_s)
            delay = min(1.0, 0.05 * attempt, self.timeout_s - waited)
            time.sleep(delay)
            waited += delay

    def _try_lock(self) -> Any:
        """The locked handle, or None while another process holds the lock."""
        if fcntl is None:
            from filelock import FileLock, Timeout

            lock = FileLock(str(self.path))
            try:
                lock.acquire(timeout=0)
            except Timeout:
                return None
            return lock
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE_MODE)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return None
            except BaseException:
                os.close(fd)
                raise
            # Trigger: the lock file was removed or replaced between our open and our flock (by hand,
            # or by a writer that speaks the O_EXCL protocol). Why: a lock on an unlinked inode
            # excludes nobody. Outcome: let it go and lock the file that is there now.
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                return fd
            os.close(fd)


class SessionEntry(BaseModel):
    """One session's record. camelCase on disk; fields this class does not know round-trip untouched."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, validate_assignment=True)

    session_id: str = Field(alias="sessionId")
    updated_at: int = Field(default_factory=now_ms, alias="updatedAt")
    session_file: str | None = Field(default=None, alias="sessionFile")
    session_key: str | None = Field(default=None, alias="sessionKey")  # the key it is stored under
    chat_type: str | None = Field(default=None, alias="chatType")
    model: str | None = None
    model_provider: str | None = Field(default=None, alias="modelProvider")
    context_tokens: int | None = Field(default=None, alias="contextTokens")
    input_tokens: int | None = Field(default=None, alias="inputTokens")
    output_tokens: int | None = Field(default=None, alias="outputTokens")
    cache_read: int | None = Field(default=None, alias="cacheRead")
    cache_write: int | None = Field(default=None, alias="cacheWrite")
    total_tokens: int | None = Field(default=None, alias="totalTokens")
    total_tokens_fresh: bool | None = Field(default=None, alias="totalTokensFresh")
    compaction_count: int = Field(default=0, alias="compactionCount")
    memory_flush_at: int | None = Field(default=None, alias="memoryFlushAt")
    memory_flush_compaction_count: int | None = Field(default=None, alias="memoryFlushCompactionCount")

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True)

    def with_updates(self, **fields: Any) -> SessionEntry:
        """A validated copy with ``fields`` (snake_case or camelCase names) replaced."""
        data = self.to_json_dict()
        data.update(_aliased(fields))
        return SessionEntry.model_validate(data)

    def touched(self, **fields: Any) -> SessionEntry:
        """:meth:`with_updates`, and ``updatedAt`` = ``max(its value, now)`` unless ``fields`` give it."""
        given = _aliased(fields)
        given.setdefault("updatedAt", max(self.updated_at, now_ms()))
        return self.with_updates(**given)


_ALIAS_OF = {name: (f.alias or name) for name, f in SessionEntry.model_fields.items()}


def call_figures(usage: Usage) -> dict[str, Any]:
    """What a model call sets in its entry: its usage; ``totalTokens`` = its prompt tokens (no output)."""
    return {
        "input_tokens": usage.input,
        "output_tokens": usage.output,
        "cache_read": usage.cache_read,
        "cache_write": usage.cache_write,
        "total_tokens": usage.prompt_tokens,
        "total_tokens_fresh": True,
    }


def compaction_figures(tokens_after: int | None) -> dict[str, Any]:
    """What a compaction sets in its entry: the new context's size; the last call's figures cleared."""
    return {
        "total_tokens": tokens_after,
        "total_tokens_fresh": True if tokens_after is not None else None,
        "input_tokens": None,
        "output_tokens": None,
        "cache_read": None,
        "cache_write": None,
    }


def _aliased(fields: dict[str, Any]) -> dict[str, Any]:
    return {_ALIAS_OF.get(k, k): v for k, v in fields.items()}


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
        if not isinstance(value, dict):
            raise CorruptStore(f"entry {key!r} is not an object")
        try:
            entry = SessionEntry.model_validate(value)
        except ValidationError as exc:
            raise CorruptStore(f"entry {key!r} is invalid: {exc.errors()[0].get('msg')}") from exc
        norm = keys.normalize_key(key)
        if not norm:
            continue
        if norm not in out or entry.updated_at >= out[norm].updated_at:
            out[norm] = entry
    return out


def serialize_store(entries: dict[str, SessionEntry]) -> bytes:
    return orjson.dumps({k: e.to_json_dict() for k, e in entries.items()}, option=orjson.OPT_INDENT_2) + b"\n"


class SessionStore:
    """sessions.json at ``path``. Thread- and process-safe; see the module docstring."""

    def __init__(
        self,
        path: str | Path,
        *,
        agent_id: str | None = None,
        lock_timeout_s: float = 10.0,
    ) -> None:
        self.path = Path(path)
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
        ``<state>/agents/<agentId>/sessions/sessions.json`` (:func:`sessionmem.session.keys.store_path`)."""
        return cls(keys.store_path(state_dir, agent_id, store), agent_id=agent_id)

    @property
    def sessions_dir(self) -> Path:
        """The folder of the store, where the agent's transcripts live too (OpenClaw keeps them together)."""
        return self.path.parent

    def transcript_path(self, session_id: str) -> Path:
        """``<sessions_dir>/<sessionId>.jsonl``: where a new session's transcript goes."""
        return self.sessions_dir / f"{keys.validate_session_id(session_id)}.jsonl"

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
            os.replace(self.path, aside)
            entries = self._rebuild_from_transcripts()
            self._report(
                f"{self.path} was corrupt ({exc}); moved aside to {aside.name} and rebuilt "
                f"{len(entries)} entries from transcripts"
            )
            self._write(entries)
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

    def __contains__(self, key: str) -> bool:
        return self.get(key) is not None

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
            new = fn(current.model_copy(deep=True) if current is not None else None)
            if new is None:
                return current
            if not isinstance(new, SessionEntry):
                raise UsageError(
                    f"update function must return a SessionEntry or None, not {type(new).__name__}"
                )
            entries[norm] = new
            return new

    def patch(self, key: str, **fields: Any) -> SessionEntry:
        """Set ``fields`` (snake_case or camelCase) on the entry, creating it if needed.

        ``updatedAt`` becomes ``max(existing, now)`` unless given. Creating needs ``session_id``.
        """

        def apply(entry: SessionEntry | None) -> SessionEntry:
            if entry is not None:
                return entry.touched(**fields)
            given = _aliased(fields)
            if "sessionId" not in given:
                raise UsageError(f"cannot create session {key!r} without session_id")
            return SessionEntry.model_validate({"updatedAt": now_ms(), **given})

        result = self.update(key, apply)
        assert result is not None
        return result

    def delete(self, key: str) -> SessionEntry | None:
        """Remove ``key``; returns the entry it had, if any."""
        norm = keys.normalize_key(key)
        with self.transaction() as entries:
            return entries.pop(norm, None)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[dict[str, SessionEntry]]:
        """Hold the lock and edit the whole map in place; it is written atomically on exit (if changed).

        Nothing is written if the block raises. A transaction opened inside another one on the same
        store file (same thread, any :class:`SessionStore` instance) shares the outer map, so nested
        writes are not lost when the outer one saves.
        """
        active: dict[str, dict[str, SessionEntry]] = _ACTIVE.__dict__.setdefault("maps", {})
        key = _real(self.path)
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
        atomic_write_bytes(self.path, data)

    # --- recovery ---

    def _remove_orphaned_temp_files(self) -> None:
        """Remove the temp files of writes that never finished; must hold the lock (see module docstring).

        Only names :func:`atomic_write_bytes` gives this store's temp files match; a file that cannot be
        removed is logged and left, never a reason to fail the update.
        """
        try:
            with os.scandir(self.sessions_dir) as found:
                names = [e.name for e in found if _is_temp_of(e.name, self.path.name)]
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

    def _rebuild_from_transcripts(self) -> dict[str, SessionEntry]:
        entries: dict[str, SessionEntry] = {}
        folder = self.sessions_dir
        if not folder.is_dir():
            return entries
        for file in sorted(folder.glob("*.jsonl")):
            if keys.is_archive_name(file.name):
                continue
            header, figures = _replay_transcript(file)
            found = header.get("id")
            session_id = found if isinstance(found, str) and keys.SESSION_ID_RE.match(found) else file.stem
            key = header.get("sessionKey")
            if not keys.is_valid_key(key):  # none, or malformed (agent::x): recovered under a new key
                key = keys.recovered_key(self.agent_id, session_id)
            entry = SessionEntry.model_validate(
                {
                    **figures,
                    "sessionId": session_id,
                    "updatedAt": int(file.stat().st_mtime * 1000),
                    "sessionFile": str(file),
                    "sessionKey": keys.normalize_key(key),
                    "chatType": keys.chat_type(key),
                }
            )
            norm = keys.normalize_key(key)
            if norm not in entries or entry.updated_at >= entries[norm].updated_at:
                entries[norm] = entry
        return entries


def _replay_transcript(file: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """A transcript's header and the figures the runner would have recorded from it (camelCase).

    Replays the runner's own rules in file order, with its own helpers: an assistant message with usage
    sets :func:`call_figures`; a compaction adds one to ``compactionCount`` and sets
    :func:`compaction_figures` of its ``tokensAfter``. ``model``/``modelProvider`` come from the last
    assistant message that names them. ``contextTokens`` is not in the file.

    The last flush: its prompt is the user message the runner marks ``provenance: {"kind":
    "memory_flush"}``; ``memoryFlushAt`` is that message's timestamp and ``memoryFlushCompactionCount``
    the compactions before it, less those the flush itself caused. Why less: the gate records a flush
    against the cycle it *started* in, and the prompt is appended only once the model accepts it, so a
    compaction in mid-flush (its call overflowed) lands just before the prompt. Such a compaction
    follows the previous message directly and is stamped no earlier than the prompt (created before the
    flush's first call); counting it would mark the next cycle flushed and skip its flush.
    """
    header: dict[str, Any] = {}
    figures: dict[str, Any] = {"compactionCount": 0}
    since_message: list[int | None] = []  # times of the compactions after the latest message
    for _, obj in read_entries(file):
        kind = obj.get("type")
        if kind == "session":
            header = header or obj
        elif kind == "compaction":
            stamp = obj.get("timestamp")
            since_message.append(_ms_from_iso(stamp) if isinstance(stamp, str) else None)
            after = obj.get("tokensAfter")
            known = isinstance(after, int) and not isinstance(after, bool)
            figures.update(_aliased(compaction_figures(after if known else None)))
            figures["compactionCount"] += 1
        elif kind == "message" and isinstance(raw := obj.get("message"), dict):
            compacted_just_before, since_message = since_message, []
            message = message_from_dict(raw)
            if message is None:
                continue
            if message.role == "user" and written_in_a_flush(raw):
                at = raw.get("timestamp")
                if not isinstance(at, int) or isinstance(at, bool):  # not the runner's: no time to compare
                    at = None
                during = sum(1 for t in compacted_just_before if t is not None and at is not None and t >= at)
                figures["memoryFlushCompactionCount"] = figures["compactionCount"] - during
                stamp = obj.get("timestamp")
                figures["memoryFlushAt"] = at if at is not None else _ms_from_iso(str(stamp or ""))
                continue
            if message.role != "assistant":
                continue
            for alias, name in (("model", "model"), ("modelProvider", "provider")):
                if isinstance(raw.get(name), str) and raw[name]:
                    figures[alias] = raw[name]
            if (usage := message.usage) is not None:
                figures.update(_aliased(call_figures(usage)))
    return header, figures


def _agent_id_from_path(path: Path) -> str:
    # <state>/agents/<agentId>/sessions/sessions.json
    parts = path.parts
    if len(parts) >= 4 and parts[-4] == "agents":
        return parts[-3]
    return keys.DEFAULT_AGENT_ID


_TEMP_SUFFIX_RE = re.compile(r"\.[0-9a-f]{32}\.tmp")


def _temp_path(path: Path) -> Path:
    """A new temp file name for an atomic write of ``path``: ``<name>.<32 hex>.tmp`` beside it."""
    return path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")


def _is_temp_of(name: str, target: str) -> bool:
    """True when ``name`` is one of :func:`_temp_path`'s names for a file called ``target``."""
    return name.startswith(target) and _TEMP_SUFFIX_RE.fullmatch(name, len(target)) is not None


def atomic_write_bytes(path: Path, data: bytes, *, mode: int = PRIVATE_FILE_MODE) -> None:
    """Write ``data`` to ``path`` so that readers see the old content or the new, never a mix.

    Temp file in the same folder (same filesystem, so ``os.replace`` is atomic), fsync, replace,
    then fsync the folder so the rename itself survives a power cut.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_path(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
