"""session.store picks the backend: unset or a path -> sessions.json (unchanged), *.sqlite / *.sqlite3 /
*.db / sqlite:///path / sqlite -> SQLite, postgresql:// -> PostgreSQL (a key=value conninfo and unknown
schemes are clear errors); the runner, the CLI and the memory index's transcript folder all follow it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessionmem.context import GlobalOptions, resolve
from sessionmem.errors import UsageError
from sessionmem.model.scripted import ScriptedModel, flush_aware
from sessionmem.session.runner import SessionRunner
from sessionmem.session.stores.opening import open_session_store, parse_store_spec
from sessionmem.session.stores.sessions_json import SessionStore
from sessionmem.session.stores.sessions_sqlite import SqliteSessionStore
from tests.scenarios.harness import small_config
from tests.support.stores import with_store


def opened(spec: str | None, state: Path, agent_id: str = "main") -> tuple[str, Path]:
    store = open_session_store(spec, state_dir=state, agent_id=agent_id)
    assert isinstance(store, (SessionStore, SqliteSessionStore))
    return type(store).__name__, store.path


def test_unset_and_json_paths_keep_sessions_json(tmp_path: Path) -> None:
    default = tmp_path / "agents" / "main" / "sessions" / "sessions.json"
    assert opened(None, tmp_path) == ("SessionStore", default)
    assert opened("", tmp_path) == ("SessionStore", default)
    assert opened(str(tmp_path / "x" / "sessions.json"), tmp_path) == (
        "SessionStore",
        tmp_path / "x" / "sessions.json",
    )
    assert opened(str(tmp_path / "x" / "store"), tmp_path) == ("SessionStore", tmp_path / "x" / "store")


@pytest.mark.parametrize("name", ["sessions.sqlite", "s.SQLITE3", "agent.db"])
def test_sqlite_file_names_pick_sqlite(tmp_path: Path, name: str) -> None:
    assert opened(str(tmp_path / "x" / name), tmp_path) == ("SqliteSessionStore", tmp_path / "x" / name)


def test_sqlite_urls_and_the_bare_word(tmp_path: Path) -> None:
    assert opened(f"sqlite://{tmp_path}/u/s.sqlite", tmp_path) == (
        "SqliteSessionStore",
        tmp_path / "u" / "s.sqlite",
    )
    assert opened(f"sqlite://{tmp_path}/u/plain", tmp_path) == (
        "SqliteSessionStore",
        tmp_path / "u" / "plain",
    )
    default = tmp_path / "agents" / "work" / "sessions" / "sessions.sqlite"
    assert opened("sqlite", tmp_path, "work") == ("SqliteSessionStore", default)


def test_home_and_agent_id_are_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    expected = tmp_path / "home" / "gw" / "work" / "sessions.sqlite"
    assert opened("~/gw/{agentId}/sessions.sqlite", tmp_path, "work") == ("SqliteSessionStore", expected)
    assert opened("sqlite://" + str(tmp_path / "{agentId}.db"), tmp_path, "work")[1] == tmp_path / "work.db"


def test_a_postgresql_url_picks_postgresql(tmp_path: Path, pg_dsn: str) -> None:
    from sessionmem.session.stores.sessions_postgres import PostgresSessionStore

    assert isinstance(open_session_store(pg_dsn, state_dir=tmp_path, agent_id="main"), PostgresSessionStore)
    assert not list(tmp_path.iterdir())  # nothing on disk
    secret = parse_store_spec(
        "postgresql://gw:s3cret@db.internal:6543/sessions?sslmode=require",
        state_dir=tmp_path,
        agent_id="main",
    )
    assert secret.shown == "postgresql://gw@db.internal:6543/sessions"  # what messages show: no password


def test_a_conninfo_string_and_unknown_schemes_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="key=value connection string; write PostgreSQL as a URL"):
        open_session_store("host=127.0.0.1 dbname=test", state_dir=tmp_path, agent_id="main")
    with pytest.raises(UsageError, match="'mysql://' is not a store this sessionmem knows") as caught:
        open_session_store("mysql://u:s3cret@h/db", state_dir=tmp_path, agent_id="main")
    assert "s3cret" not in str(caught.value)  # a mistyped scheme's password is not echoed
    with pytest.raises(UsageError, match="not a store"):
        open_session_store("sqlite://relative.sqlite", state_dir=tmp_path, agent_id="main")
    assert not list(tmp_path.iterdir())  # nothing was created


def test_the_runner_and_the_cli_follow_a_sqlite_store(tmp_path: Path, workspace: Path) -> None:
    spec = str(tmp_path / "db" / "{agentId}" / "sessions.sqlite")
    runner = SessionRunner(
        ScriptedModel(responder=flush_aware(lambda request: "ok")),
        config=with_store(small_config(), spec),
        workspace=workspace,
        state_dir=tmp_path / "state",
    )
    runner.open("agent:main:main").run_turn_sync("hello")
    assert isinstance(runner.store, SqliteSessionStore)
    assert runner.store.path == tmp_path / "db" / "main" / "sessions.sqlite"
    entry = runner.store.get("agent:main:main")
    assert entry is not None and Path(entry.session_file or "").parent == tmp_path / "db" / "main"
    assert not (tmp_path / "state" / "agents" / "main" / "sessions" / "sessions.json").exists()

    config = tmp_path / "config.json"
    config.write_text(json.dumps({"session": {"store": spec}}))
    app = resolve(GlobalOptions(config=str(config), state_dir=str(tmp_path / "state")))
    assert app.sessions_dir == tmp_path / "db" / "main"  # the memory index reads the transcripts there
