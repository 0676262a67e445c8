"""Opening an agent's memory index and recovering it: the writer's connection, the searches' second
connection, and the sync lock, for a SQLite file or a PostgreSQL schema (``MemoryIndex`` holds one
:class:`IndexConnections`).

A database that is not one (or is malformed, or has another schema version) is moved aside to
``<db>.corrupt-<time>`` and rebuilt from the Markdown; a PostgreSQL schema of an unusable version is
dropped and rebuilt in one transaction, unless a process of another version has it open: then the open
is refused (``pg_versions``). Either way a line goes to ``issues``, which ``status().issues`` shows.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sessionmem.errors import ConfigError
from sessionmem.memory.store.database import DB_ERRORS, VectorSupport, connect, process_lock
from sessionmem.memory.store.index_sqlite import SqliteStore
from sessionmem.memory.store.rebuild import claim_owner, move_aside, open_checked, remove_dead_scratch
from sessionmem.safefs import make_private_dirs

if TYPE_CHECKING:
    from sessionmem.config import MemorySearchConfig
    from sessionmem.dsn import PgTarget

log = logging.getLogger(__name__)
T = TypeVar("T")


class IndexConnections:
    """The index's store, opened: ``conn`` (the writer's ``IndexStore``), ``reader`` (the searches'
    ``IndexStore``, a second connection: WAL in SQLite, MVCC in PostgreSQL, never waiting for a sync,
    used under ``read_lock``), ``sync_mutex`` (a file lock beside a SQLite file; the store's advisory lock
    in PostgreSQL), what vector support loaded, and why full-text search is off (``fts_error``).
    ``issues``: the index's list, to which what was moved aside or dropped is added."""

    def __init__(
        self, agent_id: str, settings: MemorySearchConfig, path: Path | PgTarget, issues: list[str]
    ) -> None:
        self.agent_id = agent_id
        self.settings = settings
        self.path = path
        self.issues = issues
        self.sync_mutex: Any = process_lock(str(path) + ".lock") if isinstance(path, Path) else None
        self.read_lock = threading.Lock()
        self.conn: Any = None
        self.reader: Any = None
        self.vector = VectorSupport(False, "sqlite3", None, "not opened")
        self.fts_error: str | None = None

    @property
    def shown_location(self) -> str:
        """The index for messages: its file, or its PostgreSQL target without a password."""
        return str(self.path)  # a PgTarget shows itself without its password

    @property
    def file(self) -> Path:
        """The SQLite file (only the file store's code asks)."""
        assert isinstance(self.path, Path), "the PostgreSQL store has no file"
        return self.path

    def open(self) -> None:
        if not isinstance(self.path, Path):
            self._open_pg(self.path)
            return
        make_private_dirs(self.path.parent)
        with self.sync_mutex:
            self.remove_dead_scratch()
            self.conn = self._connect_checked()
            self.vector = self.conn.vector
            try:
                claim_owner(self.conn, self.agent_id, self.shown_location)
            except ConfigError:
                self.conn.close()
                raise
            self.reader = self.open_reader()

    def _open_pg(self, target: PgTarget) -> None:
        """Connect the writer (creating the schema), make the tables under the sync lock (an unusable
        schema version is dropped and rebuilt from the Markdown), connect the reader."""
        from sessionmem.memory.store.index_postgres import PgStore

        tokenizer = self.settings.store.fts.tokenizer
        store = PgStore.connect(target, tokenizer, create=True)
        try:
            self.sync_mutex = store.sync_lock()
            with self.sync_mutex:
                self.fts_error, problem = store.open_schema(tokenizer)
                if problem is not None:
                    self.issues.append(f"{problem}; dropped its tables and rebuilt from the Markdown files")
                    log.warning("memory index %s: %s; dropped and rebuilt", target, problem)
                claim_owner(store, self.agent_id, self.shown_location)
        except BaseException:
            store.close()
            raise
        self.conn, self.vector = store, store.vector
        self.reader = store.opener()()

    def open_reader(self) -> Any:
        """A second connection for searches (WAL in SQLite, MVCC in PostgreSQL: never waiting for a sync)."""
        opener = self.conn.opener()
        assert opener is not None
        return opener()

    def reopen_reader(self) -> None:
        """A fresh connection for searches, after the file was rebuilt under the old one."""
        with self.read_lock:
            with contextlib.suppress(*DB_ERRORS):
                self.reader.close()
            self.reader = self.open_reader()

    def once_more_if_reconnected(self, call: Callable[[], T]) -> T:
        """``call()``; when it fails because the PostgreSQL server ended a connection (a restart, a
        failover, an idle timeout), the lost connections are replaced and ``call()`` runs once more. Any
        other error (a statement's own; any error of a SQLite file) is raised as it is."""
        try:
            return call()
        except Exception as exc:
            if isinstance(self.path, Path) or not self.reconnect_lost(exc):
                raise
        return call()

    def reconnect_lost(self, error: BaseException) -> bool:
        """Replace each PostgreSQL connection ``error`` says was lost and is broken; whether any was. When
        one was, the others are probed (a server that ends one connection has often ended them all)."""
        stores = [store for store in (self.conn, self.reader) if store is not None]
        recovered = [store.recover(error) for store in stores]
        if any(recovered):
            for store, done in zip(stores, recovered, strict=True):
                if not done:
                    store.replace_if_lost()
        return any(recovered)

    def remove_dead_scratch(self) -> None:
        """Scratch files of rebuilds killed mid-way (holding the process lock: their writers are gone).
        (PostgreSQL leaves none: a rebuild killed mid-way is a transaction the server rolls back.)"""
        if not isinstance(self.path, Path):
            return
        removed = remove_dead_scratch(self.path)
        if removed:
            log.info(
                "memory index %s: removed %d scratch files of an unfinished rebuild", self.path, len(removed)
            )

    def _connect(self, path: Path) -> tuple[Any, VectorSupport]:
        vector = self.settings.store.vector
        return connect(path, load_vector=vector.enabled, extension_path=vector.extension_path)

    def _connect_checked(self) -> SqliteStore:
        """Connect, moving a corrupt or foreign-schema database aside once; apply the schema."""
        conn, support, self.fts_error = open_checked(
            self.file, self._connect, self.settings.store.fts.tokenizer, self._move_aside
        )
        return SqliteStore(conn, support, path=self.file, connect=self._connect, lock=self.sync_mutex)

    def _move_aside(self, problem: str) -> None:
        target = move_aside(self.file)
        self.issues.append(f"{problem}; moved aside to {target.name} and rebuilt from the Markdown files")
        log.warning("memory index %s: %s; moved aside to %s", self.path, problem, target)

    def recover_corrupt(self, error: str) -> None:
        """The file went bad under a sync: close both connections, move it aside, open a fresh one."""
        for conn in (self.reader, self.conn):
            with contextlib.suppress(*DB_ERRORS):
                conn.close()
        self._move_aside(f"index database {self.file.name} is corrupt ({error})")
        self.conn = self._connect_checked()
        self.vector = self.conn.vector
        self.reader = self.open_reader()

    def close(self) -> None:
        for conn in (self.reader, self.conn):
            if conn is not None:
                with contextlib.suppress(*DB_ERRORS, *conn.errors):
                    conn.close()
