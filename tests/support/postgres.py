"""A real PostgreSQL server for the tests and benchmarks of the PostgreSQL session store.

The server is ``SESSIONMEM_TEST_PG_DSN`` (default ``postgresql://postgres@127.0.0.1:5432/test``). Each
test gets a scratch schema of its own (:func:`scratch_schema`: a DSN whose ``search_path`` names it),
dropped afterwards. Without a server the tests skip with a message naming the variable; with ``CI=true``
they fail instead, never skip.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

DSN_VARIABLE = "SESSIONMEM_TEST_PG_DSN"
DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def server_dsn() -> str:
    return os.environ.get(DSN_VARIABLE) or DEFAULT_DSN


def import_psycopg() -> Any:
    """psycopg, for a test module that imports it at its top; without it the module is skipped (failed
    under ``CI=true``), saying which extra to install."""
    try:
        import psycopg
    except ImportError:
        why = f"psycopg is not installed (pip install -e '.[postgres]'; server: {DSN_VARIABLE})"
        if IN_CI:
            raise
        pytest.skip(why, allow_module_level=True)
    return psycopg


def unavailable() -> str | None:
    """Why the PostgreSQL tests cannot run here (None: they can)."""
    try:
        import psycopg
        import psycopg_pool  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install -e '.[postgres]')"
    dsn = server_dsn()
    try:
        with psycopg.connect(dsn, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"no PostgreSQL server at {dsn} (set {DSN_VARIABLE} to one): {exc}".strip()
    return None


@contextlib.contextmanager
def scratch_schema(prefix: str = "sessionmem_test") -> Iterator[str]:
    """A new schema on the server, dropped on exit; yields a DSN whose ``search_path`` is that schema."""
    import psycopg

    dsn = server_dsn()
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        # A URL, as a user writes session.store (a key=value conninfo is not a store spec)
        yield f"{dsn}{'&' if '?' in dsn else '?'}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def pg_dsn() -> Iterator[str]:
    """A DSN on a scratch schema of the test server (see the module docstring)."""
    problem = unavailable()
    if problem is not None:
        if IN_CI:
            pytest.fail(f"the PostgreSQL tests must run in CI: {problem}")
        pytest.skip(problem)
    with scratch_schema() as dsn:
        yield dsn
