"""The store backends every store behaviour test runs against: one list, one fixture.

Adding a backend to the contract suite (``tests/session/test_store_contract.py``), the crash loop and the
store benchmark's tests is one entry in :data:`BACKENDS` (and, when its storage is damaged differently,
one branch in :func:`corrupt`). ``store_spec`` gives the ``session.store`` value of a fresh, empty store
(for PostgreSQL a scratch schema of the test server, ``tests.support.postgres``); ``file_store_spec`` the
same for the backends whose transcripts are files (rebuilt from them when damaged, confined to a folder).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from sessionmem.config import Config, merge
from sessionmem.session.stores.backend import SessionBackend
from sessionmem.session.stores.opening import open_session_store

BACKENDS = ["sessions.json", "sqlite", "postgresql"]  # session.store's forms that tests run against
FILE_BACKENDS = ["sessions.json", "sqlite"]  # those keeping transcripts as files in a sessions folder


def spec_for(backend: str, folder: Path) -> str:
    """The ``session.store`` of an empty file store of ``backend`` whose files go in ``folder``."""
    if backend == "sessions.json":
        return str(folder / "sessions.json")
    if backend == "sqlite":
        return str(folder / "sessions.sqlite")
    raise ValueError(f"no store spec for backend {backend!r}")


def _fresh_spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgresql":  # a scratch schema of the test server, dropped after the test
        return str(request.getfixturevalue("pg_dsn"))
    return spec_for(request.param, tmp_path / "state" / "agents" / "main" / "sessions")


@pytest.fixture(params=BACKENDS)
def store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """``session.store`` of a fresh store, once per backend."""
    return _fresh_spec(request, tmp_path)


@pytest.fixture(params=FILE_BACKENDS)
def file_store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """``session.store`` of a fresh store, once per backend that keeps transcripts in files."""
    return _fresh_spec(request, tmp_path)


def open_store(spec: str, state_dir: Path) -> SessionBackend:
    """A new store object on ``spec`` (as a new process would open it)."""
    return open_session_store(spec, state_dir=state_dir, agent_id="main")


def with_store(config: Config, spec: str) -> Config:
    """``config`` with ``session.store`` set to ``spec``."""
    return merge(config, {"session": {"store": spec}})


def corrupt(store: Any) -> Path:
    """Damage the store's storage the way a crash or a bad disk would; returns the damaged file."""
    path = Path(store.path)
    if path.suffix == ".sqlite":
        close = getattr(store, "close", None)
        if callable(close):
            close()
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        data = bytearray(path.read_bytes())
        data[:100] = b"this is no longer a database header" + b"\0" * 65  # SQLite: not a database
        path.write_bytes(bytes(data))
        return path
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])  # torn half-way, as a write that never finished
    return path
