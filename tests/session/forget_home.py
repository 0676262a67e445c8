"""An agent that two people talked to, for the forget tests: each person's notes written through every
path (the write tools, a replace that keeps an earlier version, the silent flush, ``/new``, the
transcripts as a memory source), on a chosen session store and index store, with the real GGUF model (so
the embedding cache is filled) or keyword-only.

Ana (peer 42) talks on Telegram, in a Telegram thread and on Discord; Ben (peer 43) on Telegram. Each
says a word no one else says (:data:`ANA_WORD`, :data:`BEN_WORD`), so finding it anywhere means finding
them. ``config.json`` holds the same settings, for the command line and the MCP server.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sessionmem.config import Config
from sessionmem.memory.index import MemoryIndex
from sessionmem.messages import ToolCall
from sessionmem.model.base import ModelRequest
from sessionmem.model.scripted import NO_REPLY, ScriptedModel, default_summary
from sessionmem.session.runner import SessionRunner
from sessionmem.session.stores.backend import transcript_shelf
from tests.scenarios.harness import tool_results

ANA = "agent:main:telegram:direct:42"
ANA_THREAD = "agent:main:telegram:direct:42:thread:7"
ANA_DISCORD = "agent:main:discord:direct:42"
BEN = "agent:main:telegram:direct:43"
ANA_WORD = "zanzibarquokka"
BEN_WORD = "bellwetherotter"
ANA_HOME = "memory/peers/telegram~direct~42"
BEN_HOME = "memory/peers/telegram~direct~43"
WORDS = {ANA: ANA_WORD, ANA_THREAD: ANA_WORD, ANA_DISCORD: ANA_WORD, BEN: BEN_WORD}


def flushing(note: Callable[[str], str]) -> Callable[[ModelRequest], Any]:
    """A scripted model whose silent flush appends ``note(session key)`` to the daily log; other turns
    answer "ok", the summary is the scripted one."""

    def respond(request: ModelRequest) -> Any:
        if request.purpose == "compaction":
            return default_summary(request)
        if request.purpose != "flush":
            return "ok"
        if request.messages[-1].role == "tool":
            return NO_REPLY
        text = note(str(request.metadata.get("session_key")))
        return ToolCall("flush-1", "memory_append_daily", {"text": text})

    return respond


flush_writes = flushing(lambda key: f"- flushed: {WORDS.get(key, 'nobody')} drinks rooibos tea")


class Home:
    """The agent's workspace, state, runner and index (see the module docstring)."""

    def __init__(
        self,
        root: Path,
        *,
        session_store: str | None = None,
        index_path: str | None = None,
        model_path: Path | None = None,
    ) -> None:
        self.root = root
        self.workspace = root / "workspace"
        (self.workspace / "memory").mkdir(parents=True)
        (self.workspace / "memory" / "shared.md").write_text("- the office opens at nine\n")
        self.state = root / "state"
        search: dict[str, Any] = {"sources": ["memory", "sessions"]}  # files or PostgreSQL rows alike
        if model_path is not None:
            search.update(provider="local", local={"modelPath": str(model_path)})
        else:
            search["provider"] = "none"
        if index_path is not None:
            search["store"] = {"path": index_path}
        settings: dict[str, Any] = {
            "memory": {"scope": "peer"},
            "agents": {"defaults": {"contextTokens": 100_000, "userTimezone": "UTC", "memorySearch": search}},
            "hooks": {"internal": {"entries": {"session-memory": {"llmSlug": False}}}},
        }
        if session_store is not None:
            settings["session"] = {"store": session_store}
        self.config_file = root / "config.json"
        self.config_file.write_text(json.dumps(settings))
        self.config = Config.load(self.config_file)
        self.model = ScriptedModel(responder=flush_writes)
        self.runner = SessionRunner(
            self.model, config=self.config, workspace=self.workspace, state_dir=self.state
        )
        self.index = MemoryIndex.open(
            "main",
            self.workspace,
            self.config.for_agent("main").memory_search,
            state_dir=self.state,
            watch=False,
            transcripts=transcript_shelf(self.runner.store),
        )
        self.runner.memory_index = self.index

    def close(self) -> None:
        self.runner.close()  # closes the index too
        close = getattr(self.runner.store, "close", None)
        if callable(close):
            close()

    @property
    def options(self) -> list[str]:
        """The global options of the command line for this agent."""
        return [
            "--config",
            str(self.config_file),
            "--state-dir",
            str(self.state),
            "--workspace",
            str(self.workspace),
        ]

    def tools(self, key: str, *calls: tuple[str, dict[str, Any]]) -> list[str]:
        return tool_results(self.runner, key, *calls)

    def talk(self, key: str) -> None:
        """Everything a person can leave: the write tools (a replace keeps an earlier version), a message,
        the flush, ``/new`` (its file, an archived transcript), then a new session's message."""
        word = WORDS[key]
        session = self.runner.open(key)
        self.tools(
            key,
            ("memory_write", {"path": "MEMORY.md", "content": f"- {word} prefers metric units"}),
            ("memory_write", {"path": "MEMORY.md", "content": f"- {word} moved to Porto", "mode": "replace"}),
            ("memory_append_daily", {"text": f"- {word} bakes with 200 g of flour"}),
        )
        session.run_turn_sync(f"I am {word} and my locker code is 4417")
        session.run_turn_sync("/compact")
        session.run_turn_sync("/new")
        session.run_turn_sync(f"hello again, {word} here")

    def everyone_talks(self) -> None:
        self.talk(ANA)
        self.runner.open(ANA_THREAD).run_turn_sync(f"{ANA_WORD} asks in a thread")
        self.runner.open(ANA_DISCORD).run_turn_sync(f"{ANA_WORD} on discord now")
        self.talk(BEN)
        self.index.sync()
        assert self.index.wait_idle(60)

    def files_under(self, rel: str) -> dict[str, bytes]:
        """Every file under ``workspace/rel`` and its bytes."""
        base = self.workspace / rel
        return {
            str(p.relative_to(self.workspace)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()
        }


def files_holding(root: Path, *needles: str) -> list[str]:
    """Every file under ``root`` whose bytes hold one of ``needles`` (databases, logs and WALs included)."""
    found = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if any(n.encode() in data for n in needles):
                found.append(str(path.relative_to(root)))
    return sorted(found)


def blobs_holding(root: Path, blobs: Iterator[bytes] | list[bytes]) -> list[str]:
    """Every file under ``root`` holding one of the byte strings ``blobs`` (embedding vectors)."""
    wanted = [b for b in blobs if b]
    found = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            data = path.read_bytes()
            if any(b in data for b in wanted):
                found.append(str(path.relative_to(root)))
    return sorted(found)
