"""memory.scope "peer": a memory per person. Two people talking to one agent never see each other's notes.

Every way in is tried from the other person's session: the prompt, memory_search, memory_get, memory_read,
the write tools, the flush and the /new hook; shared notes stay shared, and the owner's MEMORY.md stays the
owner's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from freezegun import freeze_time

from sessionmem.config import Config, merge
from sessionmem.memory.index import MemoryIndex
from sessionmem.messages import ToolCall
from sessionmem.model.base import ModelRequest
from sessionmem.model.scripted import NO_REPLY, ScriptedModel, default_summary
from sessionmem.session.runner import SessionRunner
from tests.memory.support import FTS_ONLY
from tests.scenarios.harness import result_paths, tool_results, transcript_hit_path

ANA = "agent:main:telegram:direct:42"
BEN = "agent:main:telegram:direct:43"
GROUP = "agent:main:discord:group:7"
ANA_HOME = "memory/peers/telegram~direct~42"
BEN_HOME = "memory/peers/telegram~direct~43"


def flush_note(request: ModelRequest) -> Any:
    """Flush turns append one note about whoever is talking; other turns say ok."""
    if request.purpose == "compaction":
        return default_summary(request)
    if request.purpose != "flush":
        return "ok"
    if any(m.role == "tool" for m in request.messages[-3:]):
        return NO_REPLY
    return ToolCall("flush-1", "memory_append_daily", {"text": "- flushed: prefers metric units"})


class People:
    def __init__(self, tmp_path: Path) -> None:
        self.workspace = tmp_path / "workspace"
        (self.workspace / "memory").mkdir(parents=True)
        (self.workspace / "MEMORY.md").write_text("- the owner's own note: quokka\n")
        (self.workspace / "memory" / "shared.md").write_text("- opening hours: 9 to 5, metric units\n")
        self.config = merge(
            Config(),
            {
                "memory": {"scope": "peer"},
                "agents": {
                    "defaults": {
                        "contextTokens": 100_000,
                        "userTimezone": "UTC",
                        "compaction": {"keepRecentTokens": 20},
                        "memorySearch": {"sources": ["memory", "sessions"]},
                    }
                },
                "hooks": {"internal": {"entries": {"session-memory": {"llmSlug": False}}}},
            },
        )
        self.model = ScriptedModel(responder=flush_note)
        state = tmp_path / "state"
        self.runner = SessionRunner(self.model, config=self.config, workspace=self.workspace, state_dir=state)
        self.index = MemoryIndex.open(
            "main",
            self.workspace,
            self.config.for_agent("main").memory_search,
            state_dir=state,
            selection=FTS_ONLY,
            watch=False,
            sessions_dir=self.runner.store.sessions_dir,
        )
        self.runner.memory_index = self.index

    def tools(self, key: str, *calls: tuple[str, dict[str, Any]]) -> list[str]:
        return tool_results(self.runner, key, *calls)

    def prompt(self, key: str) -> str:
        self.runner.open(key).run_turn_sync("hi")
        return str(self.model.calls[-1].messages[0].content)

    def transcript(self, key: str) -> str:
        return transcript_hit_path(self.runner, key)


@pytest.fixture
def people(tmp_path: Path) -> Iterator[People]:
    p = People(tmp_path)
    yield p
    p.index.close()


@freeze_time("2026-11-10 12:00:00", real_asyncio=True)
def test_two_people_never_see_each_others_notes(people: People) -> None:
    ws = people.workspace
    # Ana writes through every write tool; her notes land in her own folder.
    outcome = people.tools(
        ANA,
        ("memory_write", {"path": "MEMORY.md", "content": "- Ana prefers metric units"}),
        ("memory_append_daily", {"text": "- Ana's metric recipe uses 200 g of flour"}),
    )
    assert outcome == [
        f"Appended content to {ANA_HOME}/MEMORY.md.",
        f"Appended content to {ANA_HOME}/2026-11-10.md.",
    ]
    assert (ws / ANA_HOME / "MEMORY.md").read_text() == "- Ana prefers metric units"
    assert (ws / "MEMORY.md").read_text() == "- the owner's own note: quokka\n"
    # Her flush writes to her folder too, and the flush prompt names it.
    people.runner.open(ANA).run_turn_sync("I like metric units, remember that")
    people.runner.open(ANA).run_turn_sync("/compact")
    flush_prompts = [c for c in people.model.calls if c.purpose == "flush"]
    assert flush_prompts and f"{ANA_HOME}/2026-11-10.md" in flush_prompts[0].messages[-1].content
    assert "flushed: prefers metric units" in (ws / ANA_HOME / "2026-11-10.md").read_text()
    assert not (ws / "memory" / "2026-11-10.md").exists()
    people.index.sync()

    # Ben sees none of it: not in his prompt, not by search, not by memory_get.
    ben_prompt = people.prompt(BEN)
    assert "metric" not in ben_prompt and "quokka" not in ben_prompt
    search, get_file, get_log, get_transcript, get_owner = people.tools(
        BEN,
        ("memory_search", {"query": "metric units", "maxResults": 20}),
        ("memory_get", {"path": f"{ANA_HOME}/MEMORY.md"}),
        ("memory_get", {"path": f"{ANA_HOME}/2026-11-10.md"}),
        ("memory_get", {"path": people.transcript(ANA)}),
        ("memory_get", {"path": "MEMORY.md"}),
    )
    assert result_paths(search) == ["memory/shared.md"]
    for refused in (get_file, get_log, get_transcript, get_owner):
        assert "not visible from" in json.loads(refused)["error"]
    # Ben cannot write into Ana's folder either.
    (write,) = people.tools(BEN, ("memory_write", {"path": f"{ANA_HOME}/MEMORY.md", "content": "x"}))
    assert (
        "only writes" in write and (ws / ANA_HOME / "MEMORY.md").read_text() == "- Ana prefers metric units"
    )

    # Ana finds her own notes and transcript, and the shared ones; her prompt holds her MEMORY.md.
    assert "Ana prefers metric units" in people.prompt(ANA)
    (ana_search,) = people.tools(ANA, ("memory_search", {"query": "metric units", "maxResults": 20}))
    assert {f"{ANA_HOME}/MEMORY.md", f"{ANA_HOME}/2026-11-10.md", "memory/shared.md"} <= set(
        result_paths(ana_search)
    )
    assert not any(path.startswith(BEN_HOME) for path in result_paths(ana_search))


def test_the_new_hook_saves_a_persons_conversation_where_only_they_find_it(people: People) -> None:
    people.runner.open(ANA).run_turn_sync("my locker code is 4417")
    people.runner.open(ANA).run_turn_sync("/new")
    (saved,) = [p for p in (people.workspace / ANA_HOME).glob("*.md") if "4417" in p.read_text()]
    people.index.sync()
    rel = saved.relative_to(people.workspace).as_posix()
    search, get = people.tools(
        BEN, ("memory_search", {"query": "locker code 4417"}), ("memory_get", {"path": rel})
    )
    assert result_paths(search) == [] and "not visible from" in json.loads(get)["error"]
    (mine,) = people.tools(ANA, ("memory_get", {"path": rel}))
    assert "locker code is 4417" in json.loads(mine)["text"]


def test_the_main_session_keeps_the_owners_memory_and_sees_no_one_elses(people: People) -> None:
    people.tools(ANA, ("memory_append_daily", {"text": "- Ana: quokka allergy"}))
    people.index.sync()
    assert "the owner's own note: quokka" in people.prompt("agent:main:main")
    (search,) = people.tools("agent:main:main", ("memory_search", {"query": "quokka", "maxResults": 20}))
    assert "MEMORY.md" in result_paths(search)
    assert not any(path.startswith("memory/peers/telegram") for path in result_paths(search))
    (daily,) = people.tools("agent:main:main", ("memory_append_daily", {"text": "- owner's daily note"}))
    assert daily.startswith("Appended content to memory/peers/main/")


def test_a_group_writes_and_reads_only_its_own_folder(tmp_path: Path) -> None:
    p = People(tmp_path)
    p.config = merge(p.config, {"agents": {"defaults": {"memoryTools": True}}})
    p.runner = SessionRunner(p.model, config=p.config, workspace=p.workspace, state_dir=tmp_path / "state")
    p.runner.memory_index = p.index
    try:
        (written,) = p.tools(GROUP, ("memory_append_daily", {"text": "- the group meets on Tuesdays"}))
        assert written.startswith("Appended content to memory/peers/discord~group~7/")
        p.index.sync()
        (search,) = p.tools(ANA, ("memory_search", {"query": "group meets Tuesdays"}))
        assert result_paths(search) == []
    finally:
        p.index.close()
