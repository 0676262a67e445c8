"""Shared pieces for runner and scenario tests: a small-window config, a runner, readers of what a
user would look at (sessions.json, the transcript, memory files, what the model received)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sessionmem.config import Config, merge
from sessionmem.model.base import ModelRequest
from sessionmem.session.events import Event
from sessionmem.session.runner import SessionRunner
from sessionmem.session.transcript import read_entries

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

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def kinds(self, *only: str) -> list[str]:
        return [e.kind for e in self.events if not only or e.kind in only]


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
    problems: list[str] = []
    calls: set[str] = set()
    results = {m.tool_call_id for m in request.messages if m.role == "tool"}
    for message in request.messages:
        if message.role == "tool" and message.tool_call_id not in calls:
            problems.append(f"orphan result {message.tool_call_id}")
        for call in message.tool_calls:
            calls.add(call.id)
            if call.id not in results:
                problems.append(f"call without result {call.id}")
    return problems
