"""``session.store``: where sessions.json lives (``~`` and ``{agentId}`` expanded, as OpenClaw does), and
the transcripts with it: new sessions, ``/new`` archives and the rebuild of a corrupt store all use the
store's folder, not ``<state>/agents/<agentId>/sessions``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessionmem.config import Config, merge
from sessionmem.memory.sync.transcript_names import FolderShelf
from sessionmem.model.scripted import ScriptedModel, flush_aware
from sessionmem.session.stores.sessions_json import SessionStore
from tests.scenarios.harness import make_runner, small_config

KEY = "agent:ops:main"


def config_with_store(store: str) -> Config:
    return merge(small_config(), {"session": {"store": store}})


def test_store_path_expands_home_and_agent_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    store = SessionStore.for_agent(tmp_path / "state", "ops", "~/chats/{agentId}/sessions.json")
    assert store.path == tmp_path / "home" / "chats" / "ops" / "sessions.json"
    assert store.sessions_dir == tmp_path / "home" / "chats" / "ops"
    assert store.agent_id == "ops"
    assert store.transcript_path("abc") == tmp_path / "home" / "chats" / "ops" / "abc.jsonl"
    # Unset: the default place under the state folder.
    default = SessionStore.for_agent(tmp_path / "state", "ops")
    assert default.path == tmp_path / "state" / "agents" / "ops" / "sessions" / "sessions.json"


def test_configured_store_holds_sessions_transcripts_archives_and_rebuilds(
    tmp_path: Path, workspace: Path
) -> None:
    custom = tmp_path / "custom"
    config = config_with_store(str(custom / "{agentId}" / "sessions.json"))
    model = ScriptedModel(responder=flush_aware(lambda request: "Noted."))
    runner, _ = make_runner(model, tmp_path, workspace, config, agent_id="ops")
    folder = custom / "ops"
    assert runner.store.path == folder / "sessions.json"

    session = runner.open(KEY)
    session.run_turn_sync("the spare anchor is in locker B")
    first = session.transcript.path
    assert first.parent == folder and first.is_file()
    stored = json.loads((folder / "sessions.json").read_text(encoding="utf-8"))
    assert stored[KEY]["sessionFile"] == str(first)

    session.run_turn_sync("/new")  # the archive and the next transcript stay in the store's folder
    assert len(list(folder.glob("*.jsonl.reset.*"))) == 1
    second = session.transcript.path
    assert second.parent == folder and second != first
    session.run_turn_sync("the tarpaulin is blue")
    assert not (tmp_path / "state" / "agents").exists()  # nothing went to the default place

    (folder / "sessions.json").write_text("{not json", encoding="utf-8")
    rebuilt = SessionStore.for_agent(tmp_path / "state", "ops", config.session.store)
    entry = rebuilt.get(KEY)
    assert rebuilt.recovered
    assert entry is not None and entry.session_file == str(second)
    assert list(folder.glob("sessions.json.corrupt-*"))

    reopened, _ = make_runner(model, tmp_path, workspace, config, agent_id="ops")
    again = reopened.open(KEY)
    assert again.transcript.path == second
    assert any("tarpaulin" in message.content for _, message in again.context)


def test_runner_warns_when_the_index_reads_transcripts_elsewhere(
    tmp_path: Path, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Index:  # the one attribute the runner looks at: where the index reads transcripts
        transcripts = FolderShelf(tmp_path / "state" / "agents" / "ops" / "sessions")

    config = merge(
        config_with_store(str(tmp_path / "custom" / "{agentId}" / "sessions.json")),
        {"agents": {"defaults": {"memorySearch": {"sources": ["memory", "sessions"]}}}},
    )
    with caplog.at_level("WARNING", logger="sessionmem.session.runner"):
        runner, _ = make_runner(
            ScriptedModel(), tmp_path, workspace, config, agent_id="ops", memory_index=Index()
        )
    assert "transcripts=transcript_shelf(runner.store)" in caplog.text
    caplog.clear()
    assert runner.store.sessions_dir is not None
    Index.transcripts = FolderShelf(runner.store.sessions_dir)
    with caplog.at_level("WARNING", logger="sessionmem.session.runner"):
        make_runner(ScriptedModel(), tmp_path, workspace, config, agent_id="ops", memory_index=Index())
    assert caplog.text == ""
