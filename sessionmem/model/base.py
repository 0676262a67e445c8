"""The model seam: the one call the runner makes to a chat model."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from sessionmem.messages import Message

Purpose = Literal["turn", "flush", "compaction", "slug"]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """What the model is asked: the full context (system message first), the tools it may call."""

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
