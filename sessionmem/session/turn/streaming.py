"""Streaming a turn's reply to the caller: partial text as the model writes it, NO_REPLY held back.

The runner streams only ordinary turns (never the silent flush, never a compaction summary), only when
the caller passed ``on_partial`` and the model has the optional
:class:`~sessionmem.model.base.StreamingModel` capability; otherwise it calls ``complete`` as usual.
What is shown follows :class:`~sessionmem.model.noreply.PartialReleaser`: nothing of a reply that is silent
(``NO_REPLY`` in any case, its JSON envelope, ``HEARTBEAT_OK`` in heartbeat runs), and pieces that add up to
the delivered reply. Text the model writes before calling tools is streamed too (it is part of what the user
would see in a live chat).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence

from sessionmem.errors import ModelError
from sessionmem.model.base import ModelReply, ModelRequest, StreamingModel
from sessionmem.model.noreply import SILENT_REPLY_TOKEN, PartialReleaser, deliverable_reply

PartialCallback = Callable[[str], Awaitable[None] | None]


async def stream_reply(
    model: StreamingModel,
    request: ModelRequest,
    on_partial: PartialCallback,
    silent_tokens: Sequence[str] = (SILENT_REPLY_TOKEN,),
) -> ModelReply:
    """One streamed model call: forward releasable text to ``on_partial`` (sync or async; its errors
    are the caller's and propagate), return the final reply. ``silent_tokens`` are the answers that
    mean silence (:func:`~sessionmem.model.noreply.silent_tokens`)."""
    releaser = PartialReleaser(silent_tokens)
    reply: ModelReply | None = None
    async for item in model.stream(request):
        if isinstance(item, ModelReply):
            reply = item
            continue
        await pass_on(on_partial, releaser.feed(item))
    if reply is None:
        raise ModelError(f"model {type(model).__name__} ended its stream without a final reply")
    await pass_on(on_partial, releaser.finish(deliverable_reply(reply.message.content, silent_tokens)))
    return reply


async def pass_on(on_partial: PartialCallback, text: str) -> None:
    """Give ``text`` to ``on_partial`` (sync or async), unless it is empty."""
    if not text:
        return
    result = on_partial(text)
    if inspect.isawaitable(result):
        await result
