"""The index stores the memory tests run against: SQLite always, PostgreSQL on a real server.

``index_store`` (a fixture in ``conftest.py``) is parametrised over both; a PostgreSQL test gets a
schema of its own, dropped afterwards. The server is ``SESSIONMEM_TEST_PG_DSN`` (default
``postgresql://postgres@127.0.0.1:5432/test``); without one the PostgreSQL cases skip saying so, and
with ``CI=true`` they fail instead of skipping. The helpers here read an index's rows through a
fresh connection of its own store, with SQL both stores run.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sessionmem.config import MemorySearchConfig
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.store.database import connect
from sessionmem.memory.store.index_sqlite import SqliteStore
from sessionmem.memory.store.seam import IndexStore, KeywordFilters

STORES = ("sqlite", "postgresql")
PG_DSN_VAR = "SESSIONMEM_TEST_PG_DSN"
DEFAULT_PG_DSN = "postgresql://postgres@127.0.0.1:5432/test"


def pg_dsn() -> str:
    return os.environ.get(PG_DSN_VAR) or DEFAULT_PG_DSN


def pg_problem() -> str | None:
    """Why PostgreSQL tests cannot run here, or None."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install -e '.[postgres]')"
    try:
        psycopg.connect(pg_dsn(), connect_timeout=3).close()
    except psycopg.Error as exc:
        return f"no PostgreSQL server at {PG_DSN_VAR}={pg_dsn()} ({exc})"
    return None


@dataclass(frozen=True)
class StoreUnderTest:
    """``kind`` "sqlite" or "postgresql"; ``path`` the ``memorySearch.store.path`` (None: the default)."""

    kind: str
    path: str | None = None

    def settings(self, settings: MemorySearchConfig) -> MemorySearchConfig:
        """``settings`` with this store's ``store.path`` (SQLite: unchanged)."""
        if self.path is None:
            return settings
        return settings.model_copy(update={"store": settings.store.model_copy(update={"path": self.path})})


SQLITE = StoreUnderTest("sqlite")


@contextlib.contextmanager
def store_under_test(kind: str) -> Iterator[StoreUnderTest]:
    """``kind``'s store for one test or module: PostgreSQL in a fresh schema, dropped on exit. Without a
    server the test skips naming ``SESSIONMEM_TEST_PG_DSN``; with ``CI=true`` it fails instead."""
    if kind == "sqlite":
        yield StoreUnderTest("sqlite")
        return
    problem = pg_problem()
    if problem is not None:
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"PostgreSQL tests must run in CI: {problem}")
        pytest.skip(f"{problem}; set {PG_DSN_VAR} to a server to run them")
    with pg_schema() as schema:
        sep = "&" if "?" in pg_dsn() else "?"
        yield StoreUnderTest("postgresql", f"{pg_dsn()}{sep}schema={schema}")


@contextlib.contextmanager
def pg_schema(prefix: str = "t") -> Iterator[str]:
    """A fresh schema name on the test server (the index creates it); dropped on exit."""
    import psycopg
    from psycopg import sql

    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        yield schema
    finally:
        with psycopg.connect(pg_dsn(), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def open_store(index: MemoryIndex) -> IndexStore:
    """A fresh connection to ``index``'s store (close it)."""
    if isinstance(index.path, Path):
        return SqliteStore(connect(index.path)[0], path=index.path)
    from sessionmem.memory.store.index_postgres import PgStore

    return PgStore.connect(index.path, index.settings.store.fts.tokenizer)


def rows(index: MemoryIndex, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """The rows of ``sql`` (``?`` parameters, SQL both stores run) read from ``index``'s store."""
    store = open_store(index)
    try:
        return [tuple(r) for r in store.execute(sql, args).fetchall()]
    finally:
        store.close()


def keyword_rows(index: MemoryIndex, path: str) -> int:
    """How many keyword rows ``path`` has (``chunks_fts`` rows: FTS5 in SQLite, tsvectors in PostgreSQL)."""
    if isinstance(index.path, Path):
        return int(rows(index, "SELECT COUNT(*) FROM chunks_fts WHERE path = ?", path)[0][0])
    sql = "SELECT COUNT(*) FROM chunks_fts f JOIN chunks c ON c.rowid = f.rowid WHERE c.path = ?"
    return int(rows(index, sql, path)[0][0])


def keyword_paths(index: MemoryIndex, phrase: str) -> list[tuple[str, int, int]]:
    """(path, start, end) of the chunks the store's keyword index finds for one quoted phrase, best first."""
    store = open_store(index)
    try:
        ranks = store.keywords().search([phrase], KeywordFilters(), 50)
        if not ranks:
            return []
        found = {
            r[0]: (r[1], r[2], r[3])
            for r in store.execute(
                "SELECT rowid, path, start_line, end_line FROM chunks"
                f" WHERE rowid IN ({','.join('?' * len(ranks))})",
                list(ranks),
            ).fetchall()
        }
        return [found[rowid] for rowid in ranks if rowid in found]
    finally:
        store.close()


def run(index: MemoryIndex, sql: str, *args: Any) -> None:
    """Run one write (SQL both stores run) on ``index``'s store, committed."""
    store = open_store(index)
    try:
        with store.atomic():
            store.execute(sql, args)
    finally:
        store.close()
