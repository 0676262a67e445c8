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
from click.testing import CliRunner
from freezegun import freeze_time

from sessionmem.cli import cli
from sessionmem.config import Config, merge
from sessionmem.memory.index import MemoryIndex
from sessionmem.messages import ToolCall
from sessionmem.model.base import ModelRequest
from sessionmem.model.scripted import NO_REPLY, ScriptedModel, default_summary
from sessionmem.privacy import chat_folder
from sessionmem.session.runner import SessionRunner
from sessionmem.session.turn.events import Event, FlushEvent
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
        self.events: list[Event] = []
        state = tmp_path / "state"
        self.runner = SessionRunner(
            self.model,
            config=self.config,
            workspace=self.workspace,
            state_dir=state,
            on_event=self.events.append,
        )
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


# Ids that are not plain ASCII, or hold "/", "~", "\\" or capitals, in channels that keep ids as written.
UNUSUAL_PEOPLE = [
    "agent:main:telegram:direct:josé",
    "agent:main:matrix:direct:a/b",
    "agent:main:matrix:direct:~tilde",
    "agent:main:matrix:direct:back\\slash",
    "agent:main:matrix:direct:Alice",
]


@freeze_time("2026-11-10 12:00:00", real_asyncio=True)
@pytest.mark.parametrize("key", UNUSUAL_PEOPLE)
def test_a_person_with_any_id_writes_and_finds_their_own_notes(people: People, key: str) -> None:
    ws, home = people.workspace, chat_folder(key)
    # The write tools write into the person's folder...
    outcome = people.tools(
        key,
        ("memory_write", {"path": "MEMORY.md", "content": "- prefers quince jam"}),
        ("memory_append_daily", {"text": "- quince harvest on Saturday"}),
    )
    assert outcome == [f"Appended content to {home}/MEMORY.md.", f"Appended content to {home}/2026-11-10.md."]
    # ... the flush too, and reports no error ...
    people.runner.open(key).run_turn_sync("I like quince, remember that")
    people.runner.open(key).run_turn_sync("/compact")
    (flush,) = [
        e for e in people.events if isinstance(e, FlushEvent) and e.session_key == people.runner.open(key).key
    ]
    assert flush.error is None and flush.path == f"{home}/2026-11-10.md"
    assert "flushed: prefers metric units" in (ws / home / "2026-11-10.md").read_text()
    # ... and /new saves the conversation there.
    people.runner.open(key).run_turn_sync("my quince locker code is 4417")
    people.runner.open(key).run_turn_sync("/new")
    (saved,) = [p for p in (ws / home).glob("*.md") if "4417" in p.read_text()]
    new_file = saved.relative_to(ws).as_posix()
    people.index.sync()

    # The person reads all of it back: in the prompt, by memory_get and by search.
    assert "prefers quince jam" in people.prompt(key)
    got_memory, got_log, got_new, search, search_new = people.tools(
        key,
        ("memory_get", {"path": f"{home}/MEMORY.md"}),
        ("memory_get", {"path": f"{home}/2026-11-10.md"}),
        ("memory_get", {"path": new_file}),
        ("memory_search", {"query": "quince", "maxResults": 20}),
        ("memory_search", {"query": "conversation summary locker", "maxResults": 20}),
    )
    assert "prefers quince jam" in json.loads(got_memory)["text"]
    assert "quince harvest" in json.loads(got_log)["text"]
    assert "4417" in json.loads(got_new)["text"]
    assert {f"{home}/MEMORY.md", f"{home}/2026-11-10.md"} <= set(result_paths(search))
    assert new_file in result_paths(search_new)

    # Nobody else does.
    assert "quince" not in people.prompt(BEN)
    ben = people.tools(
        BEN,
        ("memory_search", {"query": "quince", "maxResults": 20}),
        ("memory_get", {"path": f"{home}/MEMORY.md"}),
        ("memory_get", {"path": new_file}),
    )
    assert result_paths(ben[0]) == []
    assert all("not visible from" in json.loads(answer)["error"] for answer in ben[1:])


ALICE = "agent:main:matrix:direct:alice"
KATE = "agent:main:telegram:direct:kate"


@freeze_time("2026-11-10 12:00:00", real_asyncio=True)
@pytest.mark.parametrize(
    ("owner", "other"),
    [
        (ALICE, f"{ALICE}:thread:evil"),
        (ALICE, f"{ALICE}:topic:1"),
        (ALICE, "agent:main:matrix:direct:ALICE"),
        (ALICE, "agent:main:matrix:direct:Alice"),
        (KATE, "agent:main:telegram:direct:\u212aate"),  # the Kelvin sign, which str.lower() makes "k"
    ],
)
def test_people_with_look_alike_keys_never_read_each_others_notes(
    people: People, owner: str, other: str
) -> None:
    home = chat_folder(owner)
    people.tools(
        owner,
        ("memory_write", {"path": "MEMORY.md", "content": "- my pin is 5521 quokka"}),
        ("memory_append_daily", {"text": "- quokka appointment on Friday"}),
    )
    people.runner.open(owner).run_turn_sync("the quokka vet is on Elm street")
    people.index.sync()

    prompt = people.prompt(other)
    assert "5521" not in prompt and "quokka" not in prompt
    search, get_memory, get_log, get_transcript = people.tools(
        other,
        ("memory_search", {"query": "quokka", "maxResults": 20}),
        ("memory_get", {"path": f"{home}/MEMORY.md"}),
        ("memory_get", {"path": f"{home}/2026-11-10.md"}),
        ("memory_get", {"path": people.transcript(owner)}),
    )
    assert [p for p in result_paths(search) if p != "memory/shared.md"] == []
    for refused in (get_memory, get_log, get_transcript):
        assert "not visible from" in json.loads(refused)["error"]
    # Their own notes go to their own folder, never into the other's.
    (written,) = people.tools(other, ("memory_append_daily", {"text": "- the look-alike's note"}))
    assert (
        f"{home}/" not in written
        and "look-alike" not in (people.workspace / home / "2026-11-10.md").read_text()
    )
    assert people.runner.open(other).key != people.runner.open(owner).key
    # So do its flush and its /new file.
    people.runner.open(other).run_turn_sync("the look-alike's locker is 9090")
    people.runner.open(other).run_turn_sync("/compact")
    people.runner.open(other).run_turn_sync("/new")
    theirs = [p.read_text() for p in (people.workspace / chat_folder(other)).iterdir()]
    alices = [p.read_text() for p in (people.workspace / home).iterdir()]
    assert any("9090" in text for text in theirs) and any("flushed" in text for text in theirs)
    assert not any("9090" in text or "flushed" in text for text in alices)


@freeze_time("2026-11-10 12:00:00", real_asyncio=True)
def test_a_flush_that_cannot_write_its_note_says_so_and_does_not_count(
    people: People, tmp_path: Path
) -> None:
    # The person's daily log is a symlink out of the workspace: the write is refused as unsafe.
    elsewhere = tmp_path / "elsewhere.md"
    elsewhere.write_text("")
    target = people.workspace / ANA_HOME / "2026-11-10.md"
    target.parent.mkdir(parents=True)
    target.symlink_to(elsewhere)
    people.runner.open(ANA).run_turn_sync("hello")
    people.runner.open(ANA).run_turn_sync("I like metric units, remember that")
    people.runner.open(ANA).run_turn_sync("/compact")
    (flush,) = [e for e in people.events if isinstance(e, FlushEvent)]
    assert (
        flush.error is not None and "not saved" in flush.error and f"{ANA_HOME}/2026-11-10.md" in flush.error
    )
    assert elsewhere.read_text() == ""
    entry = people.runner.store.get(ANA)
    assert entry is not None and entry.memory_flush_compaction_count is None  # the cycle is not flushed


def test_the_command_line_reads_every_persons_notes_as_the_owner(people: People, tmp_path: Path) -> None:
    jose = "agent:main:telegram:direct:josé"
    people.tools(jose, ("memory_write", {"path": "MEMORY.md", "content": "- josé prefers quince jam"}))
    path = f"{chat_folder(jose)}/MEMORY.md"
    assert path == "memory/peers/telegram~direct~jos%c3%a9/MEMORY.md"
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {"memory": {"scope": "peer"}, "agents": {"defaults": {"memorySearch": {"provider": "none"}}}}
        )
    )
    args = [
        "--config",
        str(config),
        "--state-dir",
        str(tmp_path / "state"),
        "--workspace",
        str(people.workspace),
    ]
    cli_runner = CliRunner()
    found = cli_runner.invoke(cli, [*args, "memory", "search", "quince jam", "--json"])
    assert found.exit_code == 0, found.output
    assert path in {r["path"] for r in json.loads(found.output)["results"]}
    got = cli_runner.invoke(cli, [*args, "memory", "get", path])
    assert got.exit_code == 0 and "josé prefers quince jam" in got.output
