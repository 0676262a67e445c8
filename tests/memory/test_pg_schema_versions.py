"""A sessionmem of another index schema version never drops a PostgreSQL index that other hosts read.

Host B opens the index with this sessionmem (schema version 1) and searches. Host A runs a sessionmem
of another version (``SCHEMA_VERSION`` patched to 2, as an upgrade rolled out one host at a time would
be): it refuses to open, naming both versions, and B keeps its whole index, also after the server ended
B's connections (B says again that it has the index open). Once no host of version 1 has it open, A
replaces the tables and rebuilds; and then a host left at version 1 is refused in turn.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sessionmem.config import MemorySearchConfig
from sessionmem.errors import MemoryIndexError
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.records import SearchRequest
from sessionmem.memory.store import index_postgres
from tests.memory.stores import StoreUnderTest, pg_dsn, rows, store_under_test
from tests.memory.support import FTS_ONLY

NOTES = 30


@pytest.fixture
def pg() -> Iterator[tuple[StoreUnderTest, str]]:
    """The index's store, its connections named (to end them as a server restart would)."""
    with store_under_test("postgresql") as store:
        assert store.path is not None
        app = f"t18v_{uuid.uuid4().hex[:10]}"
        yield StoreUnderTest("postgresql", f"{store.path}&application_name={app}"), app


def open_host(workspace: Path, state: Path, store: StoreUnderTest) -> MemoryIndex:
    base = {"sync": {"watch": False, "onSearch": False}, "chunking": {"tokens": 40, "overlap": 0}}
    settings = store.settings(MemorySearchConfig.model_validate(base))
    return MemoryIndex.open("main", workspace, settings, state_dir=state, selection=FTS_ONLY, watch=False)


def found(index: MemoryIndex) -> list[str]:
    return sorted(r.path for r in index.search(SearchRequest("everynote marker", max_results=NOTES)).results)


def terminate(app: str) -> None:
    import psycopg

    with psycopg.connect(pg_dsn(), autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (app,)
        )


def test_another_version_is_refused_while_a_host_reads_and_rebuilds_once_none_does(
    workspace: Path, tmp_path: Path, pg: tuple[StoreUnderTest, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, app = pg
    for i in range(NOTES):
        (workspace / "memory" / f"n{i:02d}.md").write_text(f"- everynote marker, topic{i} details.\n")
    with open_host(workspace, tmp_path / "b", store) as reader:
        reader.sync()
        expected = found(reader)
        assert len(expected) == NOTES

        with monkeypatch.context() as patch:
            patch.setattr(index_postgres, "SCHEMA_VERSION", 2)
            refused = (
                r"this index was built by schema version 1; this sessionmem uses schema version 2, and 1 "
                r"process of schema version 1 .* upgrade \(or stop\) the hosts of schema version 1"
            )
            with pytest.raises(MemoryIndexError, match=refused):
                open_host(workspace, tmp_path / "a", store)
        assert found(reader) == expected  # nothing dropped under the reader
        assert rows(reader, "SELECT value FROM meta WHERE key = 'schema_version'") == [("1",)]

        terminate(app)  # the server ends B's connections; B reconnects and holds the index again
        assert found(reader) == expected
        with monkeypatch.context() as patch:
            patch.setattr(index_postgres, "SCHEMA_VERSION", 2)
            with pytest.raises(MemoryIndexError, match="built by schema version 1"):
                open_host(workspace, tmp_path / "a", store)
        assert found(reader) == expected

    # No host of version 1 has it open any more: version 2 replaces the tables and rebuilds.
    with monkeypatch.context() as patch:
        patch.setattr(index_postgres, "SCHEMA_VERSION", 2)
        with open_host(workspace, tmp_path / "a", store) as upgraded:
            assert any("schema version 1 differs from 2" in issue for issue in upgraded.status().issues)
            upgraded.sync()
            assert found(upgraded) == expected
            assert rows(upgraded, "SELECT value FROM meta WHERE key = 'schema_version'") == [("2",)]
            # A host left at version 1 now finds a newer index in use: refused, the index left whole.
            patch.setattr(index_postgres, "SCHEMA_VERSION", 1)
            with pytest.raises(
                MemoryIndexError, match="built by schema version 2; this sessionmem uses schema version 1"
            ):
                open_host(workspace, tmp_path / "b", store)
            patch.setattr(index_postgres, "SCHEMA_VERSION", 2)
            assert found(upgraded) == expected
