"""The model seam: the one call the runner makes to a chat model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeGuard, runtime_checkable

from sessionmem.messages import Message

Purpose = Literal["turn", "flush", "compaction", "slug"]
"""What a request is for: ``turn`` (a user's turn and its tool loop), ``flush`` (the silent memory flush;
its output never reaches the user), ``compaction`` (the summary of older history; no tools) and ``slug``
(the name of a ``/new`` memory file). A model may route by it; :mod:`sessionmem.model.routing` does so
from ``compaction.model`` and ``compaction.memoryFlush.model``."""


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """What the model is asked: the full context (system message first), the tools it may call, and
    what for (``purpose``; ``metadata`` carries ``session_key`` and ``turn_kind`` for turns and flushes)."""

    messages: tuple[Message, ...]
    tools: tuple[dict[str, Any], ...] = ()  # OpenAI function-calling schemas
    purpose: Purpose = "turn"
    max_tokens: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ModelReply:
    message: Message  # role "assistant"; usage set when the provider reported it
    model: str = ""
    provider: str = ""
    stop_reason: str = "stop"  # "stop" | "length" | "toolUse" | "error"


@runtime_checkable
class Model(Protocol):
    """A chat model. Raise ``ContextWindowExceeded`` when the prompt is over the window."""

    @property
    def name(self) -> str:
        """Model identifier, e.g. ``openai/gpt-4o-mini``."""
        ...

    async def complete(self, request: ModelRequest) -> ModelReply: ...


@runtime_checkable
class StreamingModel(Protocol):
    """Optional capability of a :class:`Model`: streaming a reply as it is written.

    ``stream(request)`` yields the reply's text as ``str`` deltas while they arrive, then the complete
    :class:`ModelReply` (text, tool calls, usage) as its last item. Like ``complete`` it raises
    ``ContextWindowExceeded`` when the prompt is over the window, before yielding anything. The runner
    streams only when the caller asks for partial text and the model has this capability.
    """

    def stream(self, request: ModelRequest) -> AsyncIterator[str | ModelReply]: ...


def supports_streaming(model: object) -> TypeGuard[StreamingModel]:
    """True when ``model`` implements :class:`StreamingModel`."""
    return isinstance(model, StreamingModel)
