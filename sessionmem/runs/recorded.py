"""Replay a recorded transcript (``transcripts/*.jsonl``) through the session runner.

The recording's user messages are sent as turns, in order. The model is a
:class:`~sessionmem.model.scripted.ScriptedModel` whose responder (:class:`ReplayAgent`) gives back the
recorded assistant replies and tool calls of each turn, in order (their recorded usage is dropped, so
token counts are those of the replayed context). Tool calls run against:

- the session's own memory tools (``memory_write``, ``memory_append_daily``, ``memory_search``,
  ``memory_get``), for real, over the replay's workspace and an FTS-only index: writing memory is what
  the replay is meant to show;
- stand-ins for every other recorded tool (``book_hotel``, ``run_sql``, ...), which return the recorded
  result of that tool's next call (an error result comes back as an error).

With a small context window the runner flushes and compacts as it would live. The model's flush turn
appends the user's statements it has not saved yet to the daily log and replies ``NO_REPLY``; its
compaction summary lists what the user said. :func:`run_replay` reports everything as records
(``{"event": "turn", ...}``) and returns a :class:`ReplayReport`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sessionmem.config import camel_case
from sessionmem.errors import TranscriptError
from sessionmem.messages import Message, ToolCall, written_in_a_flush
from sessionmem.model.base import ModelRequest
from sessionmem.model.scripted import NO_REPLY, ScriptedModel, flush_aware, flush_write_target
from sessionmem.runs.common import Record, RecordSink, small_window_config
from sessionmem.safefs import make_private_dirs
from sessionmem.session.stores.transcript import message_from_dict
from sessionmem.session.stores.transcript_folder import read_entries
from sessionmem.session.turn.events import Event, event_record
from sessionmem.tools.define import Tool, ToolError

DEFAULT_CONTEXT_WINDOW = 3000
SESSION_TOOLS = frozenset(
    {"memory_write", "memory_append_daily", "memory_search", "memory_get", "memory_read"}
)
NO_MORE_REPLIES = "(the recording has no further reply for this turn)"
_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")
MIN_STATEMENT_CHARS = 40


# ---------------------------------------------------------------------------- reading a recording


@dataclass(frozen=True, slots=True)
class RecordedTurn:
    """One user message and what the recorded assistant did until the next user message."""

    user: str
    replies: tuple[Message, ...]  # assistant messages, usage removed
    results: tuple[Message, ...]  # the recorded tool results, in order


def load_recording(path: Path | str) -> list[RecordedTurn]:
    """The turns of a recorded transcript; raises :class:`TranscriptError` when it has no user message.

    The silent flush turns a runner wrote into it (messages marked ``memory_flush``) are left out: the
    replay's own runner flushes where it must, and a flush prompt is not something the user said.
    """
    turns: list[tuple[str, list[Message], list[Message]]] = []
    for _, entry in read_entries(path):
        raw = entry.get("message")
        if entry.get("type") != "message" or not isinstance(raw, dict) or written_in_a_flush(raw):
            continue
        message = message_from_dict(raw)
        if message is None:
            continue
        if message.role == "user":
            turns.append((message.content, [], []))
        elif not turns:
            continue  # assistant output before the first user message has no turn to belong to
        elif message.role == "assistant":
            turns[-1][1].append(Message.assistant(message.content, tool_calls=message.tool_calls))
        elif message.role == "tool":
            turns[-1][2].append(message)
    if not turns:
        raise TranscriptError(f"{path}: no user message to replay (is it a transcript JSONL file?)")
    return [RecordedTurn(user, tuple(replies), tuple(results)) for user, replies, results in turns]


def stand_in_tools(turns: Iterable[RecordedTurn]) -> list[Tool]:
    """A tool for every recorded tool name the session does not provide; each call returns the
    recorded result of that tool's next call, in recorded order."""
    queues: dict[str, deque[Message]] = defaultdict(deque)
    names: dict[str, None] = {}
    for turn in turns:
        for reply in turn.replies:
            for call in reply.tool_calls:
                names.setdefault(call.name)
        for result in turn.results:
            if result.tool_name:
                queues[result.tool_name].append(result)
    tools = []
    for name in names:
        if name in SESSION_TOOLS:
            continue

        def handler(_name: str = name, **_arguments: Any) -> str:
            queue = queues[_name]
            if not queue:
                return f"(no recorded result left for {_name})"
            result = queue.popleft()
            if result.is_error:
                raise ToolError(result.content)
            return result.content

        schema = {"type": "object", "properties": {}, "additionalProperties": True}
        tools.append(
            Tool(
                name, f"Recorded stand-in for {name}: returns the recorded results in order.", schema, handler
            )
        )
    return tools


# ---------------------------------------------------------------------------- the scripted assistant


def first_sentence(text: str, limit: int = 160) -> str:
    """The opening sentences of ``text`` (at least ~40 characters, so "Hi!" is not all), cut at ``limit``."""
    out = ""
    for sentence in _SENTENCE.split(" ".join(text.split())):
        out = f"{out} {sentence}".strip() if out and not out.endswith(("。", "！", "？")) else out + sentence
        if len(out) >= MIN_STATEMENT_CHARS:
            break
    return out if len(out) <= limit else out[: limit - 1] + "…"


class ReplayAgent:
    """Replays the recorded replies of the current turn; flushes, summarises and names like a model."""

    def __init__(self, turns: list[RecordedTurn], slug: str = "replay") -> None:
        self.turns = turns
        self.slug = slug
        self.current: deque[Message] = deque()
        self.saved: set[str] = set()
        self._users = {t.user for t in turns}
        self._route = flush_aware(self.reply, flush=self.flush, summary=self.summary, slug=slug)

    def start_turn(self, index: int) -> None:
        self.current = deque(self.turns[index].replies)

    def __call__(self, request: ModelRequest) -> Any:
        """:func:`~sessionmem.model.scripted.flush_aware` routes by purpose: the flush, the summary and the
        ``/new`` file's name here, the user's turns to :meth:`reply`."""
        return self._route(request)

    def reply(self, request: ModelRequest) -> Any:
        """The next recorded reply of the current turn."""
        return self.current.popleft() if self.current else NO_MORE_REPLIES

    def statements(self, messages: Iterable[Message]) -> list[str]:
        """The first sentence of each recorded user message in ``messages``."""
        return [
            f"- {first_sentence(m.content)}"
            for m in messages
            if m.role == "user" and m.content in self._users
        ]

    def flush(self, request: ModelRequest) -> Any:
        if request.messages[-1].role == "tool":
            return NO_REPLY
        new = [s for s in self.statements(request.messages) if s not in self.saved]
        target = flush_write_target(request)
        if not new or target is None:
            return NO_REPLY
        self.saved.update(new)
        return ToolCall(
            f"flush-{len(self.saved)}", "write", {"path": target, "content": "\n".join(new) + "\n"}
        )

    def summary(self, request: ModelRequest) -> str:
        earlier = [m.content for m in request.messages if m.role == "user" and m.content not in self._users]
        lines = ["## What the user said"]
        lines += self.statements(request.messages)[-12:] or ["- (nothing new)"]
        if earlier:  # the previous summary, kept short
            lines += ["## Earlier", first_sentence(earlier[0].split("</summary>")[0][-600:], 300)]
        return "\n".join(lines)


# ---------------------------------------------------------------------------- the run


@dataclass
class ReplayReport:
    recording: Path
    workspace: Path
    state_dir: Path
    turns: int = 0
    flushes: int = 0
    compactions: int = 0
    flush_cycles: list[int] = field(default_factory=list)  # compaction_count of each flush
    memory_files: list[str] = field(default_factory=list)
    final_tokens: int = 0
    transcript: Path | None = None
    sessions_json: Path | None = None

    def to_json(self) -> Record:
        data = dataclasses.asdict(self)
        return {camel_case(k): str(v) if isinstance(v, Path) else v for k, v in data.items()}


def replay_record(event: Event) -> Record | None:
    """A runner event as a record: ``{"event": kind, "sessionKey": ..., "sessionId": ..., ...fields}``
    (:func:`~sessionmem.session.turn.events.event_record` without the timestamp, so a replay's records are
    the same every run; the runner's own turn event is left out: the replay reports turns itself, with
    the token figure)."""
    if event.kind == "turn":
        return None
    return event_record(event, without=("timestamp",))


def run_replay(
    recording: Path | str,
    workspace: Path,
    state_dir: Path,
    *,
    context_window: int = DEFAULT_CONTEXT_WINDOW,
    emit: RecordSink | None = None,
    timezone: str | None = None,
) -> ReplayReport:
    """Replay ``recording`` in ``workspace`` / ``state_dir``; every record goes to ``emit``."""
    return asyncio.run(_run(Path(recording), workspace, state_dir, context_window, emit, timezone))


async def _run(
    recording: Path,
    workspace: Path,
    state_dir: Path,
    context_window: int,
    emit: RecordSink | None,
    timezone: str | None,
) -> ReplayReport:
    from sessionmem.memory.index import MemoryIndex
    from sessionmem.session.runner import SessionRunner

    sink: RecordSink = emit or (lambda record: None)
    turns = load_recording(recording)
    config = small_window_config(context_window, timezone=timezone)
    agent = ReplayAgent(turns, slug=recording.stem.split(".")[0][:30] or "replay")
    model = ScriptedModel(responder=agent, name="scripted-replay")
    report = ReplayReport(recording, workspace, state_dir)
    make_private_dirs(workspace / "memory")

    def on_event(event: Event) -> None:
        record = replay_record(event)
        if record is None:
            return
        if event.kind == "flush":
            report.flushes += 1
            report.flush_cycles.append(int(record.get("compactionCount", 0)))
        elif event.kind == "compaction":
            report.compactions += 1
        sink(record)

    settings = config.for_agent("main").memory_search
    with MemoryIndex.open("main", workspace, settings, state_dir=state_dir, watch=False) as index:
        runner = SessionRunner(
            model,
            config=config,
            workspace=workspace,
            state_dir=state_dir,
            tools=stand_in_tools(turns),
            on_event=on_event,
            memory_index=index,
            command_source="replay",
        )
        session = runner.open()
        sink(
            {
                "event": "start",
                "recording": str(recording),
                "turns": len(turns),
                "workspace": str(workspace),
                "stateDir": str(state_dir),
                "contextWindow": session.context_window,
                "sessionId": session.entry.session_id,
            }
        )
        for number, turn in enumerate(turns, start=1):
            agent.start_turn(number - 1)
            result = await session.run_turn(turn.user)
            report.turns = number
            sink(
                {
                    "event": "turn",
                    "sessionKey": session.key,
                    "sessionId": session.entry.session_id,
                    "turn": number,
                    "user": turn.user,
                    "reply": result.reply,
                    "tokens": session.projection().tokens,
                    "command": result.command,
                }
            )
            await session.wait_idle()  # the flush or compaction after the reply, before the next turn
        report.final_tokens = session.projection().tokens
        report.transcript = session.transcript.path
        report.sessions_json = getattr(runner.store, "path", None)  # with the sessions.json backend
    report.memory_files = sorted(
        p.relative_to(workspace).as_posix()
        for p in [*workspace.glob("*.md"), *(workspace / "memory").rglob("*.md")]
    )
    sink({"event": "done", **report.to_json()})
    return report
