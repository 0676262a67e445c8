"""The PostgreSQL index after the server ends its connections (a restart, a failover, an idle timeout),
against a real server: the backends are terminated with ``pg_terminate_backend`` from a connection of
the test's own, between calls and in the middle of a search and of a sync (the call waits on a table
lock the test holds, so the kill lands while it runs), and the next call, or the call itself, succeeds.
A statement's own error is never retried. No message holds the password.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sessionmem.config import MemorySearchConfig
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.records import SearchRequest
from tests.memory.stores import StoreUnderTest, pg_dsn, store_under_test
from tests.memory.support import FTS_ONLY

NOTES = 12
PASSWORD = "s3cret-pw"  # the server trusts the test user: a password given is not checked, only carried


@pytest.fixture
def named() -> Iterator[tuple[StoreUnderTest, str]]:
    """A PostgreSQL store whose connections carry an application name of their own (what the test
    terminates), with a password in its URL."""
    with store_under_test("postgresql") as store:
        assert store.path is not None
        app = f"t18_{uuid.uuid4().hex[:10]}"
        user_part, host_part = store.path.split("://", 1)[1].split("@", 1)
        url = f"postgresql://{user_part}:{PASSWORD}@{host_part}&application_name={app}"
        yield StoreUnderTest("postgresql", url), app


def admin() -> Any:
    import psycopg

    return psycopg.connect(pg_dsn(), autocommit=True)


def terminate(app: str) -> int:
    """End every backend of ``app`` (what a server restart does to them); how many there were."""
    with admin() as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (app,)
        ).fetchall()
    return len(rows)


def killed_while_waiting(app: str, schema: str, call: Callable[[], Any]) -> Any:
    """Run ``call`` in a thread while the test holds an exclusive lock on the index's ``meta`` table (every
    search and sync reads it); once a backend of ``app`` waits for that lock, end every backend of ``app``,
    then let go. Returns what ``call`` returned (raises what it raised)."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = call()
        except BaseException as exc:
            out["error"] = exc

    with admin() as conn:
        conn.execute("BEGIN")
        conn.execute(f'LOCK TABLE "{schema}".meta IN ACCESS EXCLUSIVE MODE')
        thread = threading.Thread(target=run)
        thread.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            (waiting,) = conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE application_name = %s AND wait_event_type = 'Lock'",
                (app,),
            ).fetchone()
            if waiting:
                break
            time.sleep(0.02)
        assert waiting, "the call reached the server and waits for the table"
        assert terminate(app) >= 1
        conn.execute("ROLLBACK")
    thread.join(timeout=60)
    assert not thread.is_alive()
    if "error" in out:
        raise out["error"]
    return out["value"]


def config(store: StoreUnderTest) -> MemorySearchConfig:
    base = {"sync": {"watch": False, "onSearch": False}, "chunking": {"tokens": 40, "overlap": 0}}
    return store.settings(MemorySearchConfig.model_validate(base))


def fill(workspace: Path) -> None:
    for i in range(NOTES):
        (workspace / "memory" / f"n{i:02d}.md").write_text(f"- everynote marker, topic{i} details.\n")


def found(index: MemoryIndex, query: str = "everynote marker") -> int:
    return len(index.search(SearchRequest(query, max_results=50, min_score=0.0)).results)


def test_searches_syncs_and_status_go_on_after_the_server_ends_the_connections(
    workspace: Path, tmp_path: Path, named: tuple[StoreUnderTest, str], caplog: pytest.LogCaptureFixture
) -> None:
    store, app = named
    schema = f"{store.path}".split("schema=")[1].split("&")[0]
    fill(workspace)
    with (
        caplog.at_level(logging.DEBUG),
        MemoryIndex.open(
            "main", workspace, config(store), state_dir=tmp_path, selection=FTS_ONLY, watch=False
        ) as index,
    ):
        index.sync()
        assert found(index) == NOTES

        assert terminate(app) >= 2  # between calls: the writer's and the reader's connections
        assert index.status().issues == ()
        assert found(index) == NOTES
        assert terminate(app) >= 2
        assert found(index) == NOTES
        (workspace / "memory" / "late.md").write_text("- everynote marker, a late note about quokkas\n")
        assert terminate(app) >= 2
        assert index.sync().files_unchanged == NOTES
        assert found(index, "quokkas") == 1

        # in the middle of a search, then of a sync
        assert killed_while_waiting(app, schema, lambda: found(index)) == NOTES + 1
        (workspace / "memory" / "later.md").write_text("- a later note about wombats\n")
        report = killed_while_waiting(app, schema, index.sync)
        assert report.files_unchanged == NOTES + 1
        assert found(index, "wombats") == 1
        assert index.status().issues == () and index.status().files == NOTES + 2
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "reconnect" in said
    assert PASSWORD not in said


def test_a_statement_error_is_not_retried(named: tuple[StoreUnderTest, str]) -> None:
    """An error of the statement itself (here: no such table; a statement timeout, which psycopg files
    under OperationalError too) is raised as it is and leaves the connection as it was; only the loss of
    the connection is recovered from."""
    import psycopg

    from sessionmem.dsn import pg_target
    from sessionmem.memory.store.index_postgres import PgStore

    store, app = named
    assert store.path is not None
    pg = PgStore.connect(pg_target(store.path, "main"), "unicode61", create=True)
    try:
        before = pg.conn.info.backend_pid
        with pytest.raises(psycopg.errors.UndefinedTable) as raised:
            pg.execute("SELECT * FROM no_such_table")
        assert pg.recover(raised.value) is False
        pg.execute("SET statement_timeout = 20")  # cancelled by the server: OperationalError's class,
        with pytest.raises(psycopg.errors.QueryCanceled) as cancelled:  # but the connection lives on
            pg.execute("SELECT pg_sleep(5)")
        pg.execute("RESET statement_timeout")
        assert isinstance(cancelled.value, psycopg.OperationalError)
        assert pg.recover(cancelled.value) is False
        assert pg.conn.info.backend_pid == before
        terminate(app)
        with pytest.raises(psycopg.OperationalError) as lost:
            pg.execute("SELECT 1")
        assert pg.recover(lost.value) is True
        assert pg.execute("SELECT 1").fetchone() == (1,)
        assert pg.conn.info.backend_pid != before
    finally:
        pg.close()


def test_the_index_connections_plan_searches_without_parallel_workers_or_jit(
    named: tuple[StoreUnderTest, str],
) -> None:
    """A search ranks a few hundred chunks: starting parallel workers (which a planner without statistics
    chose for it) cost more than the statement. Every connection of the index, a reconnected one too, says
    so in its settings."""
    import psycopg

    from sessionmem.dsn import pg_target
    from sessionmem.memory.store.index_postgres import PgStore

    store, app = named
    assert store.path is not None
    pg = PgStore.connect(pg_target(store.path, "main"), "unicode61", create=True)

    def settings() -> tuple[str, str]:
        return (
            pg.execute("SHOW max_parallel_workers_per_gather").fetchone()[0],
            pg.execute("SHOW jit").fetchone()[0],
        )

    try:
        assert settings() == ("0", "off")
        terminate(app)
        with pytest.raises(psycopg.OperationalError) as lost:
            pg.execute("SELECT 1")
        assert pg.recover(lost.value) is True
        assert settings() == ("0", "off")
    finally:
        pg.close()
