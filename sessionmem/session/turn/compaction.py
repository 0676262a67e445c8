"""Compaction: what to summarise, how to ask for the summary, and the one summarising call.

Planning is pure (:func:`plan_compaction`): keep the most recent ``keepRecentTokens`` verbatim
(tiktoken counts) and summarise the rest. The cut is only ever placed on a user or assistant message
such that every tool result stays with its tool call (DESIGN 5): a cut that would keep a result whose
call is summarised (or the reverse) moves to the next clean boundary. :func:`repair_tool_pairs`
removes whatever orphan a damaged transcript still contains before the model sees it.

The summary prompt follows OpenClaw's safeguard mode (reference §2.3): fixed section headings, literal
identifiers preserved, the previous summary updated rather than re-summarised, ``/compact`` focus
appended as ``Additional focus: ...``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sessionmem.errors import ContextWindowExceeded, SessionMemError
from sessionmem.messages import Message
from sessionmem.model.base import Model, ModelRequest
from sessionmem.session.stores.transcript import COMPACTION_SUMMARY_PREFIX, COMPACTION_SUMMARY_SUFFIX
from sessionmem.session.turn.projection import ContextItem, TokenCounter

TOOL_RESULT_MAX_CHARS = 2000

SUMMARIZATION_SYSTEM_PROMPT = (
    "You are a context summarization assistant. Your task is to read a conversation between a user and "
    "an AI assistant, then produce a structured summary following the exact format specified.\n\n"
    "Do NOT continue the conversation. Do NOT respond to any questions in the conversation. "
    "ONLY output the structured summary."
)

SUMMARY_INSTRUCTIONS = "\n".join(
    [
        "Summarize the conversation above so the assistant can continue the work without it.",
        "Use exactly these section headings, in this order:",
        "",
        "## Decisions",
        "## Open TODOs",
        "## Constraints/Rules",
        "## Pending user asks",
        "## Exact identifiers",
        "",
        "For ## Exact identifiers, preserve literal values exactly as seen (IDs, URLs, file paths, ports, "
        "hashes, dates, times).",
        "Preserve all opaque identifiers exactly as written (no shortening or reconstruction), including "
        "UUIDs, hashes, IDs, tokens, API keys, hostnames, IPs, ports, URLs, and file names.",
        "Do not omit unresolved asks from the user.",
        'Keep each section concise. Write "None" under a heading that has nothing.',
    ]
)

UPDATE_INSTRUCTIONS = (
    "The <previous-summary> covers the conversation before the messages above. Produce one updated summary: "
    "PRESERVE everything in the previous summary that still holds, ADD what the new messages establish, "
    "UPDATE items that changed (a TODO done, a decision revised)."
)


class CompactionFailed(SessionMemError):
    """The summary could not be produced; the history was left as it was."""


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What a compaction would do: summarise ``summarize``, keep ``kept`` verbatim."""

    summarize: tuple[ContextItem, ...]
    kept: tuple[ContextItem, ...]
    previous_summary: str | None
    tokens_before: int  # tiktoken count of the whole current context

    @property
    def first_kept_entry_id(self) -> str | None:
        return self.kept[0][0] if self.kept else None


def previous_summary_of(context: Sequence[ContextItem]) -> str | None:
    """The summary text of an earlier compaction, when the context starts with one."""
    if not context:
        return None
    first = context[0][1]
    if first.role == "user" and first.content.startswith(COMPACTION_SUMMARY_PREFIX):
        body = first.content[len(COMPACTION_SUMMARY_PREFIX) :]
        return body.removesuffix(COMPACTION_SUMMARY_SUFFIX)
    return None


def plan_compaction(
    context: Sequence[ContextItem], counter: TokenCounter, keep_recent_tokens: int
) -> CompactionPlan | None:
    """Split the context into a part to summarise and a recent part to keep; None if nothing to summarise.

    The cut starts where the newest messages add up to ``keep_recent_tokens`` and moves back (keeping
    more) to the nearest clean boundary; only if there is none before it, forward (keeping less).
    ``keep_recent_tokens`` 0 folds everything into the summary (overflow recovery's last resort).
    """
    previous = previous_summary_of(context)
    body = list(context[1:] if previous is not None else context)
    tokens_before = counter.count_all(context)
    if keep_recent_tokens <= 0:
        return CompactionPlan(tuple(body), (), previous, tokens_before) if body else None
    if len(body) < 2:
        return None
    start = _budget_start(body, counter, keep_recent_tokens)
    if start is None:  # everything fits in the recent budget
        return None
    spans = tool_spans(body)
    cut = next((i for i in range(min(start, len(body) - 1), 0, -1) if is_clean_cut(body, i, spans)), None)
    if cut is None:
        cut = next((i for i in range(max(start, 1), len(body)) if is_clean_cut(body, i, spans)), None)
    if cut is None:
        return None
    return CompactionPlan(tuple(body[:cut]), tuple(body[cut:]), previous, tokens_before)


def _budget_start(body: Sequence[ContextItem], counter: TokenCounter, keep: int) -> int | None:
    """Index where the newest messages first add up to ``keep`` tokens; None if they never do."""
    total = 0
    for index in range(len(body) - 1, -1, -1):
        total += counter.count(body[index][1], body[index][0])
        if total >= keep:
            return index
    return None


def tool_spans(body: Sequence[ContextItem]) -> list[tuple[int, int]]:
    """``(call index, result index)`` of every tool result, paired with the nearest earlier assistant
    message calling its id (positional, so ids reused across turns still pair correctly)."""
    last_call: dict[str, int] = {}
    spans: list[tuple[int, int]] = []
    for index, (_, message) in enumerate(body):
        for call in message.tool_calls:
            last_call[call.id] = index
        if message.role == "tool" and message.tool_call_id in last_call:
            spans.append((last_call[message.tool_call_id], index))
    return spans


def is_clean_cut(
    body: Sequence[ContextItem], index: int, spans: Sequence[tuple[int, int]] | None = None
) -> bool:
    """True when keeping ``body[index:]`` separates no tool call from its result."""
    if index <= 0 or index >= len(body) or body[index][1].role not in ("user", "assistant"):
        return False
    spans = tool_spans(body) if spans is None else spans
    return not any(call < index <= result for call, result in spans)


def recent_within(context: Sequence[ContextItem], counter: TokenCounter, budget: int) -> list[ContextItem]:
    """The newest messages that fit in ``budget`` tokens, starting at a clean cut (never mid tool
    exchange); at least the last clean tail, even if it is over the budget."""
    start = _budget_start(context, counter, budget + 1)
    if start is None:
        return list(context)
    spans = tool_spans(context)
    for index in range(start + 1, len(context)):
        if is_clean_cut(context, index, spans):
            return list(context[index:])
    for index in range(start, 0, -1):
        if is_clean_cut(context, index, spans):
            return list(context[index:])
    return list(context)


def repair_tool_pairs(messages: Sequence[Message]) -> list[Message]:
    """Drop tool results whose call is not earlier in the list, and tool calls that never got a result
    (providers reject both). Text of an assistant message losing all its calls is kept."""
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    seen_calls: set[str] = set()
    out: list[Message] = []
    for message in messages:
        if message.role == "tool":
            if message.tool_call_id in seen_calls:
                out.append(message)
            continue
        if message.tool_calls:
            calls = tuple(c for c in message.tool_calls if c.id in answered)
            seen_calls.update(c.id for c in calls)
            if len(calls) != len(message.tool_calls):
                if not calls and not message.content:
                    continue
                message = Message(
                    "assistant",
                    message.content,
                    tool_calls=calls,
                    usage=message.usage,
                    timestamp=message.timestamp,
                )
        out.append(message)
    return out


# ---------------------------------------------------------------------------- the summary request


def serialize_conversation(messages: Sequence[Message]) -> str:
    """``[User]: ...``, ``[Assistant]: ...``, ``[Assistant tool calls]: ...``, ``[Tool result]: ...``."""
    import orjson

    parts: list[str] = []
    for message in messages:
        if message.role == "user":
            parts.append(f"[User]: {message.content}")
        elif message.role == "assistant":
            if message.content:
                parts.append(f"[Assistant]: {message.content}")
            if message.tool_calls:
                calls = "; ".join(
                    f"{c.name}("
                    + ", ".join(f"{k}={orjson.dumps(v).decode()}" for k, v in c.arguments.items())
                    + ")"
                    for c in message.tool_calls
                )
                parts.append(f"[Assistant tool calls]: {calls}")
        elif message.role == "tool":
            text = message.content
            if len(text) > TOOL_RESULT_MAX_CHARS:
                extra = len(text) - TOOL_RESULT_MAX_CHARS
                text = text[:TOOL_RESULT_MAX_CHARS] + f"\n\n[... {extra} more characters truncated]"
            parts.append(f"[Tool result]: {text}")
    return "\n\n".join(parts)


def summary_request(
    plan: CompactionPlan, *, instructions: str | None = None, reserve_tokens: int = 16_384
) -> ModelRequest:
    """The one request for a compaction summary (no tools; ``max_tokens`` = 0.8 · reserve)."""
    conversation = serialize_conversation([m for _, m in plan.summarize])
    text = f"<conversation>\n{conversation}\n</conversation>\n\n"
    if plan.previous_summary:
        text += (
            f"<previous-summary>\n{plan.previous_summary}\n</previous-summary>\n\n{UPDATE_INSTRUCTIONS}\n\n"
        )
    text += SUMMARY_INSTRUCTIONS
    if instructions and instructions.strip():
        text += f"\n\nAdditional focus: {instructions.strip()}"
    return ModelRequest(
        messages=(Message.system(SUMMARIZATION_SYSTEM_PROMPT), Message.user(text)),
        purpose="compaction",
        max_tokens=max(256, int(reserve_tokens * 0.8)),
    )


MAX_SPLIT_DEPTH = 3  # an overflowing summary request is split in halves at most this deep (8 parts)


async def summarize(
    model: Model, plan: CompactionPlan, *, instructions: str | None = None, reserve_tokens: int = 16_384
) -> str:
    """One model call with purpose "compaction"; an exception or an empty answer -> CompactionFailed.

    If the request itself is over the provider's window (the overflow path, when the configured window
    is larger than the real one), the messages are summarised in two halves, the first half's summary
    becoming the second's ``<previous-summary>``; halves are split again up to MAX_SPLIT_DEPTH.
    """
    return await _summarize_part(
        model, plan.summarize, plan.previous_summary, instructions, reserve_tokens, depth=0
    )


async def _summarize_part(
    model: Model,
    items: Sequence[ContextItem],
    previous: str | None,
    instructions: str | None,
    reserve_tokens: int,
    *,
    depth: int,
) -> str:
    part = CompactionPlan(tuple(items), (), previous, 0)
    request = summary_request(part, instructions=instructions, reserve_tokens=reserve_tokens)
    try:
        reply = await model.complete(request)
    except ContextWindowExceeded as exc:
        if depth >= MAX_SPLIT_DEPTH or len(items) < 2:
            raise CompactionFailed(f"summarisation request is over the context window: {exc}") from exc
        middle = len(items) // 2
        first = await _summarize_part(
            model, items[:middle], previous, instructions, reserve_tokens, depth=depth + 1
        )
        return await _summarize_part(
            model, items[middle:], first, instructions, reserve_tokens, depth=depth + 1
        )
    except Exception as exc:
        raise CompactionFailed(f"summarisation failed: {type(exc).__name__}: {exc}") from exc
    summary = reply.message.content.strip()
    if not summary:
        raise CompactionFailed("summarisation returned an empty summary")
    return summary
