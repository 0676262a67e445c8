"""Shared pieces for runner and scenario tests: a small-window config, a runner, readers of what a
user would look at (sessions.json, the transcript, memory files, what the model received)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sessionmem.config import Config, merge
from sessionmem.messages import Message, ToolCall
from sessionmem.model.base import ModelRequest
from sessionmem.session.runner import SessionRunner
from sessionmem.session.stores.transcript_folder import read_entries
from sessionmem.session.turn.events import CompactionEvent, Event, FlushEvent

FLUSH_MARKER = "Pre-compaction memory flush."


def small_config(
    *,
    window: int = 8000,
    reserve: int = 1000,
    floor: int = 1000,
    soft: int = 500,
    keep: int = 1500,
    timezone: str = "UTC",
    **agent: Any,
) -> Config:
    defaults: dict[str, Any] = {
        "contextTokens": window,
        "userTimezone": timezone,
        "compaction": {
            "reserveTokens": reserve,
            "reserveTokensFloor": floor,
            "keepRecentTokens": keep,
            "memoryFlush": {"softThresholdTokens": soft},
        },
    }
    defaults.update(agent)
    return merge(Config(), {"agents": {"defaults": defaults}})


class Recorder:
    """An on_event callback keeping every event."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.kept_problems: list[str] = []  # tool-pair problems in what each compaction kept
        self._watched: Any = None

    def check_each_compaction(self, session: Any) -> None:
        """From now on, check the context each compaction of ``session`` leaves (kept_problems)."""
        self._watched = session

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        if event.kind == "compaction" and self._watched is not None:
            self.kept_problems += kept_context_problems(self._watched)

    def kinds(self, *only: str) -> list[str]:
        return [e.kind for e in self.events if not only or e.kind in only]

    def flush_cycles(self) -> list[int]:
        """The cycles the flushes ran in, checked as a user would: each flushed once, in order, and every
        compaction closing a cycle that had its flush (DESIGN 1)."""
        cycles = [e.compaction_count for e in self.events if isinstance(e, FlushEvent)]
        assert cycles == sorted(set(cycles)), cycles  # once per cycle, in order
        for event in self.events:
            if isinstance(event, CompactionEvent):
                assert event.compaction_count - 1 in cycles, (event.compaction_count, cycles)
        return cycles


def make_runner(
    model: Any, tmp_path: Path, workspace: Path, config: Config | None = None, **kwargs: Any
) -> tuple[SessionRunner, Recorder]:
    recorder = Recorder()
    runner = SessionRunner(
        model,
        config=config or small_config(),
        workspace=workspace,
        state_dir=tmp_path / "state",
        on_event=recorder,
        **kwargs,
    )
    return runner, recorder


def tool_results(runner: SessionRunner, key: str, *calls: tuple[str, dict[str, Any]]) -> list[str]:
    """Have ``runner``'s scripted model call ``calls`` (name, arguments) in one step of ``key``'s session,
    then say "done"; the tools' results, in order."""
    model = runner.model
    model.add_steps([ToolCall(f"c{i}", name, args) for i, (name, args) in enumerate(calls)], "done")
    runner.open(key).run_turn_sync("look it up")
    results = {m.tool_call_id: m.content for m in model.calls[-1].messages if m.role == "tool"}
    return [results[f"c{i}"] for i in range(len(calls))]


def result_paths(result: str) -> list[str]:
    """The paths of a ``memory_search`` tool result's hits, best first."""
    return [r["path"] for r in json.loads(result)["results"]]


def transcript_hit_path(runner: SessionRunner, key: str) -> str:
    """The path a search hit in ``key``'s current transcript carries: ``sessions/<file>``."""
    entry = runner.store.get(key)
    assert entry is not None, key
    return "sessions/" + Path(entry.session_file or "").name


def store_entry(runner: SessionRunner, key: str = "agent:main:main") -> dict[str, Any]:
    data = json.loads(runner.store.path.read_text(encoding="utf-8"))
    return data[key]


def transcript_lines(path: Path) -> list[dict[str, Any]]:
    return [obj for _, obj in read_entries(path)]


def flush_prompt_requests(calls: list[ModelRequest]) -> list[ModelRequest]:
    """Flush requests that are the first call of a flush turn (the flush prompt is the last message)."""
    return [
        c
        for c in calls
        if c.purpose == "flush" and c.messages[-1].role == "user" and FLUSH_MARKER in c.messages[-1].content
    ]


def orphan_tool_messages(request: ModelRequest) -> list[str]:
    """Tool results whose call is not earlier in the request, and calls without a result."""
    return tool_pair_problems(request.messages)


def kept_context_problems(session: Any) -> list[str]:
    """Tool-pair problems in the context the transcript rebuilds (summary + kept entries): what
    compaction itself kept, before the runner's request-time repair could hide a bad cut."""
    return tool_pair_problems([message for _, message in session.transcript.context_messages()])


def tool_pair_problems(messages: Sequence[Message]) -> list[str]:
    """Tool results whose call is not earlier in ``messages``, and calls without a result."""
    problems: list[str] = []
    calls: set[str] = set()
    results = {m.tool_call_id for m in messages if m.role == "tool"}
    for message in messages:
        if message.role == "tool" and message.tool_call_id not in calls:
            problems.append(f"orphan result {message.tool_call_id}")
        for call in message.tool_calls:
            calls.add(call.id)
            if call.id not in results:
                problems.append(f"call without result {call.id}")
    return problems
