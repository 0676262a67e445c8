"""Fixtures shared by the memory tests (helpers that are not fixtures live in ``support.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.memory.stores import STORES, StoreUnderTest, store_under_test


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """The state directory (sessions, index files) of one test."""
    return tmp_path / "state"


@pytest.fixture(params=STORES)
def index_store(request: pytest.FixtureRequest) -> Iterator[StoreUnderTest]:
    """Each index store in turn (``stores.py``): SQLite, then PostgreSQL in a schema of its own."""
    with store_under_test(request.param) as store:
        yield store
