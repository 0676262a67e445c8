"""Opening the index database: WAL, a busy timeout, FTS5, and sqlite-vec when it can load.

The standard library's ``sqlite3`` is used when it can load extensions. Many Python builds
(pyenv and macOS among them) cannot; then the SQLite build from ``sqlean.py`` (a declared
dependency) is used, which can. ``VectorSupport`` records which path was taken and why, for
``sessionmem memory status --deep``.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

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


def connect(
    path: str | Path, *, load_vector: bool = True, extension_path: str | None = None
) -> tuple[Any, VectorSupport]:
    """Open (creating) the database at ``path``; returns the connection and how vectors are served."""
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
        if extension_path:
            conn.load_extension(extension_path)
        else:
            import sqlite_vec

            sqlite_vec.load(conn)
        conn.enable_load_extension(False)
        (version,) = conn.execute("SELECT vec_version()").fetchone()
    except Exception as exc:
        return VectorSupport(False, driver, None, f"sqlite-vec failed to load through {driver}: {exc}")
    how = (
        "stdlib sqlite3" if driver == "sqlite3" else "sqlean.py (stdlib sqlite3 has no enable_load_extension)"
    )
    return VectorSupport(True, driver, str(version), f"sqlite-vec {version} loaded through {how}")


@contextmanager
def atomic(conn: Any) -> Iterator[Any]:
    """BEGIN IMMEDIATE/COMMIT at the top level, a SAVEPOINT when nested; rolls back on error."""
    if conn.in_transaction:
        name = f"sp_{id(conn)}_{os.urandom(4).hex()}"
        conn.execute(f"SAVEPOINT {name}")
        try:
            yield conn
        except BaseException:
            conn.execute(f"ROLLBACK TO {name}")
            conn.execute(f"RELEASE {name}")
            raise
        conn.execute(f"RELEASE {name}")
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
