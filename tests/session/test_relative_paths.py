"""Relative paths are resolved once, when they are given (the runner's workspace and state folder,
``MemoryIndex.open``'s, the config's store paths), against the current folder of that moment: a new
user's ``SessionRunner(..., workspace="rel/ws", state_dir="rel/st")`` works, and a later ``chdir`` moves
nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sessionmem.config import Config, MemorySearchConfig
from sessionmem.memory.embed.embedder import EmbedderSelection
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.records import SearchRequest
from sessionmem.model.scripted import ScriptedModel, flush_aware, flush_write
from sessionmem.session.runner import SessionRunner

KEY = "agent:main:telegram:direct:42"
FTS_ONLY = EmbedderSelection(None, "none", reason="no provider in tests")


def test_a_runner_given_relative_folders_works_and_a_later_chdir_moves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    model = ScriptedModel(responder=flush_aware(flush=flush_write("- likes tea\n"), slug="tea-talk"))
    runner = SessionRunner(
        model,
        config=Config.from_dict({"agents": {"defaults": {"contextTokens": 3000}}}),
        workspace="rel/ws",
        state_dir="rel/st",
    )
    session = runner.open(KEY)
    assert session.run_turn_sync("hello").reply is not None  # failed: "is not in the sessions folder"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.chdir(elsewhere)
    for turn in range(6):  # enough to flush into today's log and compact
        session.run_turn_sync(f"Day {turn}: " + "we walked, ate and talked. " * 20)
    session.run_turn_sync("/new")

    sessions = tmp_path / "rel" / "st" / "agents" / "main" / "sessions"
    stored = json.loads((sessions / "sessions.json").read_text(encoding="utf-8"))[KEY]
    assert Path(stored["sessionFile"]).is_absolute() and Path(stored["sessionFile"]).parent == sessions
    assert list(sessions.glob("*.jsonl.reset.*"))  # the archive where the transcript was
    notes = sorted(p.name for p in (tmp_path / "rel" / "ws" / "memory").rglob("*.md"))
    assert any(name.endswith("-tea-talk.md") for name in notes) and len(notes) >= 2
    assert not (elsewhere / "rel").exists()


def test_an_index_opened_with_relative_folders_stays_where_it_was_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rel" / "ws" / "memory").mkdir(parents=True)
    (tmp_path / "rel" / "ws" / "memory" / "notes.md").write_text("- the spare key is under the blue pot\n")
    sessions = tmp_path / "rel" / "st" / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    lines = [
        {"type": "session", "version": 3, "id": "s1"},
        {"type": "message", "message": {"role": "user", "content": "the tarpaulin is blue"}},
    ]
    (sessions / "s1.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    settings = MemorySearchConfig.model_validate({"sources": ["memory", "sessions"]})
    with MemoryIndex.open(
        "main", Path("rel/ws"), settings, state_dir=Path("rel/st"), selection=FTS_ONLY, watch=False
    ) as index:
        os.chdir(tmp_path / "rel")
        index.sync()
        hits = index.search(SearchRequest("spare key")).results
        assert [h.path for h in hits] == ["memory/notes.md"]
        assert [h.path for h in index.search(SearchRequest("tarpaulin")).results] == ["sessions/s1.jsonl"]
        assert index.path == tmp_path / "rel" / "st" / "memory" / "main.sqlite"
    assert (tmp_path / "rel" / "st" / "memory" / "main.sqlite").is_file()
    assert not (tmp_path / "rel" / "rel").exists()


def test_store_paths_in_a_config_are_resolved_when_it_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = Config.from_dict(
        {
            "session": {"store": "stores/{agentId}/sessions.sqlite"},
            "agents": {"defaults": {"memorySearch": {"store": {"path": "indexes/{agentId}.sqlite"}}}},
        }
    )
    assert config.session.store == str(tmp_path / "stores" / "{agentId}" / "sessions.sqlite")
    assert config.for_agent().memory_search.store.path == str(tmp_path / "indexes" / "{agentId}.sqlite")
    os.chdir(tmp_path.parent)
    runner = SessionRunner(
        ScriptedModel(responder=flush_aware()),
        config=config,
        workspace=tmp_path / "ws",
        state_dir=tmp_path / "st",
    )
    runner.open().run_turn_sync("hello")
    assert (tmp_path / "stores" / "main" / "sessions.sqlite").is_file()
