"""What the flush saves is found again after the compaction that follows it: the flush appends the fact
to today's daily log, the real (FTS-only) memory index picks it up, and after the summary has dropped
the detail the agent's memory_search returns it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from freezegun import freeze_time

from sessionmem.config import ExperimentalConfig, MemorySearchConfig
from sessionmem.memory.index import MemoryIndex
from sessionmem.messages import ToolCall
from sessionmem.model.base import ModelRequest
from sessionmem.model.scripted import ScriptedModel, flush_write
from tests.scenarios.harness import make_runner, small_config

TODAY = "memory/2026-11-22.md"
FACT = "- The staging database password rotates on the first Monday; owner is Priya Raman.\n"


def agent_model() -> ScriptedModel:
    def respond(request: ModelRequest) -> Any:
        if request.purpose == "compaction":
            return "## Decisions\nNone\n## Open TODOs\nNone"  # the detail is gone from the summary
        if request.purpose == "flush":
            return flush_write(FACT, path=TODAY)(request)
        last = request.messages[-1]
        if last.role == "user" and last.content.startswith("who owns"):
            return ToolCall("s1", "memory_search", {"query": "staging database password owner"})
        if last.role == "tool":
            return "Searched memory: " + last.content
        return "Sure. " + " ".join(f"filler{i}" for i in range(50))

    return ScriptedModel(responder=respond)


def test_flushed_fact_is_searchable_after_compaction(tmp_path: Path, workspace: Path) -> None:
    settings = MemorySearchConfig(provider="none")
    config = small_config(window=4000, reserve=600, floor=600, soft=400, keep=500, timezone="UTC")
    config = config.model_copy(
        update={
            "agents": config.agents.model_copy(
                update={"defaults": config.agents.defaults.model_copy(update={"memory_search": settings})}
            )
        }
    )
    model = agent_model()
    with MemoryIndex.open("main", workspace, settings, state_dir=tmp_path / "state") as index:
        runner, recorder = make_runner(model, tmp_path, workspace, config, memory_index=index)
        session = runner.open()
        with freeze_time("2026-11-22 15:00:00"):
            session.run_turn_sync("Note: " + FACT)
            turns = 0
            while "compaction" not in recorder.kinds() and turns < 40:
                session.run_turn_sync(f"chat {turns} " + " ".join(f"topic{i}" for i in range(60)))
                turns += 1
            assert recorder.kinds("flush", "compaction")[:2] == ["flush", "compaction"]
            assert FACT in (workspace / TODAY).read_text()
            reply = session.run_turn_sync("who owns the staging database password?").reply
    assert reply is not None and reply.startswith("Searched memory: ")
    found = json.loads(reply.removeprefix("Searched memory: "))
    assert any(r["path"] == TODAY and "Priya Raman" in r["snippet"] for r in found["results"])
    # The model was told about memory_search and memory_get in the system prompt.
    assert "## Memory Recall" in model.calls[-1].messages[0].content


def test_post_compaction_sync_indexes_the_latest_turns_of_the_transcript(
    tmp_path: Path, workspace: Path
) -> None:
    from sessionmem.memory.search.records import SearchRequest

    settings = MemorySearchConfig(
        provider="none", sources=("memory", "sessions"), experimental=ExperimentalConfig(session_memory=True)
    )
    config = small_config(window=4000, reserve=600, floor=600, soft=400, keep=500, timezone="UTC")
    defaults = config.agents.defaults.model_copy(
        update={
            "memory_search": settings,
            "compaction": config.agents.defaults.compaction.model_copy(update={"post_index_sync": "await"}),
        }
    )
    config = config.model_copy(update={"agents": config.agents.model_copy(update={"defaults": defaults})})
    # Unwatched: only the runner's own syncs (after the flush, after the compaction) touch the index.
    with MemoryIndex.open("main", workspace, settings, state_dir=tmp_path / "state", watch=False) as index:
        runner, recorder = make_runner(agent_model(), tmp_path, workspace, config, memory_index=index)
        session = runner.open()
        turns = 0
        with freeze_time("2026-11-22 15:00:00"):  # the day TODAY names: the flush may write only there
            while "compaction" not in recorder.kinds() and turns < 40:
                session.run_turn_sync(
                    f"chat {turns} zebra{turns} " + " ".join(f"topic{i}" for i in range(60))
                )
                turns += 1
        # The flush synced the index before this turn's message; only the post-compaction sync has it.
        assert recorder.kinds("flush", "compaction") == ["flush", "compaction"]
        assert not index.dirty
        last = f"zebra{turns - 1}"
        response = index.search(SearchRequest(query=last, min_score=0.0))
    assert any(r.path.startswith("sessions/") and last in r.snippet for r in response.results), response
