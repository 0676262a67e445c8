"""The next turn's first model call, made while the memory work after the last reply still runs.

Replies first (:mod:`~sessionmem.session.turn.after_reply`) runs the flush and the compaction after a
reply, in the session's turn. A user who answers before that work ends would wait for the rest of it, and
with a model of 1 s a call the flush alone (two calls) outlasts a quick answer. So a turn that arrives
while the work runs sends its first model call at once, on the context as it stood at the last reply
(:class:`ReplyPoint`), and the work goes on meanwhile. Its messages are written after the work's, once the
turn holds the session, so the transcript reads as before: the flush, the user's message, the answer. The
user waits for the longer of the two, not for both.

When it is made: the message is an ordinary one (no command, a session that no reset is due for), and the
context of the last reply with it projects under the compaction threshold, so the call sends nothing the
gate would not have sent. The turn skips its preflight then (the call is made); what the context's size
makes due runs after its reply, as after any other. A compaction that a flush of the work would chain (its
own messages took the context past the threshold) waits for that reply too, since the answer being made
does not hold the flush's messages.

When it is thrown away, and the turn runs as usual (the call made again): the call failed (an overflow, a
provider's error), or the session changed otherwise meanwhile: another runner's turn, a reset, or a failed
memory work, each of which rebuilds the state from the transcript (``SessionState.generation``). So a
streaming caller is shown nothing of it before it is known to stand: its text is held
(:class:`HeldPartials`) until the turn holds the session with the state of the point, then passed on, and
the rest as it comes; an answer thrown away before then was never seen.

The early answer's usage describes a prompt the transcript does not hold (neither the flush's messages
nor the compaction), so it never anchors the projection (``ModelTurn.foreign``).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from sessionmem.messages import Message
from sessionmem.model.base import ModelReply
from sessionmem.session.turn.model_turn import ModelTurn, complete, request_for, start_model_turn
from sessionmem.session.turn.projection import ContextItem
from sessionmem.session.turn.state import SessionState
from sessionmem.session.turn.streaming import PartialCallback, pass_on
from sessionmem.tools.client import ClientTool

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReplyPoint:
    """The session as it stood when a reply was given, before the memory work after it."""

    system_prompt: str
    context: tuple[ContextItem, ...]
    tokens: int  # its projected prompt (SessionState.projection)
    generation: int  # SessionState.generation then


def reply_point(state: SessionState) -> ReplyPoint:
    """The point to answer an early call from: the state as it is now, at a reply."""
    return ReplyPoint(state.system_prompt, tuple(state.context), state.projection().tokens, state.generation)


class HeldPartials:
    """A caller's ``on_partial``, held: text is kept until :meth:`release`, then passed on in order."""

    def __init__(self, on_partial: PartialCallback) -> None:
        self._on_partial = on_partial
        self._held: list[str] = []
        self._released = False

    async def __call__(self, text: str) -> None:
        if self._released:
            await pass_on(self._on_partial, text)
        else:
            self._held.append(text)

    async def release(self) -> None:
        while self._held:  # text arriving meanwhile joins the queue, so the order holds
            await pass_on(self._on_partial, self._held.pop(0))
        self._released = True


class EarlyCall:
    """A turn's first model call, sent before the turn holds the session (see the module docstring)."""

    def __init__(
        self, point: ReplyPoint, turn: ModelTurn, call: asyncio.Task[ModelReply], shown: HeldPartials | None
    ) -> None:
        self.point = point
        self.turn = turn
        self._call = call
        self._shown = shown

    async def answered(self, state: SessionState) -> ModelTurn | None:
        """The model turn with its first answer ready (``turn.ready``), once the turn holds the session; None
        when the answer cannot stand: the state was rebuilt since the point, or the call failed."""
        if state.generation != self.point.generation:
            return None
        if self._shown is not None:
            await self._shown.release()
        try:
            reply = await self._call
        except Exception as exc:  # the usual way makes the call again, and raises what it raises
            log.debug("session %s: the early call failed (%s); calling again", state.key, exc)
            return None
        self.turn.ready = reply
        return self.turn

    def in_hand(self) -> bool:
        """Whether the call is still out or has answered (not failed, not cancelled)."""
        call = self._call
        return not call.done() or (not call.cancelled() and call.exception() is None)

    def close(self) -> None:
        """The turn is over (or cancelled): stop the call if it is still out; a failure it ended with was
        the turn's to report, and is not left for the loop to log."""
        call = self._call
        if not call.done():
            call.cancel()
        elif not call.cancelled():
            call.exception()


def start_early_call(
    state: SessionState,
    point: ReplyPoint,
    prompt: Message,
    on_partial: PartialCallback | None,
    client_tools: dict[str, ClientTool],
) -> EarlyCall | None:
    """Send the first model call of the turn of ``prompt`` (an ordinary message:
    :func:`~sessionmem.session.lifecycle.commands.ordinary_message`) now, on the context at ``point``, when
    it projects under the compaction threshold; None when the turn must wait for the session as usual."""
    if point.tokens + state.counter.count(prompt) >= state.budget.compaction_threshold:
        return None
    shown = HeldPartials(on_partial) if on_partial is not None else None
    turn = start_model_turn(state, prompt, kind="turn", on_partial=shown, client_tools=client_tools)
    request = request_for(state, turn, context=point.context, system_prompt=point.system_prompt)
    call = asyncio.get_running_loop().create_task(complete(state, request, turn))
    return EarlyCall(point, turn, call, shown)
