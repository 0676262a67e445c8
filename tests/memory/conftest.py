"""Fixtures shared by the memory tests (helpers that are not fixtures live in ``support.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import IN_CI
from tests.memory.stores import PG_DSN_VAR, StoreUnderTest, pg_dsn, pg_problem, pg_schema


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """The state directory (sessions, index files) of one test."""
    return tmp_path / "state"


@pytest.fixture(params=["sqlite", "postgresql"])
def index_store(request: pytest.FixtureRequest) -> Iterator[StoreUnderTest]:
    """Each index store in turn (``stores.py``): SQLite, then PostgreSQL in a schema of its own."""
    if request.param == "sqlite":
        yield StoreUnderTest("sqlite")
        return
    problem = pg_problem()
    if problem is not None:
        if IN_CI:
            pytest.fail(f"PostgreSQL tests must run in CI: {problem}")
        pytest.skip(f"{problem}; set {PG_DSN_VAR} to a server to run them")
    with pg_schema() as schema:
        yield StoreUnderTest("postgresql", f"{pg_dsn()}?schema={schema}")
