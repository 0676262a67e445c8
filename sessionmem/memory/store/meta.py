"""The index's bookkeeping in its own tables: the schema applied and checked, the ``meta`` table's keys and
JSON values, the vector table's width, and what a database error means (corruption, a full disk).

Both stores (SQLite and PostgreSQL), the sync pass, search, erasure and rebuilds read and write these;
they live below all of them.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import json
import re
import sqlite3
from typing import Any

from sessionmem.errors import os_error_reason
from sessionmem.memory.store.database import DB_ERRORS, atomic
from sessionmem.memory.store.schema import (
    ADDED_COLUMNS,
    AUDIENCE_INDEX,
    META_KEY,
    SCHEMA_VERSION,
    TABLES,
    fts_table_sql,
)

FTS_ONLY_MODEL = "fts-only"


SCHEMA_VERSION_KEY = "schema_version"


FILE_ISSUES_KEY = "file_issues_v1"  # JSON {path: issue} for files indexed with a problem


VECTOR_ISSUES_KEY = "vector_issues_v1"  # JSON {path: issue} for files with chunks left without a vector


NONE_PROVIDER_KEY = hashlib.sha256(b'{"model":"fts-only","provider":"none"}').hexdigest()


_UPSERT_META = (
    "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"
)


_VEC_DIMS = re.compile(r"float\[(\d+)\]", re.IGNORECASE)


def is_corruption(exc: BaseException) -> bool:
    """True for errors meaning the file is not a usable database (not for 'locked' or 'busy')."""
    text = str(exc).lower()
    return isinstance(exc, DB_ERRORS) and any(
        word in text
        for word in ("not a database", "malformed", "corrupt", "disk image", "vtable constructor failed")
    )


SQLITE_FULL = 13  # SQLite's result code for "database or disk is full"


POSTGRES_DISK_FULL = "53100"  # SQLSTATE disk_full


def disk_full_reason(exc: BaseException) -> str | None:
    """Why a write failed when it failed for want of disk space (SQLite's SQLITE_FULL, PostgreSQL's
    disk_full, ENOSPC or EDQUOT from a file), looking through the exceptions behind ``exc``; else None."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, DB_ERRORS) and getattr(link, "sqlite_errorcode", None) == SQLITE_FULL:
            return "no space left on device"
        if getattr(link, "sqlstate", None) == POSTGRES_DISK_FULL:
            return "the database server's disk is full"
        if isinstance(link, OSError) and link.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", None)):
            return os_error_reason(link)
        link = link.__cause__ or link.__context__
    return None


def schema_problem(conn: Any) -> str | None:
    """Why this database cannot be used as it is, or None (an empty file is fine)."""
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not names:
        return None
    if "meta" not in names:
        return "index database has no meta table (unknown schema)"
    for table, wanted in expected_columns().items():
        if table not in names:
            continue  # created by apply_schema
        present = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        missing = sorted(
            wanted - present - {ADDED_COLUMNS[table][0]} if table in ADDED_COLUMNS else wanted - present
        )
        if missing:
            return f"index table {table} has other columns than expected (missing {', '.join(missing)})"
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (SCHEMA_VERSION_KEY,)).fetchone()
    if row is None or row[0] != str(SCHEMA_VERSION):
        found = row[0] if row else "none"
        return f"index schema version {found} differs from {SCHEMA_VERSION}"
    return None


@functools.cache
def expected_columns() -> dict[str, frozenset[str]]:
    """The columns of each table :data:`TABLES` creates, read from a scratch in-memory database (so
    the DDL stays the one description of the schema)."""
    scratch = sqlite3.connect(":memory:")
    try:
        scratch.executescript(TABLES)
        tables = [r[0] for r in scratch.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: frozenset(r[1] for r in scratch.execute(f"PRAGMA table_info({t})")) for t in tables}
    finally:
        scratch.close()


def apply_schema(conn: Any, tokenizer: str) -> str | None:
    """Create what is missing (idempotent); returns why FTS5 is unavailable, or None."""
    conn.executescript(TABLES)
    for table, (column, decl) in ADDED_COLUMNS.items():
        present = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if column not in present:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
    conn.execute(AUDIENCE_INDEX)
    fts_error = None
    try:
        conn.execute(fts_table_sql(tokenizer))
    except DB_ERRORS as exc:
        fts_error = f"FTS5 table could not be created: {exc}"
    with atomic(conn):
        conn.execute(_UPSERT_META, (SCHEMA_VERSION_KEY, str(SCHEMA_VERSION)))
    return fts_error


def read_json(conn: Any, key: str) -> Any:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    if row is None:
        return None
    try:
        return json.loads(row[0])
    except ValueError:
        return None


def write_json(conn: Any, key: str, value: Any) -> None:
    conn.execute(_UPSERT_META, (key, json.dumps(value, sort_keys=True)))


def read_meta(conn: Any) -> dict[str, Any] | None:
    value = read_json(conn, META_KEY)
    return value if isinstance(value, dict) else None


def has_table(conn: Any, name: str) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    return row is not None


def vec_dims(conn: Any) -> int | None:
    row = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'chunks_vec'").fetchone()
    if row is None or not row[0]:
        return None
    match = _VEC_DIMS.search(row[0])
    return int(match.group(1)) if match else None


def stored_width(conn: Any, meta: dict[str, Any] | None) -> int | None:
    """The width of the vectors the index holds: its vec table's, else ``meta``'s (the index's meta as
    the caller read it), else a chunk's. ``conn``: an ``IndexStore``."""
    dims = conn.vec_dims() or (meta or {}).get("vectorDims")
    if isinstance(dims, int) and dims > 0:
        return dims
    row = conn.execute("SELECT length(embedding) FROM chunks WHERE embedding IS NOT NULL LIMIT 1").fetchone()
    return int(row[0]) // 4 if row is not None else None
