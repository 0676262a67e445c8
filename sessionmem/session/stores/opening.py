"""Which backend ``session.store`` names, and opening it: the one place the runner, the CLI and the MCP
server turn the setting into a store.

``session.store`` (``~`` and ``{agentId}`` expanded; a relative path is taken from the current folder):

- unset, or a path (``.../sessions.json``, any name not below): sessions.json and JSONL transcripts
  (:class:`~sessionmem.session.stores.sessions_json.SessionStore`, the default, OpenClaw's format);
- a path ending ``.sqlite``, ``.sqlite3`` or ``.db``, or ``sqlite:///<absolute path>``: one SQLite database
  per agent, the transcripts beside it
  (:class:`~sessionmem.session.stores.sessions_sqlite.SqliteSessionStore`);
  ``sqlite`` alone: ``sessions.sqlite`` in the default sessions folder;
- ``postgresql://`` or ``postgres://``: PostgreSQL, sessions and transcripts in the database, shared by
  several hosts (:class:`~sessionmem.session.stores.sessions_postgres.PostgresSessionStore`; the ``postgres``
  extra).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from sessionmem.dsn import PostgresUrl, is_postgres_dsn
from sessionmem.errors import UsageError
from sessionmem.session.stores import keys

if TYPE_CHECKING:  # the backends (transcripts, orjson, logging) load only when a store is opened
    from sessionmem.session.stores.backend import SessionBackend

StoreKind = Literal["sessions.json", "sqlite", "postgresql"]
SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*)://", re.IGNORECASE)
# A libpq "key=value" connection string (host=... dbname=...): not a path, and not a form we take
_CONNINFO = re.compile(r"^\s*(host|hostaddr|dbname|user|port|service)\s*=", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class StoreSpec:
    """What a ``session.store`` value names: the backend, and its file (``path``) or PostgreSQL URL
    (``url``, whose ``repr`` holds no password)."""

    kind: StoreKind
    path: Path | None = None
    url: PostgresUrl | None = None

    @property
    def shown(self) -> str:
        """The store for messages: its file, or the URL without its password and parameters."""
        return str(self.path) if self.path is not None else str(self.url)

    @property
    def sessions_dir(self) -> Path | None:
        """The folder of the transcripts (a file backend keeps them beside its store file)."""
        return self.path.parent if self.path is not None else None


def parse_store_spec(spec: str | None, *, state_dir: Path, agent_id: str) -> StoreSpec:
    """Read a ``session.store`` value (see the module docstring); a malformed one raises UsageError (a
    malformed PostgreSQL URL: ConfigError naming the part that is wrong, never the value)."""
    text = (spec or "").strip()
    scheme = _SCHEME.match(text)
    if scheme is not None:
        name = scheme.group(1).lower()
        if is_postgres_dsn(text):
            return StoreSpec("postgresql", url=PostgresUrl.parse(text, setting="session.store"))
        if name == "sqlite" and not text[len("sqlite://") :].startswith("/"):
            raise UsageError(
                "session.store: a sqlite:// URL with a relative path is not a store this sessionmem knows: "
                "write sqlite:///<absolute path>"
            )
        if name != "sqlite":
            # The value is not echoed: a mistyped scheme may come with a password
            raise UsageError(
                f"session.store: {scheme.group(0)!r} is not a store this sessionmem knows; use a path "
                "(sessions.json, or *.sqlite for SQLite), sqlite:///<absolute path>, or a postgresql:// URL"
            )
        return StoreSpec("sqlite", keys.store_path(state_dir, agent_id, text[len("sqlite://") :]))
    if _CONNINFO.match(text):
        raise UsageError(
            "session.store is a key=value connection string; write PostgreSQL as a URL: "
            "postgresql://user:password@host:port/dbname"
        )
    if text.lower() == "sqlite":
        return StoreSpec("sqlite", keys.sessions_dir(state_dir, agent_id) / "sessions.sqlite")
    path = keys.store_path(state_dir, agent_id, text or None)
    return StoreSpec("sqlite" if path.suffix.lower() in SQLITE_SUFFIXES else "sessions.json", path)


def open_session_store(spec: str | None, *, state_dir: Path, agent_id: str) -> SessionBackend:
    """The agent's session store for a ``session.store`` value (None: sessions.json in the default folder)."""
    where = parse_store_spec(spec, state_dir=state_dir, agent_id=agent_id)
    if where.kind == "postgresql":
        from sessionmem.session.stores.sessions_postgres import PostgresSessionStore

        assert where.url is not None
        return PostgresSessionStore.connect(where.url, agent_id=agent_id)
    assert where.path is not None
    if where.kind == "sqlite":
        from sessionmem.session.stores.sessions_sqlite import SqliteSessionStore

        return SqliteSessionStore(where.path, agent_id=agent_id)
    from sessionmem.session.stores.sessions_json import SessionStore

    return SessionStore(where.path, agent_id=agent_id)
