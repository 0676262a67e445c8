"""Opening the index database: WAL, a busy timeout, FTS5, and sqlite-vec when it can load.

The standard library's ``sqlite3`` is used when it can load extensions. Many Python builds
(pyenv and macOS among them) cannot; then the SQLite build from ``sqlean.py`` (a declared
dependency) is used, which can. ``VectorSupport`` records which path was taken and why, for
``sessionmem memory status --deep``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from sessionmem.safefs import PRIVATE_FILE_MODE, create_private, narrow_to_private

try:
    import fcntl
except ImportError:  # Windows: process_lock() uses the filelock package instead
    fcntl = None  # type: ignore[assignment]

BUSY_TIMEOUT_MS = 5000


@dataclass(frozen=True, slots=True)
class VectorSupport:
    loaded: bool
    driver: str  # "sqlite3" or "sqlean"
    version: str | None  # sqlite-vec version when loaded
    reason: str  # how it loaded, or why it did not


def sqlite_module() -> tuple[ModuleType, str]:
    """The DB-API module to use: stdlib sqlite3 if it can load extensions, else sqlean."""
    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return sqlite3, "sqlite3"
    try:
        import sqlean

        return sqlean, "sqlean"
    except ImportError:  # pragma: no cover - sqlean.py is a dependency
        return sqlite3, "sqlite3"


DB_ERRORS: tuple[type[BaseException], ...] = tuple({sqlite3.DatabaseError, sqlite_module()[0].DatabaseError})


def connect(
    path: str | Path, *, load_vector: bool = True, extension_path: str | None = None
) -> tuple[Any, VectorSupport]:
    """Open (creating) the database at ``path``; returns the connection and how vectors are served.

    The file is created 0600 before SQLite opens it (SQLite gives its ``-wal`` and ``-shm`` files the
    database file's mode), and one left looser by an earlier version is narrowed: with the sessions
    source the index holds transcript text, which is 0600 in the transcripts themselves."""
    if str(path) != ":memory:":
        create_private(path)
        narrow_to_private(path, str(path) + "-wal", str(path) + "-shm")
    module, driver = sqlite_module()
    conn = module.connect(
        str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
    )
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    if str(path) != ":memory:":
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    support = (
        _load_sqlite_vec(conn, driver, extension_path)
        if load_vector
        else VectorSupport(False, driver, None, "vector store disabled in config")
    )
    return conn, support


def _load_sqlite_vec(conn: Any, driver: str, extension_path: str | None) -> VectorSupport:
    if not hasattr(conn, "enable_load_extension"):
        return VectorSupport(False, driver, None, f"{driver} cannot load extensions on this Python")
    try:
        conn.enable_load_extension(True)
        conn.load_extension(extension_path or sqlite_vec_path())
        conn.enable_load_extension(False)
        (version,) = conn.execute("SELECT vec_version()").fetchone()
    except Exception as exc:
        return VectorSupport(False, driver, None, f"sqlite-vec failed to load through {driver}: {exc}")
    how = (
        "stdlib sqlite3" if driver == "sqlite3" else "sqlean.py (stdlib sqlite3 has no enable_load_extension)"
    )
    return VectorSupport(True, driver, str(version), f"sqlite-vec {version} loaded through {how}")


def sqlite_vec_path() -> str:
    """The loadable extension shipped in the ``sqlite-vec`` package, found without importing it
    (its ``__init__`` imports numpy, which would cost a keyword-only CLI search ~130 ms)."""
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the sqlite-vec package is not installed (pip install sqlite-vec)")
    return os.path.join(next(iter(spec.submodule_search_locations)), "vec0")


def write_token(conn: Any) -> tuple[int, int]:
    """Changes whenever another connection commits (``data_version``) or ``conn`` itself writes."""
    (version,) = conn.execute("PRAGMA data_version").fetchone()
    return int(version), int(conn.total_changes)


class ProcessLock:
    """A reentrant lock shared by threads and processes, on ``flock`` of a lock file.

    The kernel releases it when the holder dies, so there is no stale lock to recover. (The
    ``filelock`` package does the same, but importing it costs a keyword-only CLI search ~50 ms.)
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._fd: int | None = None

    def __enter__(self) -> ProcessLock:
        self._thread_lock.acquire()
        if self._depth == 0:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE_MODE)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                except BaseException:
                    os.close(fd)
                    raise
            except BaseException:
                self._thread_lock.release()
                raise
            self._fd = fd
        self._depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        self._thread_lock.release()


def process_lock(path: str | Path) -> Any:
    """A reentrant inter-process lock on ``path``: flock where the OS has it, else filelock."""
    if fcntl is not None:
        return ProcessLock(path)
    from filelock import FileLock

    return FileLock(str(path))


@contextmanager
def atomic(conn: Any) -> Iterator[Any]:
    """BEGIN IMMEDIATE/COMMIT at the top level, a SAVEPOINT when nested; rolls back on error, a failed
    COMMIT included.

    SQLite may already have rolled the transaction back itself after SQLITE_FULL or SQLITE_IOERR (its
    documentation says to answer those with a ROLLBACK that may then fail): the rollback runs only while
    a transaction is open, and its own failure is never raised over the error that caused it.
    (``tests/memory/test_index_disk_full.py`` fills the disk during a sync.)"""
    if conn.in_transaction:
        name = f"sp_{id(conn)}_{os.urandom(4).hex()}"
        conn.execute(f"SAVEPOINT {name}")
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:
                with contextlib.suppress(*DB_ERRORS):
                    conn.execute(f"ROLLBACK TO {name}")
                    conn.execute(f"RELEASE {name}")
            raise
        conn.execute(f"RELEASE {name}")
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            with contextlib.suppress(*DB_ERRORS):
                conn.execute("ROLLBACK")
        raise
