"""The session runner: wraps each LLM turn with token projection, the silent flush and compaction.

One turn, top to bottom (:meth:`Session.run_turn`):

1. preflight: project the prompt size with the pending message; at the compaction threshold compact
   through the gate (which flushes first), else at the flush threshold run the silent flush;
2. call the model with the user message, dispatching tool calls, until it answers (bounded); the
   message is written to the transcript once the model accepted it (after any overflow recovery);
   with ``on_partial`` the reply is streamed as it is written (sessionmem.session.streaming);
3. record usage in sessions.json;
4. if the projection now reaches the compaction threshold, compact through the gate (not in heartbeat
   runs, which may not flush: the next real turn's preflight does both).

A provider context-overflow compacts through the gate and retries once (a second overflow is raised).
Every compaction, whatever its reason, goes through :func:`~sessionmem.session.gate.compact_through_gate`,
which runs the flush first when the current compaction cycle has not had one (DESIGN 1). The flush is an
ordinary turn of kind "flush": same loop, its own prompts and tools, output never delivered; if its own
call overflows it retries on the newest half of the context before resorting to compaction.

Blocking file work (transcript appends, sessions.json under its lock) runs inline: each is one small
write. Memory-index syncs run in a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import orjson

from sessionmem.config import Config
from sessionmem.errors import ContextWindowExceeded, UsageError
from sessionmem.messages import FLUSH_PROVENANCE, Message, Usage
from sessionmem.model.base import Model, ModelReply, ModelRequest, supports_streaming
from sessionmem.session import keys
from sessionmem.session.compaction import recent_within, repair_tool_pairs
from sessionmem.session.entry import SessionEntry
from sessionmem.session.events import (
    CompactionResult,
    Event,
    EventCallback,
    FlushSkippedEvent,
    ToolCallEvent,
    TurnEvent,
    TurnResult,
    deliver,
)
from sessionmem.session.flush import (
    compaction_threshold,
    should_flush,
    user_zone,
    workspace_writable,
)
from sessionmem.session.gate import compact_through_gate, flush_if_unflushed, run_flush
from sessionmem.session.memory_tools import SessionTools
from sessionmem.session.noreply import deliverable_reply
from sessionmem.session.projection import (
    Projection,
    TokenCounter,
    context_state,
    project_tokens,
    provider_owns_compaction,
    resolve_context_window,
    usage_fields,
)
from sessionmem.session.store import SessionStore
from sessionmem.session.streaming import PartialCallback, stream_reply
from sessionmem.session.tools import Tool, dispatch
from sessionmem.session.transcript import Transcript
from sessionmem.tokens import count_tokens

if TYPE_CHECKING:
    from sessionmem.hooks import HookRegistry

log = logging.getLogger(__name__)

TurnKind = Literal["turn", "flush"]
FLUSH_MAX_TOOL_ITERATIONS = 6


@dataclass
class _TurnState:
    kind: TurnKind
    messages: list[Message] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    last: Message | None = None  # the last assistant message
    model_calls: int = 0
    stopped: str | None = None
    trim_to: int | None = None  # send only the newest messages within this many tokens (flush overflow)
    compacted: bool = False  # this turn already compacted after an overflow
    pending: Message | None = None  # the turn's prompt, written once the model has accepted it
    on_partial: PartialCallback | None = None  # stream the reply to the caller (ordinary turns only)


class SessionRunner:
    """Runs sessions of one agent: ``runner.open(key)`` gives a :class:`Session`."""

    def __init__(
        self,
        model: Model,
        *,
        config: Config | None = None,
        agent_id: str = keys.DEFAULT_AGENT_ID,
        workspace: Path | str,
        state_dir: Path | str,
        tools: Iterable[Tool] = (),
        on_event: EventCallback | None = None,
        memory_index: Any = None,
        heartbeat: bool = False,
        system_prompt: str = "",
        hooks: HookRegistry | None = None,
        command_source: str | None = None,
    ) -> None:
        self.model = model
        self.config = config or Config()
        self.agent_id = keys.validate_agent_id(agent_id)
        self.agent = self.config.for_agent(agent_id)
        self.workspace = Path(workspace)
        self.state_dir = Path(state_dir)
        self.tools = tuple(tools)
        self.on_event = on_event
        self.memory_index = memory_index
        self.heartbeat = heartbeat
        self.system_prompt = system_prompt
        # Hooks for command:new/reset, session:start/end, memory:flush, compaction:after; None loads
        # the bundled, workspace and user hooks on first use (sessionmem.session.lifecycle).
        self.hooks = hooks
        self.command_source = command_source  # shown as "Source" in session-memory files ("cli", ...)
        # sessions.json and the transcripts: session.store (with ~ and {agentId}), else under state_dir.
        self.store = SessionStore.for_agent(self.state_dir, self.agent_id, self.config.session.store)
        self._check_index_sessions_dir()
        self._sessions: dict[str, Session] = {}
        user_zone(self.agent.user_timezone)  # a bad userTimezone fails here, not in the middle of a flush

    def open(self, session_key: str | None = None) -> Session:
        """The session for ``session_key`` (default ``agent:<agentId>:main``), created if new.

        The same key gives the same :class:`Session` object, so two callers share one context."""
        key = keys.normalize_key(session_key or keys.default_key(self.agent_id))
        if key in self._sessions:
            return self._sessions[key]
        entry = self.store.get(key)
        created = False
        if entry is None:
            # Trigger: two processes open one new key at once; both read "no entry". Why: creating in a
            # second step would let each write its own sessionId, the last one winning in the store
            # while the first talks to an orphan transcript. Outcome: the entry is created in one locked
            # update that re-reads the store, so whoever comes second adopts the first one's session.
            session_id = str(uuid.uuid4())
            fresh = SessionEntry.model_validate(
                {
                    "sessionId": session_id,
                    "sessionFile": str(self.store.transcript_path(session_id)),
                    "chatType": keys.chat_type(key),
                    "sessionKey": key,
                }
            )
            entry = self.store.update(key, lambda current: current or fresh)
            assert entry is not None
            created = entry.session_id == session_id
        path = Path(entry.session_file or self.store.transcript_path(entry.session_id))
        transcript = Transcript.open(path, entry.session_id, self.workspace, session_key=key)
        session = Session(self, key, transcript, entry)
        # Trigger: open() made a new sessions.json entry. Why: open() is sync and hooks are async, and
        # rotations announce their own new session. Outcome: session:start ("created") fires once, at
        # the start of the first run_turn; a session reopened from sessions.json does not announce.
        session._announce_start = created
        self._sessions[key] = session
        return session

    session = open

    def _check_index_sessions_dir(self) -> None:
        # Trigger: session.store moves the transcripts, and the memory index was opened without
        # sessions_dir. Why: the "sessions" source would index an empty folder and never find this
        # runner's conversations. Outcome: a warning saying what to pass.
        found = getattr(self.memory_index, "sessions_dir", None)
        if not isinstance(found, (str, os.PathLike)) or "sessions" not in self.agent.memory_search.sources:
            return
        if os.path.realpath(found) != os.path.realpath(self.store.sessions_dir):
            log.warning(
                "the memory index reads transcripts from %s but this runner writes them to %s "
                "(session.store); open the index with sessions_dir=runner.store.sessions_dir",
                found,
                self.store.sessions_dir,
            )


class Session:
    """One conversation: its transcript, its sessions.json entry, its context in memory."""

    def __init__(self, runner: SessionRunner, key: str, transcript: Transcript, entry: SessionEntry) -> None:
        self.runner = runner
        self.key = key
        self.context_window = resolve_context_window(runner.agent, runner.model)
        self.tools = SessionTools(runner, key, self._queue_event)
        self._events: list[Event] = []
        self._queued: list[Event] = []
        self._busy = False
        self._announce_start = False  # session:start is due at the first turn (set by SessionRunner.open)
        self.compactions = 0  # compactions this object ran (the gate tells "compacted during the flush")
        self._schemas_counted: tuple[str, int] = ("", 0)  # the tool schemas' JSON and its token count
        self.attach(transcript, entry)

    def attach(self, transcript: Transcript, entry: SessionEntry) -> None:
        """Point this session at ``transcript`` / ``entry`` (used on open and when a rotation starts a new
        transcript): the context, token caches and system prompt are rebuilt from them."""
        self.transcript = transcript
        self.entry = entry
        self.counter = TokenCounter()
        self.context, self._stale = context_state(transcript)
        self.system_prompt = self.tools.system_prompt()

    # ---------------------------------------------------------------- public API

    async def run_turn(self, text: str, on_partial: PartialCallback | None = None) -> TurnResult:
        """Run one user turn; the reply is None when the model answered NO_REPLY.

        With ``on_partial`` (sync or async, called with each new piece of text) the reply is streamed
        when the model can stream; nothing of a NO_REPLY answer is ever passed on, and the flush and
        compaction calls are never streamed."""
        if self._busy:
            raise UsageError(f"session {self.key} is already running a turn; await it first")
        self._busy, self._events = True, []
        try:
            if self._announce_start:
                self._announce_start = False
                from sessionmem.session.lifecycle import announce_created

                await announce_created(self)
            outcome = await self._before_turn(text)
            if isinstance(outcome, TurnResult):  # the message was a command (/new, /compact, ...)
                return outcome
            text = outcome
            await self._preflight(Message.user(text))
            state = await self._turn(Message.user(text), kind="turn", on_partial=on_partial)
            await self._compact_if_over_threshold()
            reply = deliverable_reply(state.last.content if state.last else None)
            await self._emit(
                TurnEvent(
                    session_key=self.key,
                    reply=reply,
                    usage=state.usage,
                    model_calls=state.model_calls,
                    stopped=state.stopped,
                )
            )
            return TurnResult(reply, tuple(state.messages), state.usage, tuple(self._events), state.stopped)
        finally:
            self._busy = False

    def run_turn_sync(self, text: str, on_partial: PartialCallback | None = None) -> TurnResult:
        """Blocking :meth:`run_turn`; refuses to run inside an event loop (use ``await run_turn``)."""
        _check_no_running_loop("run_turn_sync")
        return asyncio.run(self.run_turn(text, on_partial))

    def compact_sync(self, instructions: str | None = None) -> CompactionResult:
        """Blocking :meth:`compact`; refuses to run inside an event loop."""
        _check_no_running_loop("compact_sync")
        return asyncio.run(self.compact(instructions))

    async def compact(self, instructions: str | None = None) -> CompactionResult:
        """Manual ``/compact [instructions]``, through the gate (flushes first if this cycle had none)."""
        return await compact_through_gate(self, "manual", instructions)

    def projection(self, pending: Sequence[Message] = ()) -> Projection:
        """The projected prompt of the next ordinary call (with ``pending``): the one measure the flush
        and compaction thresholds, ``/status``, compaction figures and the demo's timeline use."""
        projection = project_tokens(
            self.context,
            self.counter,
            pending=pending,
            system_prompt=self.system_prompt,
            stale_entry_ids=self._stale,
        )
        if projection.fresh:
            return projection
        # Trigger: no fresh reported usage (a new session, or right after a compaction). Why: a reported
        # prompt includes the tool schemas sent with every call; counting the messages alone would fall
        # short by them, and the next reported figure would jump by that much. Outcome: the schemas of an
        # ordinary turn are counted too.
        schemas = self._schema_tokens()
        return Projection(projection.tokens + schemas, None, projection.counted + schemas)

    def _schema_tokens(self) -> int:
        schemas = [tool.schema() for tool in self.tools.for_turn("turn").values()]
        if not schemas:
            return 0
        text = orjson.dumps(schemas, option=orjson.OPT_SORT_KEYS).decode()
        if text != self._schemas_counted[0]:
            self._schemas_counted = (text, count_tokens(text))
        return self._schemas_counted[1]

    # ---------------------------------------------------------------- the turn

    async def _before_turn(self, text: str) -> TurnResult | str:
        """Slash commands and stale-session rotation (sessionmem.session.commands), when installed."""
        try:
            from sessionmem.session import commands, lifecycle  # noqa: F401  (lifecycle: rotation)
        except ImportError:
            return text
        return await commands.before_turn(self, text)

    async def _preflight(self, pending: Message) -> None:
        projected = self.projection([pending]).tokens
        cfg = self.runner.agent.compaction
        guards = self._guards()
        may_compact = cfg.enabled and not guards["heartbeat"] and not guards["provider_owns_compaction"]
        if may_compact and projected >= compaction_threshold(self.context_window, cfg) > 0:
            await compact_through_gate(self, "threshold")  # the gate flushes first
            return
        decision = should_flush(
            projected,
            self.context_window,
            cfg,
            self._entry_dict(),
            self.transcript.bytes_since_compaction(),
            **guards,
        )
        if decision.skipped:
            await self._emit(FlushSkippedEvent(session_key=self.key, reason=decision.reason))
        elif decision.run:
            await run_flush(self, decision.reason, projected)

    async def _turn(
        self,
        user: Message,
        *,
        kind: TurnKind,
        system_extra: str = "",
        on_partial: PartialCallback | None = None,
    ) -> _TurnState:
        # Trigger: the first call overflows and the gate flushes and compacts. Why: the prompt must stay
        # the last thing the model reads, after the flush's messages. Outcome: it is appended only once
        # the model accepted it, so the transcript reads flush, compaction, prompt, answer.
        state = _TurnState(kind, pending=user, on_partial=on_partial if kind == "turn" else None)
        tools = self.tools.for_turn(kind)
        limit = max(1, self.runner.agent.max_tool_iterations)
        if kind == "flush":  # housekeeping: a few reads and one append, never a long tool loop
            limit = min(limit, FLUSH_MAX_TOOL_ITERATIONS)
        for _ in range(limit):
            reply = await self._call_model(kind, tools, system_extra, state)
            if state.pending is not None:
                self._append(state.pending, state)
                state.pending = None
            self._append(
                reply.message,
                state,
                provider=reply.provider,
                model=reply.model,
                stop_reason=reply.stop_reason,
            )
            state.last = reply.message
            last_id = self.context[-1][0]
            if state.trim_to is not None and last_id is not None:  # usage of the trimmed prompt only
                self._stale.add(last_id)
            if not reply.message.tool_calls:
                break
            for call in reply.message.tool_calls:
                outcome = await dispatch(tools, call)
                self._append(Message.tool(call, outcome.content, is_error=outcome.is_error), state)
                await self._emit(
                    ToolCallEvent(
                        session_key=self.key,
                        turn_kind=kind,
                        name=call.name,
                        arguments=dict(call.arguments),
                        is_error=outcome.is_error,
                        result=outcome.content[:500],
                    )
                )
                await self._drain_queued()
        usage_source = state.last if state.trim_to is None else None
        if state.last is not None and state.last.tool_calls:  # the model kept calling tools: stop it
            state.stopped = "max_tool_iterations"
            state.last = Message.assistant(self._stop_message())
            self._append(state.last, state)
        self._record_usage(usage_source)
        return state

    async def _call_model(
        self, kind: TurnKind, tools: dict[str, Tool], system_extra: str, state: _TurnState
    ) -> Any:
        """One model call. On a context overflow: a flush first retries on the newest half of the context
        (verbatim notes beat a summary); otherwise, or if that fails too, compact through the gate and
        retry once. A second overflow after compacting is raised."""
        for _ in range(3):
            request = self._request(kind, tools, system_extra, state)
            try:
                reply = await self._complete(request, state)
            except ContextWindowExceeded as exc:
                await self._recover_overflow(exc, kind, state)
                continue
            state.model_calls += 1
            state.usage = state.usage + (reply.message.usage or Usage())
            return reply
        raise ContextWindowExceeded("context overflow recovery gave up after three attempts")

    async def _complete(self, request: ModelRequest, state: _TurnState) -> ModelReply:
        model = self.runner.model
        if state.on_partial is not None and supports_streaming(model):
            return await stream_reply(model, request, state.on_partial)
        return await model.complete(request)

    async def _recover_overflow(self, exc: ContextWindowExceeded, kind: TurnKind, state: _TurnState) -> None:
        if not self.runner.agent.compaction.enabled:
            raise exc
        if kind == "flush" and state.trim_to is None and not state.compacted:
            state.trim_to = max(1, self.counter.count_all(self.context) // 2)
            return
        if state.compacted:
            raise ContextWindowExceeded(
                f"context overflow recovery failed after one compact-and-retry attempt: {exc}",
                status_code=exc.status_code,
            ) from exc
        # In a flush the cycle is already marked flushed, so the gate goes straight to compacting.
        result = await compact_through_gate(self, "overflow")
        if not result.ok:
            raise ContextWindowExceeded(
                f"context window exceeded and compaction failed ({result.error}): {exc}",
                status_code=exc.status_code,
            ) from exc
        state.compacted, state.trim_to = True, None

    def _request(
        self, kind: TurnKind, tools: dict[str, Tool], system_extra: str, state: _TurnState
    ) -> ModelRequest:
        system = self.system_prompt + (f"\n\n{system_extra}" if system_extra else "")
        trim_to = state.trim_to
        context = self.context if trim_to is None else recent_within(self.context, self.counter, trim_to)
        pending = [state.pending] if state.pending is not None else []
        messages = repair_tool_pairs([*(m for _, m in context), *pending])
        return ModelRequest(
            messages=(Message.system(system), *messages),
            tools=tuple(t.schema() for t in tools.values()),
            purpose=kind,
            metadata={"session_key": self.key, "turn_kind": kind},
        )

    def _append(self, message: Message, state: _TurnState | None = None, **meta: Any) -> None:
        if state is not None and state.kind == "flush":  # marked so the /new memory file leaves it out
            meta.setdefault("provenance", {"kind": FLUSH_PROVENANCE})
        entry_id = self.transcript.append_message(message, **meta)
        notify = getattr(self.runner.memory_index, "notify_transcript_appended", None)
        if callable(notify):  # cheap: the index decides later (debounced) whether the file grew enough
            notify(self.transcript.path)
        self.context.append((entry_id, message))
        if state is not None:
            state.messages.append(message)

    def _record_usage(self, last: Message | None) -> None:
        if last is None or last.usage is None:
            return
        fields = usage_fields(last.usage, self.context_window, self.runner.model, self.key)
        self.entry = self.runner.store.patch(self.key, **fields)

    def _stop_message(self) -> str:
        limit = self.runner.agent.max_tool_iterations
        return f"Stopped after {limit} tool iterations without a final answer (maxToolIterations = {limit})."

    # ---------------------------------------------------------------- flush and compaction

    async def _compact_if_over_threshold(self) -> None:
        # Trigger: a heartbeat turn pushed the context over the threshold. Why: the gate may not flush in
        # a heartbeat run, so compacting here would summarise the cycle's real turns unsaved.
        # Outcome: left as is; the next real turn's preflight flushes, then compacts.
        cfg = self.runner.agent.compaction
        guards = self._guards()
        if cfg.enabled and not guards["heartbeat"] and not guards["provider_owns_compaction"]:
            threshold = compaction_threshold(self.context_window, cfg)
            if threshold > 0 and self.projection().tokens >= threshold:
                await compact_through_gate(self, "threshold")

    # ---------------------------------------------------------------- helpers

    def _guards(self) -> dict[str, bool]:
        return {
            "heartbeat": self.runner.heartbeat,
            "writable": workspace_writable(self.runner.workspace),
            "provider_owns_compaction": provider_owns_compaction(self.runner.agent, self.runner.model),
        }

    def _entry_dict(self) -> dict[str, Any]:
        return self.entry.to_json_dict()

    def _queue_event(self, event: Event) -> None:
        self._queued.append(event)

    async def _drain_queued(self) -> None:
        queued, self._queued = self._queued, []
        for event in queued:
            await self._emit(event)

    async def _emit(self, event: Event) -> None:
        self._events.append(event)
        await deliver(self.runner.on_event, event)
        if event.kind in ("flush", "compaction"):  # memory:flush / compaction:after hooks
            from sessionmem.session.lifecycle import relay_event

            await relay_event(self, event)


def _check_no_running_loop(name: str) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise UsageError(f"{name}() cannot be called from a running event loop; await the async method instead")


__all__ = [
    "CompactionResult",
    "Session",
    "SessionRunner",
    "TurnResult",
    "compact_through_gate",
    "flush_if_unflushed",
]
