"""Where an agent's memory index is: a SQLite file (``store.path`` with ``{agentId}``, else
``<state_dir>/memory/<agentId>.sqlite``), or a PostgreSQL schema when ``store.path`` is a
``postgresql://`` DSN."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sessionmem.dsn import is_postgres_dsn
from sessionmem.pathnames import given_path

if TYPE_CHECKING:
    from sessionmem.config import MemorySearchConfig
    from sessionmem.dsn import PgTarget


def store_path(agent_id: str, settings: MemorySearchConfig, state_dir: Path) -> Path:
    """``store.path`` with ``{agentId}`` replaced, else ``<state_dir>/memory/<agentId>.sqlite`` (a file
    store; :func:`store_location` also knows PostgreSQL)."""
    if settings.store.path:
        return given_path(settings.store.path.replace("{agentId}", agent_id))
    return given_path(state_dir) / "memory" / f"{agent_id}.sqlite"


def sessions_folder(state_dir: Path, agent_id: str) -> Path:
    """The agent's default sessions folder, ``<state_dir>/agents/<agentId>/sessions`` (the session layer's
    ``keys.sessions_dir``, which the memory layer may not import)."""
    return given_path(state_dir) / "agents" / agent_id / "sessions"


def store_location(agent_id: str, settings: MemorySearchConfig, state_dir: Path) -> Path | PgTarget:
    """Where the agent's index is: a file (:func:`store_path`), or a PostgreSQL schema when
    ``store.path`` is a ``postgresql://`` DSN (``pg_store.pg_target``)."""
    if is_postgres_dsn(settings.store.path):
        from sessionmem.dsn import pg_target

        return pg_target(str(settings.store.path), agent_id)
    return store_path(agent_id, settings, state_dir)
