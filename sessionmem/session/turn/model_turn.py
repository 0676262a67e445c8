"""The model turn: call the model with the prompt, dispatch its tool calls, until it answers (bounded).

:func:`run_model_turn` serves ordinary turns (kind ``turn``) and the silent flush (kind ``flush``): same
loop, their own prompts and tools. The prompt is written to the transcript once the model accepted it
(after any overflow recovery), so the transcript reads flush, compaction, prompt, answer. With
``on_partial`` the reply of an ordinary turn is streamed as it is written.

On a provider context overflow the turn asks its caller to make room (``make_room(attempt)``: compaction
through the gate) and retries: the first time the compaction keeps at most a quarter of the context, the
second time nothing (everything is folded into the summary); a flush first retries on the newest half of
the context (verbatim notes beat a summary). An overflow after that, or with nothing left to compact (the
prompt alone is over the window), is raised. The step never imports the gate: the gate runs flush turns
through this module.

Only the silent token is silence (``NO_REPLY`` or ``silentReplyToken``, and ``HEARTBEAT_OK`` in heartbeat
runs: :mod:`sessionmem.model.noreply`): an answer with no visible text and no tool call (a stream that
ended without a chunk, or a reasoning block alone) is a :class:`~sessionmem.errors.ModelError` the caller
sees.
A failed model call does not lose the user's message: it is written to the transcript before the error is
raised, so the next turn sends it again, followed by the new message. The one exception is a message that
does not fit the model's window even with everything else compacted away: it is not kept (it would make
every later turn overflow), and the error says so.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from sessionmem.errors import ContextWindowExceeded, ModelError
from sessionmem.messages import Message, Usage, flush_provenance
from sessionmem.model.base import ModelReply, ModelRequest, supports_streaming
from sessionmem.model.noreply import deliverable_reply, silent_tokens
from sessionmem.model.reasoning import strip_reasoning
from sessionmem.model.routing import model_for
from sessionmem.session.turn.announce import emit, emit_queued
from sessionmem.session.turn.compaction import recent_within, repair_tool_pairs
from sessionmem.session.turn.events import CompactionResult, ToolCallEvent
from sessionmem.session.turn.projection import usage_fields
from sessionmem.session.turn.state import SessionState, TurnKind
from sessionmem.session.turn.streaming import PartialCallback, stream_reply
from sessionmem.tools.define import Tool, dispatch

FLUSH_MAX_TOOL_ITERATIONS = 6
MAX_ROOM_ATTEMPTS = 2  # compactions per model call after an overflow: keep a quarter, then keep nothing

MakeRoom = Callable[[int], Awaitable[CompactionResult]]  # the attempt number (1, 2) -> the compaction


@dataclass
class ModelTurn:
    """What one model turn did, and where its overflow recovery stands."""

    kind: TurnKind
    messages: list[Message] = field(default_factory=list)  # everything appended, in order
    usage: Usage = field(default_factory=Usage)
    last: Message | None = None  # the last assistant message
    model_calls: int = 0
    stopped: str | None = None  # "max_tool_iterations" when the tool loop was cut off
    trim_to: int | None = None  # send only the newest messages within this many tokens (flush overflow)
    rooms_made: int = 0  # compactions this model call made after overflows
    prompt_unfit: bool = False  # the prompt alone is over the window: it is not kept on failure
    pending: Message | None = None  # the turn's prompt, written once the model has accepted it
    on_partial: PartialCallback | None = None  # stream the reply to the caller (ordinary turns only)
    silent_tokens: tuple[str, ...] = ()  # the answers that mean silence (noreply.silent_tokens)

    @property
    def reply(self) -> str | None:
        """What the user receives: None when the model stayed silent (or for a flush)."""
        if self.kind != "turn" or self.last is None:
            return None
        return deliverable_reply(self.last.content, self.silent_tokens)


async def run_model_turn(
    state: SessionState,
    prompt: Message,
    *,
    kind: TurnKind,
    make_room: MakeRoom,
    system_extra: str = "",
    on_partial: PartialCallback | None = None,
) -> ModelTurn:
    """Run ``prompt`` through the model and its tools; usage is recorded in the store at the end."""
    agent = state.runner.agent
    turn = ModelTurn(
        kind,
        pending=prompt,
        on_partial=on_partial if kind == "turn" else None,
        silent_tokens=silent_tokens(agent.silent_reply_token, heartbeat=state.runner.heartbeat),
    )
    tools = state.tools.for_turn(kind)
    limit = max(1, state.runner.agent.max_tool_iterations)
    if kind == "flush":  # housekeeping: a few reads and one append, never a long tool loop
        limit = min(limit, FLUSH_MAX_TOOL_ITERATIONS)
        if state.projection([prompt]).tokens > state.context_window:
            # Trigger: the flush an overflow's compaction runs first, the context known to be over the
            # window (the provider just stated it). Why: sending it whole would overflow once more.
            # Outcome: it starts on the newest half, as it would after that overflow.
            turn.trim_to = _flush_trim(state)
    for _ in range(limit):
        try:
            reply = await _call_model(state, turn, tools, system_extra, make_room)
        except Exception:
            _keep_failed_prompt(state, turn)
            raise
        if turn.pending is not None:
            append_message(state, turn.pending, turn)
            turn.pending = None
        append_message(
            state,
            reply.message,
            turn,
            provider=reply.provider,
            model=reply.model,
            stop_reason=reply.stop_reason,
        )
        turn.last = reply.message
        last_id = state.context[-1][0]
        if turn.trim_to is not None and last_id is not None:  # usage of the trimmed prompt only
            state.stale.add(last_id)
        if not reply.message.tool_calls:
            break
        for call in reply.message.tool_calls:
            outcome = await dispatch(tools, call)
            append_message(state, Message.tool(call, outcome.content, is_error=outcome.is_error), turn)
            await emit(
                state,
                ToolCallEvent(
                    session_key=state.key,
                    turn_kind=kind,
                    name=call.name,
                    arguments=dict(call.arguments),
                    is_error=outcome.is_error,
                    result=outcome.content[:500],
                ),
            )
            await emit_queued(state)
    usage_source = turn.last if turn.trim_to is None else None
    if turn.last is not None and turn.last.tool_calls:  # the model kept calling tools: stop it
        turn.stopped = "max_tool_iterations"
        turn.last = Message.assistant(stop_message(state.runner.agent.max_tool_iterations))
        append_message(state, turn.last, turn)
    record_usage(state, usage_source)
    return turn


def append_message(state: SessionState, message: Message, turn: ModelTurn | None = None, **meta: Any) -> None:
    """Write ``message`` to the transcript and the context (and to ``turn``'s messages)."""
    if turn is not None and turn.kind == "flush":  # marked so the /new memory file leaves it out, with
        unsaved = bool(state.tools.flush_write_failures)  # its cycle (DESIGN 16), and whether a write
        meta.setdefault("provenance", flush_provenance(state.flushing, write_failed=unsaved))  # failed
    entry_id = state.transcript.append_message(message, **meta)
    index, path = state.runner.memory_index, state.transcript.path
    if index is not None and path is not None:  # cheap: the index decides later (debounced) if it grew enough
        index.notify_transcript_appended(path)
    state.context.append((entry_id, message))
    if turn is not None:
        turn.messages.append(message)


def record_usage(state: SessionState, last: Message | None) -> None:
    """The last call's usage into the session's store entry (``totalTokens`` and friends)."""
    if last is None or last.usage is None:
        return
    fields = usage_fields(last.usage, state.context_window, state.runner.model, state.key)
    known = state.entry
    stored = state.runner.store.update(state.key, lambda current: (current or known).touched(**fields))
    assert stored is not None
    state.entry = stored


def stop_message(limit: int) -> str:
    """What the assistant says when the tool loop was cut off."""
    return f"Stopped after {limit} tool iterations without a final answer (maxToolIterations = {limit})."


def _keep_failed_prompt(state: SessionState, turn: ModelTurn) -> None:
    """The user's message of a failed ordinary turn, into the transcript (see the module docstring)."""
    if turn.kind == "turn" and turn.pending is not None and not turn.prompt_unfit:
        append_message(state, turn.pending, turn)
    turn.pending = None


async def _call_model(
    state: SessionState, turn: ModelTurn, tools: dict[str, Tool], system_extra: str, make_room: MakeRoom
) -> ModelReply:
    """One model call, recovering from context overflows (see the module docstring)."""
    turn.rooms_made = 0
    while True:
        request = _request(state, turn, tools, system_extra)
        try:
            reply = await _complete(state, request, turn)
        except ContextWindowExceeded as exc:
            await _recover_overflow(state, turn, exc, make_room)
            continue
        turn.model_calls += 1
        turn.usage = turn.usage + (reply.message.usage or Usage())
        if (
            turn.kind == "turn"
            and not strip_reasoning(reply.message.content)
            and not reply.message.tool_calls
        ):
            raise ModelError(
                f"model {reply.model or state.runner.model.name} returned an empty answer (no visible text "
                "and no tool call); only NO_REPLY means silence"
            )
        return reply


async def _complete(state: SessionState, request: ModelRequest, turn: ModelTurn) -> ModelReply:
    model = model_for(state.runner.model, state.runner.agent, turn.kind)  # a flush may have its own
    if turn.on_partial is not None and supports_streaming(model):
        return await stream_reply(model, request, turn.on_partial, turn.silent_tokens)
    return await model.complete(request)


async def _recover_overflow(
    state: SessionState, turn: ModelTurn, exc: ContextWindowExceeded, make_room: MakeRoom
) -> None:
    # The provider said how large the model's window really is: work within it from now on (the
    # compaction below already does). Only the session's own model teaches it; a flush model may differ.
    if (
        exc.window is not None
        and model_for(state.runner.model, state.runner.agent, turn.kind) is state.runner.model
    ):
        state.learn_context_window(exc.window)
    if not state.runner.agent.compaction.enabled:
        raise exc
    if turn.kind == "flush" and turn.trim_to is None and not turn.rooms_made:
        turn.trim_to = _flush_trim(state)
        return
    if turn.rooms_made >= MAX_ROOM_ATTEMPTS:
        turn.prompt_unfit = True
        raise ContextWindowExceeded(
            "the prompt does not fit the model's context window even with the whole conversation compacted "
            f"into its summary: {exc}",
            status_code=exc.status_code,
        ) from exc
    turn.rooms_made += 1
    # In a flush, state.flushing keeps the gate from starting a second flush: it goes straight to compacting.
    result = await make_room(turn.rooms_made)
    if result.error == "nothing to compact":
        turn.prompt_unfit = True
        raise ContextWindowExceeded(
            f"the message does not fit the model's context window, and nothing is left to compact: {exc}",
            status_code=exc.status_code,
        ) from exc
    if not result.ok:
        raise ContextWindowExceeded(
            f"context window exceeded and compaction failed ({result.error}): {exc}",
            status_code=exc.status_code,
        ) from exc
    turn.trim_to = None


def _flush_trim(state: SessionState) -> int:
    """How much of the context a flush that does not fit sends: the newest half."""
    return max(1, state.counter.count_all(state.context) // 2)


def _request(state: SessionState, turn: ModelTurn, tools: dict[str, Tool], system_extra: str) -> ModelRequest:
    system = state.system_prompt + (f"\n\n{system_extra}" if system_extra else "")
    trim_to = turn.trim_to
    context = state.context if trim_to is None else recent_within(state.context, state.counter, trim_to)
    pending = [turn.pending] if turn.pending is not None else []
    messages = repair_tool_pairs([*(m for _, m in context), *pending])
    return ModelRequest(
        messages=(Message.system(system), *messages),
        tools=tuple(t.schema() for t in tools.values()),
        purpose=turn.kind,
        metadata={"session_key": state.key, "turn_kind": turn.kind},
    )
