"""Safe rebuilds and corruption recovery for the index file (used by ``MemoryIndex``).

A full rebuild happens in ``<db>.tmp-<uuid>`` (``scratch_index``), its embedding cache seeded from the
live file (``seed_cache``), and is then copied over the live file in one SQLite transaction with the
backup API (``swap_in``). Readers never see a half-built index, a failed rebuild leaves the old one
working, and no file is swapped under an open connection (which would pair the new file with
another connection's ``-wal``/``-shm``).

A database that is not one (or is malformed, or has another schema version) is moved aside to
``<db>.corrupt-<time>`` (``move_aside``) so that it can be rebuilt from the Markdown.

A rebuild killed mid-way (SIGKILL, power loss) leaves its scratch file and journals behind; a rebuild
only runs under the index's process lock, so whoever holds that lock and finds scratch files knows
their writer is gone: :func:`remove_dead_scratch` deletes them (at every open and sync).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessionmem.errors import ConfigError, MemoryIndexError
from sessionmem.memory.store.database import DB_ERRORS, VectorSupport, atomic
from sessionmem.memory.store.meta import (
    apply_schema,
    is_corruption,
    schema_problem,
)
from sessionmem.memory.store.schema import META_KEY, OWNER_KEY

if TYPE_CHECKING:
    from sessionmem.memory.embed.embedder import Embedder

__all__ = [
    "caused_by_corruption",
    "claim_owner",
    "index_owner",
    "move_aside",
    "open_checked",
    "read_json_attached",
    "remove_dead_scratch",
    "scratch_index",
    "seed_cache",
    "swap_in",
]

ConnectFn = Callable[[Path], tuple[Any, VectorSupport]]


def index_owner(conn: Any) -> str | None:
    """The agent an index belongs to: its claim (:data:`OWNER_KEY`, written when it was first opened), or
    the agent its meta names (an index synced by an earlier release); None when neither says."""
    for key, field in ((OWNER_KEY, None), (META_KEY, "agentId")):
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        try:
            value = json.loads(row[0]) if row is not None else None
        except ValueError:
            value = None
        if field is not None:
            value = value.get(field) if isinstance(value, dict) else None
        if isinstance(value, str):
            return value
    return None


def claim_owner(conn: Any, agent_id: str, path: Path | str) -> None:
    """Refuse an index (a file, or a PostgreSQL schema) that another agent's index opened first (two agents
    configured onto one ``store.path``); an index no agent has claimed becomes ``agent_id``'s at once, so
    the refusal holds whichever agent opens, syncs or rebuilds first. Call holding the index's sync lock."""
    owner = index_owner(conn)
    if owner is None:
        with conn.atomic():
            conn.execute(
                "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO NOTHING",
                (OWNER_KEY, json.dumps(agent_id)),
            )
        owner = index_owner(conn)
    if owner != agent_id:
        raise ConfigError(
            f"memory index {path} belongs to agent {owner!r}; agent {agent_id!r} would share it and search "
            "its notes: memorySearch.store.path must contain {agentId} (one index file per agent)"
        )


# -- corruption ---------------------------------------------------------------------------------


def move_aside(path: Path) -> Path:
    """Move the database at ``path`` (and its ``-wal``/``-shm``) to ``<name>.corrupt-<time>``; the target."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    for suffix in ("", "-wal", "-shm"):
        src = Path(str(path) + suffix)
        if src.exists():
            os.replace(src, Path(str(target) + suffix))
    return target


def open_checked(
    path: Path, connect: ConnectFn, tokenizer: str, on_unusable: Callable[[str], None]
) -> tuple[Any, VectorSupport, str | None]:
    """Connect to ``path`` and apply the schema: the connection, its vector support and the FTS error.

    A corrupt or foreign-schema database is handed to ``on_unusable`` (with the problem) once, which
    must move it aside; the second attempt then starts from an empty file."""
    for attempt in (1, 2):
        conn = None
        try:
            conn, support = connect(path)
            problem = schema_problem(conn)
        except DB_ERRORS as exc:
            if not is_corruption(exc) or attempt == 2:
                raise MemoryIndexError(f"cannot open memory index {path}: {exc}") from exc
            problem = f"index database {path.name} is corrupt ({exc})"
        if problem is None and conn is not None:
            fts_error = apply_schema(conn, tokenizer)
            return conn, support, fts_error
        if conn is not None:
            conn.close()
        on_unusable(problem or "unusable index database")
    raise MemoryIndexError(f"cannot open memory index {path}")  # pragma: no cover


def caused_by_corruption(exc: BaseException | None) -> bool:
    """True when ``exc`` or an exception it was raised from means the database file is damaged."""
    seen = 0
    while exc is not None and seen < 10:
        if is_corruption(exc):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


# -- safe rebuild -------------------------------------------------------------------------------


def _scratch_name(live: Path) -> re.Pattern[str]:
    return re.compile(rf"^{re.escape(live.name)}\.tmp-[0-9a-f]{{32}}(?:-wal|-shm|-journal)?$")


def remove_dead_scratch(live: Path) -> list[str]:
    """Delete the scratch files (``<live>.tmp-<uuid>`` and their journals) of rebuilds that did not
    finish. Call only while holding the index's process lock, which a running rebuild holds."""
    pattern = _scratch_name(live)
    try:
        names = [n for n in os.listdir(live.parent) if pattern.match(n)]
    except OSError:
        return []
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(live.parent / name)
    return sorted(names)


@contextlib.contextmanager
def scratch_index(live: Path, connect: ConnectFn) -> Iterator[Any]:
    """A connection to a fresh ``<live>.tmp-<uuid>``; closed and deleted (with its journals) on exit,
    also when opening it failed half-way (a full disk: the file made, its schema refused)."""
    tmp = live.with_name(f"{live.name}.tmp-{uuid.uuid4().hex}")
    conn = None
    try:
        conn, _ = connect(tmp)
        yield conn
    finally:
        if conn is not None:
            with contextlib.suppress(*DB_ERRORS):
                conn.close()
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(OSError):
                os.unlink(str(tmp) + suffix)


def swap_in(built: Any, live: Any) -> None:
    """Copy the finished index ``built`` over ``live``: one transaction, atomic for every reader."""
    built.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    built.backup(live)


def seed_cache(conn: Any, live: Path, embedder: Embedder | None) -> None:
    """Copy the old index's cached vectors (and its chunks' vectors, same model) into ``conn``."""
    if not live.exists():
        return
    conn.execute("ATTACH DATABASE ? AS old", (str(live),))
    try:
        with atomic(conn):
            conn.execute("INSERT OR IGNORE INTO main.embedding_cache SELECT * FROM old.embedding_cache")
            old = read_json_attached(conn)
            if (
                embedder is not None
                and old is not None
                and (
                    (old.get("provider"), old.get("model"), old.get("providerKey"))
                    == (embedder.provider, embedder.model, embedder.provider_key)
                )
            ):
                conn.execute(
                    "INSERT OR IGNORE INTO main.embedding_cache"
                    "(provider, model, provider_key, hash, embedding, dims, updated_at) "
                    "SELECT ?, ?, ?, hash, embedding, length(embedding) / 4, updated_at FROM old.chunks "
                    "WHERE model = ? AND embedding IS NOT NULL",
                    (embedder.provider, embedder.model, embedder.provider_key, embedder.model),
                )
    finally:
        conn.execute("DETACH DATABASE old")


def read_json_attached(conn: Any) -> dict[str, Any] | None:
    """The old index's meta, read through ``ATTACH ... AS old``."""
    try:
        row = conn.execute("SELECT value FROM old.meta WHERE key = ?", (META_KEY,)).fetchone()
    except DB_ERRORS:
        return None
    if row is None:
        return None
    try:
        value = json.loads(row[0])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
