"""Several gateway hosts on one PostgreSQL index: real processes, a real server (``stores.py``).

One process syncs (forced rebuilds, and a note deleted and written again) while another searches the
same schema: every answer is a whole index, never a half-built or half-deleted one. Two syncers at once
take turns on the advisory lock and leave the index exact. Status says where the index is, without the
password.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sessionmem.cli import cli
from sessionmem.config import MemorySearchConfig
from sessionmem.dsn import pg_target
from sessionmem.errors import ConfigError
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.records import SearchRequest
from tests.memory.stores import StoreUnderTest, keyword_rows, pg_dsn, rows, store_under_test
from tests.memory.support import FTS_ONLY

NOTES = 40
PARTS_OF_X = 6  # the note that comes and goes: several chunks


@pytest.fixture
def pg() -> Iterator[StoreUnderTest]:
    with store_under_test("postgresql") as store:
        yield store


def config(store: StoreUnderTest, **values: Any) -> MemorySearchConfig:
    base = {"sync": {"watch": False, "onSearch": False}, "chunking": {"tokens": 40, "overlap": 0}, **values}
    return store.settings(MemorySearchConfig.model_validate(base))


def fill(workspace: Path) -> None:
    for i in range(NOTES):
        (workspace / "memory" / f"n{i:02d}.md").write_text(f"- everynote marker, topic{i} details.\n")


def note_x() -> str:
    return "\n\n".join(f"# Part {p}\n\n" + " ".join(["xylophone"] * 30) for p in range(PARTS_OF_X))


def _syncer(workspace: str, state: str, dsn: str, rounds: int, toggle: bool) -> None:
    store = StoreUnderTest("postgresql", dsn)
    x = Path(workspace) / "memory" / "x.md"
    with MemoryIndex.open(
        "main", Path(workspace), config(store), state_dir=Path(state), selection=FTS_ONLY, watch=False
    ) as index:
        for i in range(rounds):
            if toggle and i % 2:
                x.unlink(missing_ok=True)
                index.sync()
                x.write_text(note_x())
                index.sync()
            else:
                index.sync(force=True)


def _searcher(workspace: str, state: str, dsn: str, seconds: float, out: Any) -> None:
    store = StoreUnderTest("postgresql", dsn)
    seen: list[tuple[int, int]] = []
    with MemoryIndex.open(
        "main", Path(workspace), config(store), state_dir=Path(state), selection=FTS_ONLY, watch=False
    ) as index:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            every = index.search(SearchRequest("everynote marker", max_results=NOTES, min_score=0.0))
            xs = index.search(SearchRequest("xylophone", max_results=20, min_score=0.0))
            seen.append((len(every.results), sum(r.path == "memory/x.md" for r in xs.results)))
    out.put(seen)


def test_one_host_syncs_while_another_searches_whole_indexes_only(
    workspace: Path, tmp_path: Path, pg: StoreUnderTest
) -> None:
    fill(workspace)
    (workspace / "memory" / "x.md").write_text(note_x())
    assert pg.path is not None
    with MemoryIndex.open(
        "main", workspace, config(pg), state_dir=tmp_path / "a", selection=FTS_ONLY, watch=False
    ) as index:
        index.sync()
        xs = index.search(SearchRequest("xylophone", max_results=20, min_score=0.0)).results
        x_hits = sum(r.path == "memory/x.md" for r in xs)  # what a search finds of the whole note
    assert 1 < x_hits < 20
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    writer = ctx.Process(target=_syncer, args=(str(workspace), str(tmp_path / "a"), pg.path, 12, True))
    reader = ctx.Process(target=_searcher, args=(str(workspace), str(tmp_path / "b"), pg.path, 6.0, out))
    writer.start()
    reader.start()
    seen = out.get(timeout=120)
    for p in (writer, reader):
        p.join(timeout=120)
    assert [writer.exitcode, reader.exitcode] == [0, 0]
    assert len(seen) > 20, "the searcher ran while the writer synced"
    # Every answer holds all the notes, and the note that comes and goes whole or not at all.
    assert {every for every, _ in seen} == {NOTES}
    assert {x for _, x in seen} <= {0, x_hits}


def test_two_syncers_at_once_take_turns_and_leave_the_index_exact(
    workspace: Path, tmp_path: Path, pg: StoreUnderTest
) -> None:
    fill(workspace)
    (workspace / "memory" / "x.md").write_text(note_x())
    assert pg.path is not None
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_syncer, args=(str(workspace), str(tmp_path / name), pg.path, 6, toggle))
        for name, toggle in (("a", True), ("b", False))
    ]
    for p in procs:
        p.start()
    with MemoryIndex.open(  # this process syncs at the same time too
        "main", workspace, config(pg), state_dir=tmp_path / "c", selection=FTS_ONLY, watch=False
    ) as index:
        for _ in range(6):
            index.sync(force=True)
        for p in procs:
            p.join(timeout=120)
        assert [p.exitcode for p in procs] == [0, 0]
        (workspace / "memory" / "x.md").write_text(note_x())
        index.sync()
        assert rows(index, "SELECT COUNT(*) FROM files") == [(NOTES + 1,)]
        (x_chunks,) = rows(index, "SELECT COUNT(*) FROM chunks WHERE path = 'memory/x.md'")[0]
        assert x_chunks > 1
        total = NOTES + x_chunks  # one chunk per small note
        assert rows(index, "SELECT COUNT(*), COUNT(DISTINCT id) FROM chunks") == [(total, total)]
        assert keyword_rows(index, "memory/x.md") == x_chunks
        orphans = "SELECT COUNT(*) FROM chunks WHERE path NOT IN (SELECT path FROM files)"
        assert rows(index, orphans) == [(0,)]
        assert index.sync().files_unchanged == NOTES + 1


def test_a_second_syncer_says_it_waits_and_searches_never_wait(
    workspace: Path, tmp_path: Path, pg: StoreUnderTest, caplog: pytest.LogCaptureFixture
) -> None:
    fill(workspace)
    with (
        MemoryIndex.open(
            "main", workspace, config(pg), state_dir=tmp_path / "a", selection=FTS_ONLY, watch=False
        ) as holder,
        MemoryIndex.open(
            "main", workspace, config(pg), state_dir=tmp_path / "b", selection=FTS_ONLY, watch=False
        ) as other,
    ):
        holder.sync()
        (workspace / "memory" / "late.md").write_text("- a late note about quokkas\n")
        done = threading.Event()
        with caplog.at_level(logging.INFO, logger="sessionmem.memory.store.index_postgres"):
            with holder.sync_lock():  # another host is syncing
                thread = threading.Thread(target=lambda: (other.sync(), done.set()))
                thread.start()
                time.sleep(0.5)
                assert not done.is_set(), "the second syncer waits for the lock"
                assert (
                    len(other.search(SearchRequest("everynote marker", max_results=NOTES)).results) == NOTES
                )
            thread.join(timeout=30)
        assert done.is_set()
        assert [r.path for r in other.search(SearchRequest("quokkas")).results] == ["memory/late.md"]
    assert any("another host or process is syncing" in r.getMessage() for r in caplog.records)


def test_status_names_the_store_without_the_password(workspace: Path, tmp_path: Path) -> None:
    with store_under_test("postgresql") as store:
        assert store.path is not None
        target = pg_target(store.path, "main")
        user_part, host_part = pg_dsn().split("://", 1)[1].split("@", 1)
        with_password = f"postgresql://{user_part}:s3cret@{host_part}?schema={target.schema}"
        fill(workspace)
        settings = StoreUnderTest("postgresql", with_password).settings(MemorySearchConfig())
        with MemoryIndex.open("main", workspace, settings, state_dir=tmp_path, selection=FTS_ONLY) as index:
            index.sync()
            status = index.status()
    assert status.store_kind == "postgresql"
    assert status.store_path == f"postgresql://{user_part}@{host_part} schema {target.schema}"
    assert "s3cret" not in status.store_path
    assert status.files == NOTES and status.fts_available


def test_agent_id_in_the_dsn_gives_each_agent_its_own_schema(workspace: Path, tmp_path: Path) -> None:
    with store_under_test("postgresql") as store:
        assert store.path is not None
        base = pg_target(store.path, "x").schema
        dsn = f"{pg_dsn()}?schema={base}_{{agentId}}"
        fill(workspace)
        found = {}
        for agent in ("main", "ops"):
            settings = StoreUnderTest("postgresql", dsn).settings(MemorySearchConfig())
            with MemoryIndex.open(
                agent, workspace, settings, state_dir=tmp_path, selection=FTS_ONLY
            ) as index:
                index.sync()
                found[agent] = index.status().store_path
        import psycopg

        with psycopg.connect(pg_dsn(), autocommit=True) as conn:
            for agent in found:
                conn.execute(f'DROP SCHEMA IF EXISTS "{base}_{agent}" CASCADE')
    assert found["main"].endswith(f"schema {base}_main") and found["ops"].endswith(f"schema {base}_ops")


def test_the_cli_status_says_which_store_and_where(
    workspace: Path, tmp_path: Path, pg: StoreUnderTest
) -> None:
    assert pg.path is not None
    user_part, host_part = pg.path.split("://", 1)[1].split("@", 1)
    with_password = f"postgresql://{user_part}:s3cret@{host_part}"
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {"agents": {"defaults": {"memorySearch": {"provider": "none", "store": {"path": with_password}}}}}
        )
    )
    fill(workspace)
    args = ["--config", str(config), "--state-dir", str(tmp_path / "state"), "--workspace", str(workspace)]
    runner = CliRunner()
    indexed = runner.invoke(cli, [*args, "memory", "index"])
    assert indexed.exit_code == 0, indexed.output
    human = runner.invoke(cli, [*args, "memory", "status", "--deep"])
    assert human.exit_code == 0, human.output
    schema = pg_target(pg.path, "main").schema
    assert (
        f"Store: PostgreSQL postgresql://{user_part}@{host_part.split('?')[0]} schema {schema}"
        in human.output
    )
    assert f"Indexed: {NOTES} files" in human.output
    as_json = json.loads(runner.invoke(cli, [*args, "memory", "status", "--json"]).output)
    assert as_json["storeKind"] == "postgresql" and "s3cret" not in json.dumps(as_json) + human.output


def test_a_schema_another_agent_wrote_is_refused(workspace: Path, tmp_path: Path, pg: StoreUnderTest) -> None:
    fill(workspace)
    settings = pg.settings(MemorySearchConfig())  # the schema is named outright: no {agentId} in it
    with MemoryIndex.open("main", workspace, settings, state_dir=tmp_path, selection=FTS_ONLY) as index:
        index.sync()
    with pytest.raises(ConfigError, match="belongs to agent 'main'"):
        MemoryIndex.open("ops", workspace, settings, state_dir=tmp_path, selection=FTS_ONLY)


def test_a_statement_of_another_thread_waits_for_a_searchs_snapshot_to_end(pg: StoreUnderTest) -> None:
    """A search reads in one snapshot (a transaction) on the searches' connection; a background check of
    this process (the transcripts' delta check, status) reads on that connection too. Run inside the
    search's transaction, such a statement read the search's old state, and two threads driving one
    connection at once tore its protocol (a search then hung). It now waits for the snapshot's end."""
    from sessionmem.memory.store.index_postgres import PgStore

    assert pg.path is not None
    store = PgStore.connect(pg_target(pg.path, "main"), "unicode61", create=True)
    store.apply_schema("unicode61")
    answered = threading.Event()
    seen: list[str] = []

    def check() -> None:
        seen.append(str(store.execute("SELECT current_setting('transaction_read_only')").fetchone()[0]))
        answered.set()

    try:
        with store.snapshot():
            other = threading.Thread(target=check)
            other.start()
            assert not answered.wait(0.3)  # not inside the search's transaction
        assert answered.wait(10)
        other.join(10)
        assert seen == ["off"]  # run on its own, not in the search's read-only snapshot
    finally:
        store.close()
