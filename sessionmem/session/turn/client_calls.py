"""A turn suspended on the caller's tools, and how it goes on once the caller has run them.

A turn given client tools (:class:`~sessionmem.tools.client.ClientTool`) ends suspended when the model
calls one: the transcript holds the assistant message with all its calls and the results of the agent's
own calls among them (run server-side as always); the caller gets its calls (``TurnResult.tool_calls``).
:func:`continue_turn` takes the caller's results: they are appended to the transcript and the model is
called again (:func:`~sessionmem.session.turn.gate.resume_turn`: no rotation, no slash command, no
preflight flush or compaction, since no new user turn began), until it answers or calls the caller's tools
again.

What is pending is read from the context, never kept apart (:func:`pending_calls`): the calls of the last
assistant message, when only tool results follow it, that have no result yet. So a suspended turn survives
its session being dropped from memory, and another runner or process may continue it. Results must answer
exactly the pending calls (:class:`~sessionmem.errors.ToolResultsMismatch` otherwise, nothing written).
Results that answer the caller's calls already answered, with nothing after them, are a retry (the
continuation's model call failed, e.g. the upstream's rate limit, after the results were written): the
model is called again and nothing is written twice.

A new user turn while calls are pending abandons them: the model is sent the assistant message without
its unanswered calls (:func:`~sessionmem.session.turn.compaction.repair_tool_pairs`).
"""

from __future__ import annotations

from collections.abc import Sequence

from sessionmem.errors import ToolResultsMismatch, UsageError
from sessionmem.messages import Message, ToolCall
from sessionmem.session.turn.gate import resume_turn
from sessionmem.session.turn.model_turn import ModelTurn, append_message, start_model_turn
from sessionmem.session.turn.projection import ContextItem
from sessionmem.session.turn.state import SessionState
from sessionmem.session.turn.streaming import PartialCallback
from sessionmem.tools.client import ClientTool, ToolResult

MAX_IDS_SHOWN = 8


def last_calls(context: Sequence[ContextItem]) -> tuple[tuple[ToolCall, ...], tuple[Message, ...]] | None:
    """The context's last assistant message with tool calls when only tool results follow it, and those
    results; None otherwise (the turn ended, or a user message came after)."""
    results: list[Message] = []
    for _, message in reversed(context):
        if message.role == "tool":
            results.append(message)
            continue
        if message.role == "assistant" and message.tool_calls:
            return message.tool_calls, tuple(reversed(results))
        return None
    return None


def pending_calls(context: Sequence[ContextItem]) -> tuple[ToolCall, ...]:
    """The tool calls waiting for the caller's results (see the module docstring)."""
    found = last_calls(context)
    if found is None:
        return ()
    calls, results = found
    answered = {m.tool_call_id for m in results}
    return tuple(call for call in calls if call.id not in answered)


def result_messages(state: SessionState, results: Sequence[ToolResult]) -> list[Message]:
    """The tool messages ``results`` add to the transcript: none for a retry; raises
    :class:`~sessionmem.errors.ToolResultsMismatch` when they do not answer the pending calls."""
    for result in results:
        if not isinstance(result, ToolResult) or not isinstance(result.content, str):
            raise UsageError("tool results are ToolResult values with text content")
    given = [r.call_id for r in results]
    if not given:
        raise ToolResultsMismatch("no tool results given")
    if len(set(given)) != len(given):
        raise ToolResultsMismatch(f"tool results given twice for the same call: {_ids(given)}")
    found = last_calls(state.context)
    if found is None:
        raise ToolResultsMismatch(
            f"tool results for {_ids(given)}, but no tool calls are pending in session {state.key}"
        )
    calls, answered = found
    answered_ids = {m.tool_call_id for m in answered}
    pending = {call.id: call for call in calls if call.id not in answered_ids}
    if pending:
        if set(given) != set(pending):
            raise ToolResultsMismatch(
                f"tool results for {_ids(given)} do not match the pending tool calls {_ids(list(pending))}"
            )
        return [
            Message(
                "tool",
                result.content,
                tool_call_id=result.call_id,
                tool_name=pending[result.call_id].name,
                is_error=result.is_error,
            )
            for result in results
        ]
    own = state.tools.for_turn("turn")
    theirs = [call.id for call in calls if call.name not in own]
    if theirs and set(given) == set(theirs):  # a retry: already written, the model not yet answered
        return []
    raise ToolResultsMismatch(
        f"tool results for {_ids(given)}, but no tool calls are pending in session {state.key}"
    )


async def continue_turn(
    state: SessionState,
    results: Sequence[ToolResult],
    client_tools: dict[str, ClientTool],
    on_partial: PartialCallback | None = None,
) -> ModelTurn:
    """The suspended turn given the caller's ``results``: written to the transcript, then the model turn
    goes on (it may end suspended again on the caller's tools: ``turn.client_calls``)."""
    messages = result_messages(state, results)
    turn = start_model_turn(state, None, kind="turn", on_partial=on_partial, client_tools=client_tools)
    for message in messages:
        append_message(state, message, turn)
    return await resume_turn(state, turn)


def _ids(ids: Sequence[str]) -> str:
    shown = ", ".join(repr(i[:64]) for i in ids[:MAX_IDS_SHOWN])
    more = f" and {len(ids) - MAX_IDS_SHOWN} more" if len(ids) > MAX_IDS_SHOWN else ""
    return f"[{shown}{more}]"
