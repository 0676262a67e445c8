"""Token projection: how full the context will be when the pending message is sent (DESIGN 4).

The provider's reported usage of the last call is the best figure we have for everything up to that
call; what came after it (tool results, the assistant's own output, the user's next message) is counted
with tiktoken. We never estimate with characters / 4. Without a fresh reported usage (a new session, or
right after a compaction, when the kept messages' usage describes a context that no longer exists) the
whole context is counted; per-message counts are cached by transcript entry id, so a turn costs the
tokens of its new text, not the whole history.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from sessionmem.config import DEFAULT_CONTEXT_TOKENS, AgentConfig
from sessionmem.messages import Message
from sessionmem.session.stores.entry import SessionEntry, call_figures
from sessionmem.session.stores.transcript import Entry, context_from_entries
from sessionmem.tokens import count_tokens

# Chat formats wrap every message in a few tokens of role markup (OpenAI documents 3-4).
MESSAGE_OVERHEAD_TOKENS = 4

ContextItem = tuple[str | None, Message]


def message_tokens(message: Message) -> int:
    """Tiktoken count of one message as the model sees it: text, tool calls, plus role overhead."""
    total = MESSAGE_OVERHEAD_TOKENS + count_tokens(message.content)
    for call in message.tool_calls:
        args = orjson.dumps(call.arguments, option=orjson.OPT_SORT_KEYS).decode()
        total += count_tokens(call.name) + count_tokens(args)
    if message.tool_call_id:
        total += count_tokens(message.tool_call_id)
    return total


class TokenCounter:
    """Per-message token counts, cached by entry id (or by object identity for unsaved messages).

    The identity cache keeps a reference to the message so its ``id()`` cannot be reused while cached.
    """

    def __init__(self, max_entries: int = 20_000) -> None:
        self._by_entry: OrderedDict[str, int] = OrderedDict()
        self._by_object: OrderedDict[int, tuple[Message, int]] = OrderedDict()
        self._max = max_entries
        self.counted = 0  # messages actually tokenised (cache misses), for tests and stats

    def count(self, message: Message, entry_id: str | None = None) -> int:
        if entry_id is not None:
            cached = self._by_entry.get(entry_id)
            if cached is not None:
                return cached
        else:
            hit = self._by_object.get(id(message))
            if hit is not None and hit[0] is message:
                return hit[1]
        value = message_tokens(message)
        self.counted += 1
        if entry_id is not None:
            self._by_entry[entry_id] = value
            if len(self._by_entry) > self._max:
                self._by_entry.popitem(last=False)
        else:
            self._by_object[id(message)] = (message, value)
            if len(self._by_object) > self._max:
                self._by_object.popitem(last=False)
        return value

    def __len__(self) -> int:
        """How many counts are cached (by entry id and by identity)."""
        return len(self._by_entry) + len(self._by_object)

    def keep_only(self, items: Iterable[ContextItem]) -> None:
        """Forget every count but those of ``items`` (the context after a compaction): what compaction
        took out of the context is never counted again, and unsaved messages were the last turn's."""
        kept = {entry_id for entry_id, _ in items if entry_id is not None}
        self._by_entry = OrderedDict((k, v) for k, v in self._by_entry.items() if k in kept)
        self._by_object.clear()

    def count_all(self, items: Iterable[ContextItem]) -> int:
        return sum(self.count(message, entry_id) for entry_id, message in items)


@dataclass(frozen=True, slots=True)
class Projection:
    """The projected prompt size and where it came from (``reported`` is None when all counted)."""

    tokens: int
    reported: int | None  # last call's prompt + output tokens, when used
    counted: int  # tiktoken count of everything not covered by ``reported``

    @property
    def fresh(self) -> bool:
        return self.reported is not None


def project_tokens(
    context: Sequence[ContextItem],
    counter: TokenCounter,
    *,
    pending: Sequence[Message] = (),
    system_prompt: str = "",
    stale_entry_ids: frozenset[str] | set[str] = frozenset(),
) -> Projection:
    """Projected prompt tokens of ``context`` + ``pending``.

    Anchor: the last assistant message with reported usage whose entry is not in ``stale_entry_ids``
    (entries kept through a compaction carry usage of a context that no longer exists). Its prompt
    tokens + output tokens cover the context up to and including it; later messages and ``pending`` are
    counted. With no anchor, the system prompt and every message are counted.
    """
    anchor = _anchor_index(context, stale_entry_ids)
    pending_tokens = sum(counter.count(message) for message in pending)
    if anchor is None:
        counted = count_tokens(system_prompt) + counter.count_all(context) + pending_tokens
        return Projection(tokens=counted, reported=None, counted=counted)
    usage = context[anchor][1].usage
    assert usage is not None
    reported = usage.prompt_tokens + usage.output
    counted = counter.count_all(context[anchor + 1 :]) + pending_tokens
    return Projection(tokens=reported + counted, reported=reported, counted=counted)


def _anchor_index(context: Sequence[ContextItem], stale: frozenset[str] | set[str]) -> int | None:
    for index in range(len(context) - 1, -1, -1):
        entry_id, message = context[index]
        if message.role != "assistant" or message.usage is None:
            continue
        if entry_id is not None and entry_id in stale:
            return None  # everything before is stale too
        if message.usage.prompt_tokens > 0:
            return index
    return None


def resolve_context_window(agent: AgentConfig, model: Any) -> int:
    """The context window for ``model``: config per-model entry -> agent ``contextTokens`` ->
    litellm's model info (LiteLLMModel only) -> 200,000."""
    name = str(getattr(model, "name", "") or "")
    entry = agent.models.get(name)
    if entry is not None and entry.context_window:
        return entry.context_window
    if agent.context_tokens:
        return agent.context_tokens
    from_litellm = _litellm_context_window(model)
    if from_litellm:
        return from_litellm
    return DEFAULT_CONTEXT_TOKENS


def session_window(configured: int, entry: SessionEntry, model: Any) -> int:
    """The window a session works with: the configured (or looked-up) one, or the smaller window the
    provider stated for this model in an overflow error (``learnedContextTokens``, see
    :meth:`~sessionmem.session.turn.state.SessionState.learn_context_window`)."""
    learned = (entry.learned_context_tokens or {}).get(str(getattr(model, "name", "") or ""))
    return min(configured, learned) if learned else configured


def provider_owns_compaction(agent: AgentConfig, model: Any) -> bool:
    entry = agent.models.get(str(getattr(model, "name", "") or ""))
    return bool(entry and entry.owns_compaction)


def _litellm_context_window(model: Any) -> int | None:
    """litellm's bundled model map, asked only for a LiteLLMModel (importing litellm is slow)."""
    if type(model).__name__ != "LiteLLMModel":
        return None
    from sessionmem.model.litellm import LiteLLMModel, context_window

    if not isinstance(model, LiteLLMModel):
        return None
    return context_window(model.name)


def context_state(entries: Sequence[Entry]) -> tuple[list[ContextItem], set[str]]:
    """A transcript's model context (from its ``entries``, in order) and the ids whose reported usage is
    stale.

    Messages kept through the latest compaction (they sit before the compaction entry in the file)
    carry usage of a context that no longer exists, so they cannot anchor the projection.
    """
    context: list[ContextItem] = list(context_from_entries(entries))
    stale: set[str] = set()
    last = max((i for i, e in enumerate(entries) if e.type == "compaction"), default=None)
    if last is not None:
        stale = {e.id for e in entries[:last] if e.type == "message"}
    return context, stale


def usage_fields(usage: Any, context_window: int, model: Any, session_key: str) -> dict[str, Any]:
    """The store entry's figures after a call; totalTokens = the last call's prompt tokens (output
    excluded)."""
    from sessionmem.session.stores.keys import chat_type

    return {
        **call_figures(usage),
        "context_tokens": context_window,
        "model": str(getattr(model, "name", "") or "") or None,
        "model_provider": str(getattr(model, "provider", "") or "") or None,
        "chat_type": chat_type(session_key),
    }
