"""The PostgreSQL session store (sessionmem.session.stores.sessions_postgres), against a real server: entries
created, updated atomically from several connections, deleted and read again by a new store; transcript
rows in order whoever appends them, archived without being lost; the advisory turn lock (timeout, a killed
holder, a cancelled wait); clear errors for a bad DSN, an unreachable server, a newer schema, a bad row;
and a whole conversation on it through the runner: flushes, compactions, /status, /new with the
session-memory hook reading the ending transcript from the database.

Each test runs in a schema of its own (the ``pg_dsn`` fixture, tests/support/postgres.py)."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sessionmem.config import MemorySearchConfig, merge
from sessionmem.errors import ConfigError, SessionError, TurnLockTimeout
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.records import SearchRequest
from sessionmem.messages import Message
from sessionmem.model.scripted import ScriptedModel, flush_aware
from sessionmem.session.stores.backend import SessionBackend, TranscriptLog, VersionedTranscript
from sessionmem.session.stores.entry import SessionEntry
from tests.scenarios.harness import make_runner, small_config
from tests.session.test_backend import waits_then_gets_it
from tests.support.postgres import import_psycopg

psycopg = import_psycopg()  # before the store, which needs it: skips (fails in CI) without the extra

from sessionmem.session.stores.sessions_postgres import PostgresSessionStore  # noqa: E402

KEY = "agent:main:main"


@pytest.fixture
def store(pg_dsn: str) -> Iterator[PostgresSessionStore]:
    with PostgresSessionStore.connect(pg_dsn, agent_id="main") as opened:
        yield opened


def rows(dsn: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """What a user would see with psql."""
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, args).fetchall()


# --- entries -------------------------------------------------------------------------------------------


def test_entries_are_created_updated_deleted_and_read_by_a_new_store(
    store: PostgresSessionStore, pg_dsn: str
) -> None:
    assert isinstance(store, SessionBackend)
    assert store.sessions_dir is None and store.new_session_file("s1") is None
    assert store.get(KEY) is None and KEY not in store
    created = store.patch("Agent:Main:Main", session_id="s1", compaction_count=2)  # keys are normalised
    assert created.session_id == "s1" and KEY in store
    assert store.update(KEY, lambda current: None) == created  # None: nothing changes
    store.patch(KEY, memory_flush_compaction_count=2)

    with PostgresSessionStore.connect(pg_dsn, agent_id="main") as reopened:  # another host, or a restart
        entry = reopened.get(KEY)
        assert entry is not None
        assert (entry.session_id, entry.compaction_count, entry.memory_flush_compaction_count) == ("s1", 2, 2)
        assert list(reopened.all()) == [KEY]
    with PostgresSessionStore.connect(pg_dsn, agent_id="other") as other_agent:
        assert other_agent.get(KEY) is None and other_agent.all() == {}  # agents do not see each other's

    stored = rows(pg_dsn, "SELECT agent_id, key, entry->>'sessionId', updated_at FROM sessionmem_sessions")
    assert stored == [("main", KEY, "s1", store.get(KEY).updated_at)]  # type: ignore[union-attr]
    assert store.delete(KEY) is not None and store.get(KEY) is None and store.delete(KEY) is None


def test_updates_from_many_threads_and_two_stores_lose_none(store: PostgresSessionStore, pg_dsn: str) -> None:
    store.patch(KEY, session_id="s1")
    with PostgresSessionStore.connect(pg_dsn, agent_id="main") as second:

        def bump(backend: PostgresSessionStore) -> None:
            for _ in range(25):
                backend.update(
                    KEY, lambda e: e.touched(compaction_count=e.compaction_count + 1) if e else None
                )

        threads = [threading.Thread(target=bump, args=(b,)) for b in (store, second) * 4]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    entry = store.get(KEY)
    assert entry is not None and entry.compaction_count == 200  # every read-modify-write counted once


def test_a_new_key_created_by_several_stores_at_once_gets_one_session(
    store: PostgresSessionStore, pg_dsn: str
) -> None:
    stores = [store] + [PostgresSessionStore.connect(pg_dsn, agent_id="main") for _ in range(3)]
    barrier = threading.Barrier(len(stores))
    results: list[SessionEntry | None] = [None] * len(stores)

    def create(i: int) -> None:
        fresh = SessionEntry(session_id=f"s{i}")
        barrier.wait()
        results[i] = stores[i].update(KEY, lambda current: current or fresh)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for extra in stores[1:]:
        extra.close()
    winners = {entry.session_id for entry in results if entry is not None}
    assert len(winners) == 1  # whoever came second adopted the first one's session
    assert winners == {store.get(KEY).session_id}  # type: ignore[union-attr]


def test_a_row_that_is_not_an_entry_is_an_error_naming_it(store: PostgresSessionStore, pg_dsn: str) -> None:
    store.patch(KEY, session_id="s1")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("""UPDATE sessionmem_sessions SET entry = '{"sessionId": 7}'""")
    with pytest.raises(SessionError, match=f"{KEY}.*invalid \\(sessionId: .*string.*sessionmem_sessions"):
        store.get(KEY)


# --- transcripts --------------------------------------------------------------------------------------


def test_transcript_rows_keep_the_order_written_by_two_hosts_and_survive_archiving(
    store: PostgresSessionStore, pg_dsn: str, tmp_path: Path
) -> None:
    entry = store.patch(KEY, session_id="s1")
    with PostgresSessionStore.connect(pg_dsn, agent_id="main") as other_host:
        mine = store.open_transcript(KEY, entry, cwd=tmp_path)
        theirs = other_host.open_transcript(KEY, entry, cwd=tmp_path)  # the same header, not a second one
        assert isinstance(mine, TranscriptLog) and isinstance(mine, VersionedTranscript)
        assert mine.path is None
        assert mine.version() == 0
        ids = []
        for i in range(6):
            writer = mine if i % 2 == 0 else theirs
            writer.entries()  # the runner reads again when the version changed (another host appended)
            ids.append(writer.append_message(Message.user(f"message {i}")))
            assert mine.version() == theirs.version() > 0
        first_kept = ids[4]
        mine.entries()
        ids.append(mine.append_compaction("the summary", first_kept, tokens_before=900))
        theirs.entries()
        after = theirs.append_message(Message.user("after the compaction"))

        entries = other_host.open_transcript(KEY, entry, cwd=tmp_path).entries()
        assert [e.id for e in entries] == [*ids, after]
        assert [e.parent_id for e in entries] == [None, *ids]  # one chain, whichever host appended
        context = [m.content for _, m in theirs.context_messages()]
        assert "the summary" in context[0] and context[1:] == [
            "message 4",
            "message 5",
            "after the compaction",
        ]
        (last_line,) = rows(
            pg_dsn, "SELECT bytes FROM sessionmem_transcript_entries ORDER BY id DESC LIMIT 1"
        )
        assert mine.bytes_since_compaction() == last_line[0]  # what a file would have grown by
        assert rows(pg_dsn, "SELECT count(*) FROM sessionmem_transcripts") == [(1,)]

    when = datetime(2026, 3, 1, 10, 0, 5, tzinfo=UTC)
    assert store.archive_transcript(mine, when) is None  # no file was made
    assert store.archived_at("s1") == when
    assert len(store.open_transcript(KEY, entry, cwd=tmp_path).entries()) == 8  # archived, not lost
    kinds = rows(pg_dsn, "SELECT kind FROM sessionmem_transcript_entries WHERE session_id = 's1' ORDER BY id")
    assert [k for (k,) in kinds] == ["message"] * 6 + ["compaction", "message"]


# --- the turn lock --------------------------------------------------------------------------------------


def _hold_turn_lock(dsn: str, ready: Any, release: Any) -> None:
    with PostgresSessionStore.connect(dsn, agent_id="main") as own, own.turn_lock(KEY, timeout_s=5):
        ready.set()
        release.wait(60)


def start_holder(dsn: str) -> tuple[Any, Any]:
    """Another host: a process holding the turn lock of KEY until ``release`` is set."""
    ctx = multiprocessing.get_context("spawn")  # a process of its own, as on another machine
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_turn_lock, args=(dsn, ready, release))
    holder.start()
    assert ready.wait(30)
    return holder, release


async def take(store: PostgresSessionStore, key: str, timeout_s: float) -> None:
    async with store.turn_lock(key, timeout_s=timeout_s):
        pass


def test_the_turn_lock_waits_for_another_host_then_says_the_session_is_busy(
    store: PostgresSessionStore, pg_dsn: str
) -> None:
    holder, release = start_holder(pg_dsn)
    try:
        with pytest.raises(TurnLockTimeout) as caught:
            asyncio.run(take(store, KEY, 0.5))
        assert caught.value.session_key == KEY and "busy" in str(caught.value)
        assert "pg_advisory_lock" in str(caught.value)
        asyncio.run(take(store, "agent:main:other", 0.5))  # another key is not held up
        waits_then_gets_it(lambda: take(store, KEY, 30), release)
    finally:
        release.set()
        holder.join(20)
    asyncio.run(take(store, KEY, 2))


def test_a_killed_host_frees_the_turn_lock_at_once(store: PostgresSessionStore, pg_dsn: str) -> None:
    holder, _ = start_holder(pg_dsn)
    with pytest.raises(TurnLockTimeout), store.turn_lock(KEY, timeout_s=0.2):
        pass
    assert holder.pid is not None
    os.kill(holder.pid, signal.SIGKILL)
    holder.join(10)
    with store.turn_lock(KEY, timeout_s=5):  # the server ended the dead host's session and its lock
        pass


def test_a_cancelled_wait_leaves_no_lock_behind(store: PostgresSessionStore) -> None:
    async def scenario() -> None:
        held = store.turn_lock(KEY, timeout_s=1)
        await held.__aenter__()
        waiting = asyncio.create_task(take(store, KEY, 30))
        await asyncio.sleep(0.3)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await held.__aexit__(None, None, None)
        await take(store, KEY, 1)  # free: the cancelled waiter did not keep it

    asyncio.run(scenario())


# --- errors at connect ------------------------------------------------------------------------------------


def test_an_unreachable_server_or_a_bad_dsn_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"127\.0\.0\.1:1/test"):
        PostgresSessionStore.connect("postgresql://postgres@127.0.0.1:1/test", connect_timeout_s=1)
    with pytest.raises(ConfigError, match="not a valid PostgreSQL URL: it must start with postgresql://"):
        PostgresSessionStore.connect("host=localhost port=5432 nonsense")


def test_a_schema_newer_than_this_code_is_refused(store: PostgresSessionStore, pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("UPDATE sessionmem_schema SET version = 99 WHERE component = 'sessions'")
    with pytest.raises(ConfigError, match=r"version 99.*upgrade sessionmem"):
        PostgresSessionStore.connect(pg_dsn)


def test_connecting_twice_creates_the_tables_once(store: PostgresSessionStore, pg_dsn: str) -> None:
    PostgresSessionStore.connect(pg_dsn).close()
    assert rows(pg_dsn, "SELECT component, version FROM sessionmem_schema") == [("sessions", 1)]


# --- a whole conversation through the runner ---------------------------------------------------------


def test_a_conversation_on_postgresql_flushes_compacts_and_saves_its_memory_on_new(
    store: PostgresSessionStore, pg_dsn: str, tmp_path: Path, workspace: Path
) -> None:
    model = ScriptedModel(responder=flush_aware(lambda r: "ok " + " ".join(f"w{i}" for i in range(40))))
    config = small_config(window=3000, reserve=500, floor=500, soft=800, keep=400)
    config = merge(config, {"hooks": {"internal": {"entries": {"session-memory": {"llmSlug": False}}}}})
    runner, recorder = make_runner(model, tmp_path, workspace, config, store=store)
    session = runner.open(KEY)
    first_id = session.entry.session_id
    session.run_turn_sync("remember the lighthouse keeper's name is Ada")
    for i in range(20):
        session.run_turn_sync(f"turn {i}: " + " ".join(f"w{j}" for j in range(60)))

    kinds = recorder.kinds("flush", "compaction")
    assert kinds.count("compaction") >= 2
    flush_cycles = recorder.flush_cycles()  # once per cycle, each compaction after its cycle's flush
    entry = store.get(KEY)
    assert entry is not None and entry.compaction_count == kinds.count("compaction")
    assert entry.memory_flush_compaction_count == max(flush_cycles)
    compactions = rows(
        pg_dsn,
        "SELECT count(*) FROM sessionmem_transcript_entries WHERE session_id = %s AND kind = 'compaction'",
        first_id,
    )
    assert compactions == [(entry.compaction_count,)]

    # Another host (a new runner on its own connections) opens the session as it is.
    with PostgresSessionStore.connect(pg_dsn, agent_id="main") as other:
        again, _ = make_runner(model, tmp_path, workspace, config, store=other)
        assert [m.content for _, m in again.open(KEY).state.context] == [
            m.content for _, m in session.state.context
        ]

    status = session.run_turn_sync("/status").reply or ""
    assert f"Compactions: {entry.compaction_count}" in status
    assert session.run_turn_sync("/new").command == "new"
    assert store.archived_at(first_id) is not None
    assert session.entry.session_id != first_id and session.entry.compaction_count == 0
    saved = sorted((workspace / "memory").rglob("*.md"))
    notes = [p for p in saved if "Session Key" in p.read_text(encoding="utf-8")]
    assert len(notes) == 1  # the session-memory hook read the ending session from the database
    assert "turn 19:" in notes[0].read_text(encoding="utf-8")
    assert not (tmp_path / "state" / "agents").exists()  # nothing went to a sessions folder


def test_indexing_sessions_with_a_database_store_reads_the_stores_rows_and_warns_of_an_index_elsewhere(
    store: PostgresSessionStore, tmp_path: Path, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The ``sessions`` source works with transcripts in the database (no ConfigError any more): an index
    opened on the store's shelf is taken as it is; one opened on a sessions folder, where this runner
    writes nothing, is warned about (it would never find the runner's conversations)."""
    model = ScriptedModel(responder=flush_aware(lambda r: "ok"))
    settings = MemorySearchConfig(provider="none", sources=("memory", "sessions"))
    config = merge(
        small_config(), {"agents": {"defaults": {"memorySearch": settings.model_dump(by_alias=True)}}}
    )
    for shelf, warned in ((None, True), (store.transcript_shelf(), False)):
        caplog.clear()
        with (
            MemoryIndex.open(
                "main", workspace, settings, state_dir=tmp_path / "state", watch=False, transcripts=shelf
            ) as index,
            caplog.at_level("WARNING"),
        ):
            runner, _ = make_runner(model, tmp_path, workspace, config, store=store, memory_index=index)
            runner.open(KEY).run_turn_sync("hello")
            assert ("reads transcripts from" in caplog.text) is warned
            index.sync()
            found = index.search(SearchRequest(query="hello"))
            sessions = [r.path for r in found.results if r.source == "sessions"]
            assert bool(sessions) is not warned  # the folder holds nothing; the shelf holds the turn


class OvertakenStore(PostgresSessionStore):
    """A host whose first entry update comes after another host ran ``overtake`` (a turn with a
    compaction): the moment a restarted host's open() reads the transcript, then reconciles."""

    overtake: Any = None

    def update(self, key: str, fn: Any) -> SessionEntry | None:
        run, self.overtake = self.overtake, None
        if run is not None:
            run()
        return super().update(key, fn)


def test_a_host_opening_while_the_other_compacts_never_sets_the_counts_back(
    pg_dsn: str, tmp_path: Path, workspace: Path
) -> None:
    from tests.support.crash_loop import loop_config, respond, turn_text

    def runner(store: PostgresSessionStore) -> Any:
        return make_runner(ScriptedModel(responder=respond), tmp_path, workspace, loop_config(), store=store)[
            0
        ]

    with PostgresSessionStore.connect(pg_dsn, agent_id="main") as first:
        busy = runner(first).open(KEY)
        for n in range(8):
            busy.run_turn_sync(turn_text("A", n))
        before = first.get(KEY)
        assert before is not None and before.compaction_count >= 1

        def compact_meanwhile() -> None:
            n = 8
            while first.get(KEY).compaction_count == before.compaction_count:  # type: ignore[union-attr]
                busy.run_turn_sync(turn_text("A", n))
                n += 1

        with OvertakenStore.connect(pg_dsn, agent_id="main") as second:
            second.overtake = compact_meanwhile
            runner(second).open(KEY)  # reads the transcript, the other host compacts, then it reconciles
            assert second.overtake is None  # the race happened
        after = first.get(KEY)
        compactions = rows(
            pg_dsn, "SELECT count(*) FROM sessionmem_transcript_entries WHERE kind = 'compaction'"
        )
        assert after is not None and after.compaction_count == compactions[0][0] > before.compaction_count
        assert after.memory_flush_compaction_count is not None  # the flush record not dropped either
        assert after.memory_flush_compaction_count >= before.compaction_count
