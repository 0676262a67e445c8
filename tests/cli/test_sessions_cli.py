"""`sessionmem sessions export/import`: every session entry and transcript moved between backends,
entries equal field by field and transcripts byte for byte (files -> SQLite -> files, files -> PostgreSQL
-> files); a target that
holds sessions refused unless --force; a copy onto itself refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sessionmem.cli import cli
from sessionmem.model.scripted import ScriptedModel, flush_aware
from sessionmem.session.runner import SessionRunner
from sessionmem.session.stores.opening import open_session_store
from tests.scenarios.harness import small_config

KEYS = ["agent:main:main", "agent:main:discord:group:42", "agent:main:telegram:direct:ann"]


@pytest.fixture
def state(tmp_path: Path, workspace: Path) -> Path:
    """A sessions.json store with three conversations, one of them long enough to flush and compact."""
    state = tmp_path / "state"
    runner = SessionRunner(
        ScriptedModel(responder=flush_aware(lambda request: "ok 中文 ✓")),
        config=small_config(soft=2000),
        workspace=workspace,
        state_dir=state,
    )
    for i in range(6):
        runner.open(KEYS[0]).run_turn_sync(f"t{i}:" + " word" * 1200)
    for key in KEYS[1:]:
        runner.open(key).run_turn_sync(f"hello from {key} — é")
    entry = runner.store.get(KEYS[0])
    # one compaction, flushed first; after the last reply the next cycle's flush ran too (replies first:
    # a message like the last would make it due)
    assert entry is not None and (entry.compaction_count, entry.memory_flush_compaction_count) == (1, 1)
    return state


def config_with_store(tmp_path: Path, name: str, spec: str) -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"session": {"store": spec}}))
    return path


def snapshot(spec: str | None, state: Path) -> dict[str, tuple[dict[str, object], str, bytes]]:
    """Each session: its entry (sessionFile without its folder), the transcript's name and bytes."""
    store = open_session_store(spec, state_dir=state, agent_id="main")
    out = {}
    for key, entry in store.all().items():
        fields = entry.to_json_dict()
        file = Path(fields.pop("sessionFile"))
        assert file.parent == store.sessions_dir  # each store names its own files
        out[key] = (fields, file.name, file.read_bytes())
    return out


def test_files_to_sqlite_to_files_is_identical(state: Path, tmp_path: Path) -> None:
    cli_runner = CliRunner()
    sqlite_spec = str(tmp_path / "db" / "sessions.sqlite")
    copy_spec = str(tmp_path / "copy" / "sessions.json")
    first = cli_runner.invoke(cli, ["--state-dir", str(state), "sessions", "export", "--to", sqlite_spec])
    assert first.exit_code == 0, first.output
    assert "Copied 3 session(s)" in first.output

    from_sqlite = config_with_store(tmp_path, "sqlite", sqlite_spec)
    args = ["--state-dir", str(state), "--config", str(from_sqlite), "sessions", "export", "--to", copy_spec]
    second = cli_runner.invoke(cli, [*args, "--json"])
    assert second.exit_code == 0, second.output
    assert json.loads(second.output)["sessions"] == 3

    original = snapshot(None, state)
    assert set(original) == set(KEYS)
    assert snapshot(sqlite_spec, state) == original
    assert snapshot(copy_spec, state) == original


def test_files_to_postgresql_to_files_is_identical(state: Path, tmp_path: Path, pg_dsn: str) -> None:
    """The move a growing gateway makes: its sessions.json and transcripts into PostgreSQL, and back."""
    cli_runner = CliRunner()
    copy_spec = str(tmp_path / "copy" / "sessions.json")
    first = cli_runner.invoke(cli, ["--state-dir", str(state), "sessions", "export", "--to", pg_dsn])
    assert first.exit_code == 0, first.output
    assert "Copied 3 session(s)" in first.output
    assert "to postgresql://postgres@127.0.0.1:5432/test\n" in first.output  # no password, no options

    pg = open_session_store(pg_dsn, state_dir=state, agent_id="main")
    assert set(pg.all()) == set(KEYS) and all(e.session_file is None for e in pg.all().values())
    long = pg.get(KEYS[0])
    assert long is not None and (long.compaction_count, long.memory_flush_compaction_count) == (1, 1)

    from_pg = config_with_store(tmp_path, "pg", pg_dsn)
    args = ["--state-dir", str(state), "--config", str(from_pg), "sessions", "export", "--to", copy_spec]
    second = cli_runner.invoke(cli, args)
    assert second.exit_code == 0, second.output
    assert snapshot(copy_spec, state) == snapshot(None, state)


def test_import_refuses_a_target_with_sessions_unless_forced(state: Path, tmp_path: Path) -> None:
    cli_runner = CliRunner()
    target = str(tmp_path / "db" / "sessions.sqlite")
    into = ["--state-dir", str(state), "--config", str(config_with_store(tmp_path, "t", target)), "sessions"]
    source = str(state / "agents" / "main" / "sessions" / "sessions.json")
    assert cli_runner.invoke(cli, [*into, "import", "--from", source]).exit_code == 0

    store = open_session_store(target, state_dir=state, agent_id="main")
    store.patch(KEYS[0], compaction_count=99)  # the target moved on
    store.patch("agent:main:only-here", session_id="only-here")
    refused = cli_runner.invoke(cli, [*into, "import", "--from", source])
    assert refused.exit_code == 1
    assert "already holds 4 session(s); refusing to overwrite them (use --force" in refused.output
    assert store.get(KEYS[0]).compaction_count == 99  # type: ignore[union-attr]

    forced = cli_runner.invoke(cli, [*into, "import", "--from", source, "--force"])
    assert forced.exit_code == 0, forced.output
    assert store.get(KEYS[0]).compaction_count == 1  # type: ignore[union-attr]
    assert "agent:main:only-here" in store.all()  # keys the source does not have are kept


def test_a_copy_onto_the_same_store_is_refused(state: Path) -> None:
    source = str(state / "agents" / "main" / "sessions" / "sessions.json")
    result = CliRunner().invoke(cli, ["--state-dir", str(state), "sessions", "export", "--to", source])
    assert result.exit_code == 1 and "the source and the target are the same store" in result.output


def test_moving_to_sqlite_in_the_same_folder_keeps_the_transcripts_in_place(state: Path) -> None:
    folder = state / "agents" / "main" / "sessions"
    before = {p.name: (p.stat().st_ino, p.read_bytes()) for p in folder.glob("*.jsonl")}
    result = CliRunner().invoke(cli, ["--state-dir", str(state), "sessions", "export", "--to", "sqlite"])
    assert result.exit_code == 0, result.output
    assert {p.name: (p.stat().st_ino, p.read_bytes()) for p in folder.glob("*.jsonl")} == before
    assert snapshot("sqlite", state) == snapshot(None, state)


def test_memory_commands_search_and_read_conversations_kept_in_postgresql(
    tmp_path: Path, workspace: Path, pg_dsn: str
) -> None:
    """The memory index reads the transcripts from the database, as the runner writes them: after
    `memory index`, `memory search` finds what was said, and `memory get` reads the hit's lines."""
    config = tmp_path / "pg.json"
    search = {"provider": "none", "sources": ["memory", "sessions"], "query": {"minScore": 0.0}}
    config.write_text(
        json.dumps({"session": {"store": pg_dsn}, "agents": {"defaults": {"memorySearch": search}}})
    )
    state = tmp_path / "state"
    store = open_session_store(pg_dsn, state_dir=state, agent_id="main")
    try:
        runner = SessionRunner(
            ScriptedModel(responder=flush_aware(lambda request: "noted")),
            config=small_config(),
            workspace=workspace,
            state_dir=state,
            store=store,
        )
        runner.open(KEYS[0]).run_turn_sync("the spare key hangs behind the barometer")
        runner.close()
        entry = store.get(KEYS[0])
        assert entry is not None
    finally:
        store.close()  # type: ignore[attr-defined]
    args = ["--config", str(config), "--state-dir", str(state), "--workspace", str(workspace)]
    indexed = CliRunner().invoke(cli, [*args, "memory", "index"])
    assert indexed.exit_code == 0, indexed.output
    found = CliRunner().invoke(cli, [*args, "memory", "search", "spare key barometer", "--json"])
    assert found.exit_code == 0, found.output
    hits = [r for r in json.loads(found.output)["results"] if r["path"].startswith("sessions/")]
    assert hits and hits[0]["path"] == f"sessions/{entry.session_id}.jsonl"
    hit = hits[0]
    got = CliRunner().invoke(cli, [*args, "memory", "get", hit["path"], "--from", str(hit["startLine"])])
    assert got.exit_code == 0, got.output
    assert "User: the spare key hangs behind the barometer" in got.output
    missing = CliRunner().invoke(cli, [*args, "memory", "get", "sessions/nobody.jsonl"])
    assert missing.exit_code != 0 and "no such session transcript" in missing.output
    assert not (state / "agents").exists()  # nothing went to a sessions folder
