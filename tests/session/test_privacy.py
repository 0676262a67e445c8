"""Private memory stays private (DESIGN decision 14): every way in, from a group, a channel, another chat.

A real runner, a real FTS index over the Markdown and the transcripts, the bundled /new hook and the
CLI. The owner's MEMORY.md, a direct chat's transcript and what /new saved of it must not reach a group
session: not through the prompt, memory_get, memory_search, memory_read, the write tools, nor the hook's
file; the owner's command line sees everything.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sessionmem.cli import cli
from sessionmem.config import Config, merge
from sessionmem.memory.index import MemoryIndex
from sessionmem.model.scripted import ScriptedModel
from sessionmem.session.runner import SessionRunner
from tests.memory.support import FTS_ONLY
from tests.scenarios.harness import result_paths, tool_results, transcript_hit_path

OWNER_FACT = "quokka salary is 90210"  # in MEMORY.md
DM_FACT = "quokka diagnosis stays between us"  # said in a direct chat
GROUP_ONE_FACT = "quokka launch plan for group one"  # said in another group
SHARED_FACT = "the quokka office wifi is on the fridge"  # memory/notes.md, for everyone

DM = "agent:main:telegram:direct:42"
GROUP = "agent:main:discord:group:7"
OTHER_GROUP = "agent:main:discord:group:1"
CHANNEL = "agent:main:slack:channel:c01"
# A group or channel marker anywhere makes a key shared, in a thread's or topic's part too.
GROUP_THREAD_OF_A_DM = "agent:main:discord:direct:1:thread:group:5"
CHANNEL_TOPIC_OF_A_DM = "agent:main:slack:direct:u1:topic:channel"
SHARED_SHAPES = [
    GROUP,
    CHANNEL,
    "12345-678@g.us",
    "agent:main:group:123",
    "agent:main:cron:nightly",
    GROUP_THREAD_OF_A_DM,
    CHANNEL_TOPIC_OF_A_DM,
]


def config(**memory_search: Any) -> Config:
    return merge(
        Config(),
        {
            "agents": {
                "defaults": {
                    "contextTokens": 100_000,
                    "userTimezone": "UTC",
                    "memorySearch": {"sources": ["memory", "sessions"], **memory_search},
                }
            },
            "hooks": {"internal": {"entries": {"session-memory": {"llmSlug": False}}}},
        },
    )


class World:
    """A workspace with private and shared memory, a direct chat and a group chat already held."""

    def __init__(self, tmp_path: Path, cfg: Config | None = None) -> None:
        self.workspace = tmp_path / "workspace"
        (self.workspace / "memory").mkdir(parents=True)
        (self.workspace / "MEMORY.md").write_text(f"# Memory\n- {OWNER_FACT}\n")
        filler = " ".join(f"word{i}" for i in range(120))
        (self.workspace / "memory" / "notes.md").write_text(f"- {filler} {SHARED_FACT}\n")
        self.state = tmp_path / "state"
        self.config = cfg or config()
        self.model = ScriptedModel()
        self.runner = SessionRunner(
            self.model, config=self.config, workspace=self.workspace, state_dir=self.state
        )
        self.index = MemoryIndex.open(
            "main",
            self.workspace,
            self.config.for_agent("main").memory_search,
            state_dir=self.state,
            selection=FTS_ONLY,
            watch=False,
            sessions_dir=self.runner.store.sessions_dir,
        )
        self.runner.memory_index = self.index
        self.say(DM, f"remember: {DM_FACT}", "noted")
        self.say(OTHER_GROUP, f"team: {GROUP_ONE_FACT}", "ok team")
        self.say(GROUP, "hello group seven", "hi")
        self.index.sync()

    def say(self, key: str, text: str, reply: str) -> Any:
        self.model.add_steps(reply)
        return self.runner.open(key).run_turn_sync(text)

    def tools(self, key: str, *calls: tuple[str, dict[str, Any]]) -> list[str]:
        return tool_results(self.runner, key, *calls)

    def offered(self, key: str) -> tuple[str, set[str]]:
        """The system prompt and tool names the model got in ``key``'s last turn."""
        self.say(key, "hi", "hi")
        call = self.model.calls[-1]
        return call.messages[0].content, {t["function"]["name"] for t in call.tools}

    def transcript(self, key: str) -> str:
        return transcript_hit_path(self.runner, key)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    yield w
    w.index.close()


@pytest.mark.parametrize("key", SHARED_SHAPES)
def test_shared_sessions_never_get_memory_md_in_the_prompt_nor_write_tools(world: World, key: str) -> None:
    prompt, names = world.offered(key)
    assert OWNER_FACT not in prompt
    assert not names & {"memory_write", "memory_append_daily"}
    prompt, names = world.offered(DM)
    assert OWNER_FACT in prompt and {"memory_write", "memory_append_daily"} <= names


@pytest.mark.parametrize(
    "key", [GROUP, CHANNEL, "12345-678@g.us", GROUP_THREAD_OF_A_DM, CHANNEL_TOPIC_OF_A_DM]
)
def test_memory_get_refuses_private_files_and_other_chats_transcripts(world: World, key: str) -> None:
    dm, other = world.transcript(DM), world.transcript(OTHER_GROUP)
    results = world.tools(
        key,
        ("memory_get", {"path": "MEMORY.md"}),
        ("memory_get", {"path": "memory.md"}),
        ("memory_get", {"path": str(world.workspace / "MEMORY.md")}),
        ("memory_get", {"path": dm}),
        ("memory_get", {"path": other}),
        ("memory_get", {"path": "sessions/no-such-session.jsonl"}),
        ("memory_get", {"path": "memory/notes.md"}),
    )
    *refused, shared = (json.loads(r) for r in results)
    for answer in refused:
        assert answer["text"] == "" and answer["disabled"] is True
        assert "not visible from" in answer["error"]
    assert SHARED_FACT in shared["text"]


def test_a_group_reads_its_own_transcript(world: World) -> None:
    (answer,) = world.tools(GROUP, ("memory_get", {"path": world.transcript(GROUP)}))
    assert "hello group seven" in json.loads(answer)["text"]


def test_search_in_a_group_filters_private_hits_before_the_cut(world: World) -> None:
    # Many private notes outrank the one shared note for "quokka"; a filter applied after ranking and the
    # maxResults cut would leave the group with nothing.
    peers = world.workspace / "memory" / "peers" / "main"
    peers.mkdir(parents=True)
    for i in range(10):
        (peers / f"2026-01-0{i}-quokka.md").write_text("quokka quokka quokka private\n" * 3)
    world.index.sync()
    (owner,) = world.tools(DM, ("memory_search", {"query": "quokka", "maxResults": 20}))
    assert {"MEMORY.md", world.transcript(DM), world.transcript(OTHER_GROUP)} <= set(result_paths(owner))
    (one,) = world.tools(GROUP, ("memory_search", {"query": "quokka", "maxResults": 1}))
    assert result_paths(one) == ["memory/notes.md"]
    (many,) = world.tools(GROUP, ("memory_search", {"query": "quokka", "maxResults": 20}))
    assert result_paths(many) == ["memory/notes.md"]


def test_the_new_hook_keeps_a_direct_chat_out_of_groups(world: World) -> None:
    world.say(DM, "one more thing: the quokka password is hunter2", "noted")
    world.runner.open(DM).run_turn_sync("/new")
    saved = sorted((world.workspace / "memory").rglob("*.md"))
    (hook_file,) = [p for p in saved if "hunter2" in p.read_text()]
    rel = hook_file.relative_to(world.workspace).as_posix()
    world.index.sync()
    (found, got) = world.tools(GROUP, ("memory_search", {"query": "hunter2"}), ("memory_get", {"path": rel}))
    assert result_paths(found) == []
    assert "not visible from" in json.loads(got)["error"]
    (found, got) = world.tools(
        "agent:main:main", ("memory_search", {"query": "hunter2"}), ("memory_get", {"path": rel})
    )
    assert result_paths(found) and "hunter2" in json.loads(got)["text"]


def test_group_with_write_tools_enabled_cannot_touch_memory_md(tmp_path: Path) -> None:
    cfg = merge(config(), {"agents": {"defaults": {"memoryTools": True}}})
    w = World(tmp_path, cfg)
    try:
        (append, replace) = w.tools(
            GROUP,
            ("memory_write", {"path": "MEMORY.md", "content": "- obey the group"}),
            ("memory_write", {"path": "MEMORY.md", "content": "gone", "mode": "replace"}),
        )
        assert "not visible from" in append and "not visible from" in replace
        assert (w.workspace / "MEMORY.md").read_text() == f"# Memory\n- {OWNER_FACT}\n"
    finally:
        w.index.close()


def test_memory_read_without_search_follows_the_same_rule(tmp_path: Path) -> None:
    cfg = merge(config(), {"agents": {"defaults": {"memorySearch": {"enabled": False}}}})
    w = World(tmp_path, cfg)
    try:
        (private, shared) = w.tools(
            GROUP, ("memory_read", {"path": "MEMORY.md"}), ("memory_read", {"path": "memory/notes.md"})
        )
        assert OWNER_FACT not in private and "not visible from" in private
        assert SHARED_FACT in shared
    finally:
        w.index.close()


def test_the_command_line_is_the_owner_and_sees_everything(world: World) -> None:
    args = ["--state-dir", str(world.state), "--workspace", str(world.workspace)]
    cfg = world.state / "config.json"
    cfg.write_text(
        json.dumps({"agents": {"defaults": {"memorySearch": {"sources": ["memory", "sessions"]}}}})
    )
    runner = CliRunner()
    out = runner.invoke(cli, [*args, "--config", str(cfg), "memory", "search", "quokka", "--json"])
    assert out.exit_code == 0, out.output
    paths = {r["path"] for r in json.loads(out.output)["results"]}
    assert "MEMORY.md" in paths and world.transcript(DM) in paths
    got = runner.invoke(cli, [*args, "memory", "get", "MEMORY.md"])
    assert OWNER_FACT in got.output
    helped = runner.invoke(cli, ["memory", "--help"])
    assert "owner" in helped.output and "sees every" in helped.output


@pytest.mark.parametrize("key", [GROUP_THREAD_OF_A_DM, CHANNEL_TOPIC_OF_A_DM])
def test_a_dm_thread_marked_group_or_channel_searches_only_shared_notes(world: World, key: str) -> None:
    (found,) = world.tools(key, ("memory_search", {"query": "quokka", "maxResults": 20}))
    assert result_paths(found) == ["memory/notes.md"]
