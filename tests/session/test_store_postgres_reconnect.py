"""The PostgreSQL session store after the server ends its connections between two turns (a restart, a
failover, an idle timeout), against a real server: the backends are terminated with
``pg_terminate_backend`` from a connection of the test's own, and the next turn (the turn lock, a
transcript row, the session entry) succeeds on fresh connections, with nothing of the first turn lost."""

from __future__ import annotations

import uuid
from pathlib import Path

from sessionmem.messages import Message
from tests.support.postgres import import_psycopg

psycopg = import_psycopg()  # before the store, which needs it: skips (fails in CI) without the extra

from sessionmem.session.stores.sessions_postgres import PostgresSessionStore  # noqa: E402

KEY = "agent:main:main"


def terminate(dsn: str, app: str) -> int:
    """End every backend of ``app`` (what a server restart does to them); how many there were."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (app,)
        ).fetchall()
    return len(rows)


def turn(store: PostgresSessionStore, text: str, cwd: Path) -> None:
    """What a turn stores: under the session's turn lock, a transcript row and the entry's update."""
    with store.turn_lock(KEY, timeout_s=5):
        entry = store.get(KEY) or store.patch(KEY, session_id="s1")
        store.open_transcript(KEY, entry, cwd=cwd).append_message(Message.user(text))
        store.patch(KEY, label=text)


def test_the_next_turn_succeeds_after_the_server_ends_the_connections(pg_dsn: str, tmp_path: Path) -> None:
    app = f"t18s_{uuid.uuid4().hex[:10]}"
    with PostgresSessionStore.connect(f"{pg_dsn}&application_name={app}", agent_id="main") as store:
        turn(store, "first turn", tmp_path)
        assert terminate(pg_dsn, app) >= 2  # both pools' idle connections
        turn(store, "second turn", tmp_path)
        entry = store.get(KEY)
        assert entry is not None and entry.label == "second turn"
        texts = [m.content for _, m in store.open_transcript(KEY, entry, cwd=tmp_path).context_messages()]
        assert texts == ["first turn", "second turn"]
