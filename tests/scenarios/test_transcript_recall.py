"""Scenario: a fact said early in a long conversation is recalled in another session through the
transcript index (sources: memory + sessions), with no memory file ever holding it.

The runner notifies the index after each append; once the conversation has grown past
``deltaMessages`` the transcript's new lines are indexed in the background. A later session on another
key asks; the scripted model calls ``memory_search``, opens the session hit with ``memory_get`` and
answers from what it read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sessionmem.config import Config, merge
from sessionmem.memory.embed.embedder import EmbedderSelection
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.store.database import connect
from sessionmem.messages import ToolCall
from sessionmem.model.base import ModelRequest
from sessionmem.model.scripted import ScriptedModel, flush_aware
from sessionmem.session.runner import SessionRunner

FACT = "The boathouse door code at the lake cabin is 5512."
QUESTION = "What was the boathouse door code at the lake cabin?"
TOPICS = ["sourdough starters", "bike gears", "tax forms", "tomato blight", "jazz chords", "kayak paddles"]


def config() -> Config:
    return merge(
        Config(),
        {
            "agents": {
                "defaults": {
                    "userTimezone": "UTC",
                    "memorySearch": {
                        "provider": "none",
                        "sources": ["memory", "sessions"],
                        "sync": {"watch": False, "sessions": {"debounceMs": 50}},
                    },
                }
            }
        },
    )


def model() -> ScriptedModel:
    """Chats; asked the question, it searches, opens the first session hit, and answers from it."""

    def respond(request: ModelRequest) -> Any:
        last = request.messages[-1]
        if last.role == "tool" and last.tool_name == "memory_search":
            results = json.loads(last.content)["results"]
            # A session hit that is not just this question echoed back from the current transcript.
            hits = [r for r in results if r["path"].startswith("sessions/") and QUESTION not in r["snippet"]]
            if not hits:
                return "I could not find it."
            hit = hits[0]
            lines = hit["endLine"] - hit["startLine"] + 1
            return ToolCall(
                "get-1", "memory_get", {"path": hit["path"], "from": hit["startLine"], "lines": lines}
            )
        if last.role == "tool" and last.tool_name == "memory_get":
            text = json.loads(last.content)["text"]
            said = [line for line in text.splitlines() if "boathouse" in line and line.startswith("User:")]
            return f"From our earlier chat: {said[0].removeprefix('User: ')}" if said else "Not found."
        if last.role == "user" and last.content == QUESTION:
            return ToolCall("search-1", "memory_search", {"query": "boathouse door code lake cabin"})
        return f"Noted about {last.content[:40]}."

    return ScriptedModel(responder=flush_aware(respond))


def test_an_early_fact_is_recalled_in_a_new_session_from_the_transcript(
    tmp_path: Path, workspace: Path
) -> None:
    state = tmp_path / "state"
    cfg = config()
    settings = cfg.for_agent("main").memory_search
    selection = EmbedderSelection(None, "none", reason="FTS-only scenario")
    with MemoryIndex.open("main", workspace, settings, state_dir=state, selection=selection) as index:
        runner = SessionRunner(model(), config=cfg, workspace=workspace, state_dir=state, memory_index=index)
        first = runner.open()
        first.run_turn_sync("Hi! Planning a weekend at the lake cabin.")
        first.run_turn_sync(FACT)
        for i in range(40):
            topic = TOPICS[i % len(TOPICS)]
            first.run_turn_sync(f"Turn {i}: tell me one thing about {topic}, detail {i}.")
        assert index.wait_idle(15)
        rel = f"sessions/{first.transcript.path.name}"
        # Indexed by the delta path alone (no search or manual sync has run yet), and nothing wrote
        # the fact to a memory file.
        conn, _ = connect(index.path)
        try:
            row = conn.execute("SELECT size FROM files WHERE path = ?", (rel,)).fetchone()
            fact_rows = conn.execute(
                "SELECT start_line FROM chunks WHERE path = ? AND text LIKE '%boathouse door code%'", (rel,)
            ).fetchall()
        finally:
            conn.close()
        assert row is not None and fact_rows
        assert not any("5512" in p.read_text() for p in workspace.rglob("*.md"))

        second = runner.open("agent:main:telegram:direct:ana")
        assert second.transcript.path != first.transcript.path
        result = second.run_turn_sync(QUESTION)

    assert result.reply == f"From our earlier chat: {FACT}"
    calls = [m for m in result.messages if m.tool_calls]
    assert [c.tool_calls[0].name for c in calls] == ["memory_search", "memory_get"]
    assert calls[1].tool_calls[0].arguments["path"] == rel
