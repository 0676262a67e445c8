"""The model turn: call the model with the prompt, dispatch its tool calls, until it answers (bounded).

:func:`run_model_turn` serves ordinary turns (kind ``turn``) and the silent flush (kind ``flush``): same
loop, their own prompts and tools. The prompt is written to the transcript once the model accepted it
(after any overflow recovery), so the transcript reads flush, compaction, prompt, answer. With
``on_partial`` the reply of an ordinary turn is streamed as it is written.

An ordinary turn may also offer the caller's own tools (``client_tools``,
:class:`~sessionmem.tools.client.ClientTool`): when the model calls one, the agent's own calls of the same
assistant message run here as always, and the turn ends with the caller's calls in ``client_calls`` (it is
suspended: :mod:`~sessionmem.session.turn.client_calls` continues it with their results).

On a provider context overflow the turn reports it instead of raising: :func:`advance_model_turn` returns
an :class:`Overflow` and the turn stays where it was (the prompt not yet written, the tool loop at the same
step). Its driver, the gate (:func:`~sessionmem.session.turn.gate.model_turn_with_room`), makes room
(compaction through the gate: the first time keeping at most a quarter of the context, the second time
nothing) and advances the turn again; when it cannot, it raises. A flush first retries on the newest half
of the context, here, without compacting (verbatim notes beat a summary). This module never imports the
gate: the gate drives model turns, and runs its flush turns through this module.

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

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sessionmem.errors import ContextWindowExceeded, ModelError
from sessionmem.messages import Message, ToolCall, Usage, flush_provenance
from sessionmem.model.base import ModelReply, ModelRequest, supports_streaming
from sessionmem.model.noreply import deliverable_reply, silent_tokens
from sessionmem.model.reasoning import strip_reasoning
from sessionmem.model.routing import model_for
from sessionmem.session.turn.announce import emit, emit_queued
from sessionmem.session.turn.compaction import recent_within, repair_tool_pairs
from sessionmem.session.turn.events import ToolCallEvent
from sessionmem.session.turn.projection import ContextItem, usage_fields
from sessionmem.session.turn.state import SessionState, TurnKind
from sessionmem.session.turn.streaming import PartialCallback, stream_reply
from sessionmem.tools.client import ClientTool
from sessionmem.tools.define import Tool, dispatch

FLUSH_MAX_TOOL_ITERATIONS = 6


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
    system_extra: str = ""  # appended to the session's system prompt (the flush's instructions)
    tools: dict[str, Tool] = field(default_factory=dict)  # what the model may call in this turn
    client_tools: dict[str, ClientTool] = field(default_factory=dict)  # the caller's, run by the caller
    client_calls: tuple[ToolCall, ...] = ()  # the caller's tools the model called: the turn is suspended
    limit: int = 1  # model calls of the tool loop at most
    steps: int = 0  # model calls of the tool loop answered so far
    ready: ModelReply | None = None  # the answer to the first call, already had (early_call): not sent
    foreign: Message | None = None  # that answer: its usage describes a prompt the transcript does not hold

    @property
    def reply(self) -> str | None:
        """What the user receives: None when the model stayed silent (or for a flush)."""
        if self.kind != "turn" or self.last is None:
            return None
        return deliverable_reply(self.last.content, self.silent_tokens)

    def made_room(self) -> None:
        """The driver compacted the context after an overflow: the next call sends the context whole."""
        self.rooms_made += 1
        self.trim_to = None


@dataclass(frozen=True, slots=True)
class Overflow:
    """A model call of the turn did not fit the model's window (``error``, as the provider said it). The
    turn is where it was; it goes on from there once its driver has made room."""

    error: ContextWindowExceeded


def start_model_turn(
    state: SessionState,
    prompt: Message | None,
    *,
    kind: TurnKind,
    system_extra: str = "",
    on_partial: PartialCallback | None = None,
    client_tools: dict[str, ClientTool] | None = None,
) -> ModelTurn:
    """A model turn of ``prompt``, ready to run (:func:`advance_model_turn`); nothing is sent yet. No
    ``prompt``: the turn goes on from the context as it is (a suspended turn given its tool results)."""
    agent = state.runner.agent
    limit = max(1, agent.max_tool_iterations)
    if kind == "flush":  # housekeeping: a few reads and one append, never a long tool loop
        limit = min(limit, FLUSH_MAX_TOOL_ITERATIONS)
    turn = ModelTurn(
        kind,
        pending=prompt,
        on_partial=on_partial if kind == "turn" else None,
        silent_tokens=silent_tokens(agent.silent_reply_token, heartbeat=state.runner.heartbeat),
        system_extra=system_extra,
        tools=state.tools.for_turn(kind),
        client_tools=dict(client_tools or {}) if kind == "turn" else {},
        limit=limit,
    )
    if kind == "flush" and prompt is not None and state.projection([prompt]).tokens > state.context_window:
        # Trigger: the flush an overflow's compaction runs first, the context known to be over the
        # window (the provider just stated it). Why: sending it whole would overflow once more.
        # Outcome: it starts on the newest half, as it would after that overflow.
        turn.trim_to = _flush_trim(state)
    return turn


async def advance_model_turn(state: SessionState, turn: ModelTurn) -> Overflow | None:
    """Run ``turn`` through the model and its tools until it ends (None; usage is recorded in the store
    then) or a model call overflows the window (the :class:`Overflow`; call again once room is made)."""
    while turn.steps < turn.limit:
        try:
            reply = await _call_model(state, turn)
        except Exception:
            abandon_model_turn(state, turn)
            raise
        if isinstance(reply, Overflow):
            return reply
        turn.steps += 1
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
        if (turn.trim_to is not None or reply.message is turn.foreign) and last_id is not None:
            state.stale.add(last_id)  # usage of the trimmed prompt, or of the context before memory work
        if not reply.message.tool_calls:
            break
        theirs = tuple(call for call in reply.message.tool_calls if call.name in turn.client_tools)
        for call in reply.message.tool_calls:
            if call.name in turn.client_tools:  # the caller runs it
                continue
            outcome = await dispatch(turn.tools, call)
            append_message(state, Message.tool(call, outcome.content, is_error=outcome.is_error), turn)
            await emit(
                state,
                ToolCallEvent(
                    session_key=state.key,
                    turn_kind=turn.kind,
                    name=call.name,
                    arguments=dict(call.arguments),
                    is_error=outcome.is_error,
                    result=outcome.content[:500],
                ),
            )
            await emit_queued(state)
        if theirs:  # suspended: the caller runs its tools, then the turn goes on (client_calls)
            turn.client_calls = theirs
            break
    usage_source = turn.last if turn.trim_to is None and turn.last is not turn.foreign else None
    if turn.last is not None and turn.last.tool_calls and not turn.client_calls:  # kept calling tools
        turn.stopped = "max_tool_iterations"
        turn.last = Message.assistant(stop_message(state.runner.agent.max_tool_iterations))
        append_message(state, turn.last, turn)
    record_usage(state, usage_source)
    return None


def append_message(state: SessionState, message: Message, turn: ModelTurn | None = None, **meta: Any) -> None:
    """Write ``message`` to the transcript and the context (and to ``turn``'s messages)."""
    if turn is not None and turn.kind == "flush":  # marked so the /new memory file leaves it out, with
        unsaved = bool(state.tools.flush_write_failures)  # its cycle (DESIGN 16), and whether a write
        meta.setdefault("provenance", flush_provenance(state.flushing, write_failed=unsaved))  # failed
    entry_id = state.transcript.append_message(message, **meta)
    index, path = state.runner.memory_index, state.transcript.path
    where = path if path is not None else getattr(state.transcript, "name", None)  # a file, or rows' name
    if (
        index is not None and where is not None
    ):  # cheap: the index decides later (debounced) if it grew enough
        index.notify_transcript_appended(where)
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


def abandon_model_turn(state: SessionState, turn: ModelTurn) -> None:
    """``turn`` failed (its model call, or its driver could not make room): the user's message of an
    ordinary turn goes into the transcript all the same, unless it alone does not fit (``prompt_unfit``;
    see the module docstring)."""
    if turn.kind == "turn" and turn.pending is not None and not turn.prompt_unfit:
        append_message(state, turn.pending, turn)
    turn.pending = None


async def _call_model(state: SessionState, turn: ModelTurn) -> ModelReply | Overflow:
    """One model call; an overflow is reported, after a flush's retry on the newest half (see the module
    docstring)."""
    while True:
        if turn.ready is not None:  # answered before the turn held the session (early_call)
            reply, turn.ready = turn.ready, None
            turn.foreign = reply.message
            break
        request = request_for(state, turn)
        try:
            reply = await complete(state, request, turn)
        except ContextWindowExceeded as exc:
            if _retry_trimmed(state, turn, exc):
                continue
            return Overflow(exc)
        break
    turn.rooms_made = 0  # the next call of the tool loop starts with a clean slate
    turn.model_calls += 1
    turn.usage = turn.usage + (reply.message.usage or Usage())
    if turn.kind == "turn" and not strip_reasoning(reply.message.content) and not reply.message.tool_calls:
        raise ModelError(
            f"model {reply.model or state.runner.model.name} returned an empty answer (no visible text "
            "and no tool call); only NO_REPLY means silence"
        )
    return reply


async def complete(state: SessionState, request: ModelRequest, turn: ModelTurn) -> ModelReply:
    """``request`` sent to the model of ``turn``'s kind, streamed to ``turn.on_partial`` when it can."""
    model = model_for(state.runner.model, state.runner.agent, turn.kind)  # a flush may have its own
    if turn.on_partial is not None and supports_streaming(model):
        return await stream_reply(model, request, turn.on_partial, turn.silent_tokens)
    return await model.complete(request)


def _retry_trimmed(state: SessionState, turn: ModelTurn, exc: ContextWindowExceeded) -> bool:
    """After an overflow: learn the window the provider stated; True when a flush retries on the newest
    half of the context (before any compaction of this call) instead of reporting the overflow."""
    # The provider said how large the model's window really is: work within it from now on (the
    # compaction the driver runs already does). Only the session's own model teaches it; a flush model
    # may differ.
    if (
        exc.window is not None
        and model_for(state.runner.model, state.runner.agent, turn.kind) is state.runner.model
    ):
        state.learn_context_window(exc.window)
    if not state.runner.agent.compaction.enabled:
        return False
    if turn.kind == "flush" and turn.trim_to is None and not turn.rooms_made:
        turn.trim_to = _flush_trim(state)
        return True
    return False


def _flush_trim(state: SessionState) -> int:
    """How much of the context a flush that does not fit sends: the newest half."""
    return max(1, state.counter.count_all(state.context) // 2)


def request_for(
    state: SessionState,
    turn: ModelTurn,
    *,
    context: Sequence[ContextItem] | None = None,
    system_prompt: str | None = None,
) -> ModelRequest:
    """The request of ``turn``'s next model call: the session's system prompt and context (or the given
    ones: the context as it stood at the last reply, early_call), the pending prompt, the turn's tools."""
    system = state.system_prompt if system_prompt is None else system_prompt
    system += f"\n\n{turn.system_extra}" if turn.system_extra else ""
    if context is None:
        context = state.context
    trim_to = turn.trim_to
    if trim_to is not None:
        context = recent_within(context, state.counter, trim_to)
    pending = [turn.pending] if turn.pending is not None else []
    messages = repair_tool_pairs([*(m for _, m in context), *pending])
    return ModelRequest(
        messages=(Message.system(system), *messages),
        tools=(
            *(t.schema() for t in turn.tools.values()),
            *(t.schema() for t in turn.client_tools.values()),
        ),
        purpose=turn.kind,
        metadata={"session_key": state.key, "turn_kind": turn.kind},
    )
