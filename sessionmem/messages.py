"""Conversation messages, as the runner, the model seam and the transcript see them.

One message type for the four roles; tool calls and usage are small frozen records. The
transcript module maps these to and from the JSONL format (reference §3.2), and the litellm
adapter maps them to and from OpenAI chat format (:meth:`Message.to_openai`).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]


def now_ms() -> int:
    return int(time.time() * 1000)


_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def text_problem(value: object) -> str | None:
    """Why ``value`` cannot be message or tool-argument text, or None when it can: not a string, or a
    string with a lone surrogate (no file, transcript line or JSON document can hold one)."""
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    found = _LONE_SURROGATE.search(value)
    if found is not None:
        return f"is not valid Unicode: lone surrogate U+{ord(found.group()):04X} at index {found.start()}"
    return None


FLUSH_PROVENANCE = "memory_flush"  # provenance.kind of every message of the silent flush turn


def provenance_kind(raw_message: dict[str, Any]) -> str | None:
    """``provenance.kind`` of a transcript message as stored (a dict), if any."""
    provenance = raw_message.get("provenance")
    kind = provenance.get("kind") if isinstance(provenance, dict) else None
    return kind if isinstance(kind, str) else None


def written_in_a_flush(raw_message: dict[str, Any]) -> bool:
    """True for a stored message of the silent flush turn (the runner marks them all)."""
    return provenance_kind(raw_message) == FLUSH_PROVENANCE


def flush_provenance(cycle: int | None, *, write_failed: bool = False) -> dict[str, Any]:
    """The ``provenance`` of the flush turn's messages: ``{"kind": "memory_flush", "cycle": N}``, ``cycle``
    being the compaction count when the flush started (DESIGN 2), so the transcript says which cycle a
    completed flush belongs to; ``"writeFailed": true`` on the messages after a write of the flush failed
    (a full disk), so the transcript says the flush did not save its note and does not count."""
    provenance: dict[str, Any] = {"kind": FLUSH_PROVENANCE}
    if cycle is not None:
        provenance["cycle"] = cycle
    if write_failed:
        provenance["writeFailed"] = True
    return provenance


def flush_write_failed(raw_message: dict[str, Any]) -> bool:
    """True for a stored flush message written after one of the flush's writes failed."""
    provenance = raw_message.get("provenance")
    return isinstance(provenance, dict) and provenance.get("writeFailed") is True


def flush_cycle(raw_message: dict[str, Any]) -> int | None:
    """The ``cycle`` a stored flush message records (:func:`flush_provenance`), if any."""
    provenance = raw_message.get("provenance")
    cycle = provenance.get("cycle") if isinstance(provenance, dict) else None
    return cycle if isinstance(cycle, int) and not isinstance(cycle, bool) and cycle >= 0 else None


UNPARSED_ARGUMENTS = "_raw"  # ToolCall.arguments key for argument text that is not a JSON object
REFUSED_ARGUMENTS = "_refused"  # ToolCall.arguments key for why the model's arguments were not kept

# A tool call's arguments are the model's output, taken in whole. Trigger: arguments nested 300 levels
# deep (a JSON parser accepts 1,024) crashed the turn with "Recursion limit reached" when the transcript
# wrote them (orjson writes 254 levels at most); a lone surrogate or an integer over 64 bits failed the
# same way. Why: every tool call becomes a transcript line, an event and part of the next request.
# Outcome: arguments over these bounds, or holding what JSON text cannot, are not kept: the call holds
# {REFUSED_ARGUMENTS: why}, which the dispatcher answers as a tool error, and the turn goes on.
MAX_ARGUMENT_DEPTH = 64  # levels of objects and arrays; a real tool's schema has a handful
MAX_ARGUMENT_CHARS = 2_000_000  # characters of text in the arguments, keys included (a model writes far less)
_INT_RANGE = (-(2**63), 2**64 - 1)  # what orjson writes


def arguments_problem(arguments: Any) -> str | None:
    """Why ``arguments`` (a tool call's, a dict) cannot be kept as JSON within the bounds, naming the
    top-level argument concerned, or None. One pass over the values, without recursion."""
    if not isinstance(arguments, dict):
        return f"the arguments are a {type(arguments).__name__}, not a JSON object"
    size = 0
    stack: list[tuple[Any, int, str]] = [(arguments, 1, "the arguments")]
    while stack:
        value, depth, where = stack.pop()
        if isinstance(value, dict):
            if depth > MAX_ARGUMENT_DEPTH:
                return f"{where} is nested deeper than {MAX_ARGUMENT_DEPTH} levels"
            for key, item in value.items():
                if not isinstance(key, str):
                    return f"{where} has a key that is not text ({type(key).__name__})"
                problem = text_problem(key)
                if problem is not None:
                    return f"a key of {where} {problem}"
                size += len(key)
                stack.append((item, depth + 1, _argument_name(key) if depth == 1 else where))
        elif isinstance(value, (list, tuple)):
            if depth > MAX_ARGUMENT_DEPTH:
                return f"{where} is nested deeper than {MAX_ARGUMENT_DEPTH} levels"
            size += 1
            stack.extend((item, depth + 1, where) for item in value)
        elif isinstance(value, str):
            problem = text_problem(value)
            if problem is not None:
                return f"{where} {problem}"
            size += len(value)
        elif isinstance(value, bool) or value is None or isinstance(value, float):
            size += 1
        elif isinstance(value, int):
            if not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
                return f"{where} holds an integer outside 64 bits"
            size += 1
        else:
            return f"{where} holds a {type(value).__name__}, which JSON cannot"
        if size > MAX_ARGUMENT_CHARS:
            return f"the arguments hold more than {MAX_ARGUMENT_CHARS:,} characters"
    return None


def _argument_name(key: str) -> str:
    if key == UNPARSED_ARGUMENTS:
        return "the argument text"
    shown = key if len(key) <= 40 else key[:40] + "…"
    return f"argument {shown!r}"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call. Its arguments always fit the bounds above and can be written as JSON: arguments
    that do not are replaced, when the call is made, by ``{REFUSED_ARGUMENTS: why}``."""

    id: str
    name: str
    arguments: dict[str, Any]  # {UNPARSED_ARGUMENTS: text} when the model's text was not a JSON object

    def __post_init__(self) -> None:
        problem = arguments_problem(self.arguments)
        if problem is not None:
            object.__setattr__(self, "arguments", {REFUSED_ARGUMENTS: problem})

    @property
    def unparsed_arguments(self) -> str | None:
        """The model's argument text when it was not a JSON object (kept as sent), else None."""
        raw = self.arguments.get(UNPARSED_ARGUMENTS) if len(self.arguments) == 1 else None
        return raw if isinstance(raw, str) else None

    @property
    def refused_arguments(self) -> str | None:
        """Why the model's arguments were not kept (over a bound, or not writable as JSON), else None."""
        why = self.arguments.get(REFUSED_ARGUMENTS) if len(self.arguments) == 1 else None
        return why if isinstance(why, str) else None


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage the provider reported for one call."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    @property
    def prompt_tokens(self) -> int:
        """What the prompt occupied in the context window."""
        return self.input + self.cache_read + self.cache_write

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.output

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input + other.input,
            self.output + other.output,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
        )


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # role == "tool"
    tool_name: str | None = None  # role == "tool"
    is_error: bool = False  # role == "tool"
    usage: Usage | None = None  # role == "assistant", as reported by the provider
    timestamp: int = field(default_factory=now_ms)  # ms since the epoch

    @classmethod
    def system(cls, content: str) -> Message:
        return cls("system", content)

    @classmethod
    def user(cls, content: str) -> Message:
        return cls("user", content)

    @classmethod
    def assistant(
        cls, content: str = "", tool_calls: tuple[ToolCall, ...] = (), usage: Usage | None = None
    ) -> Message:
        return cls("assistant", content, tool_calls=tool_calls, usage=usage)

    @classmethod
    def tool(cls, call: ToolCall, content: str, *, is_error: bool = False) -> Message:
        return cls("tool", content, tool_call_id=call.id, tool_name=call.name, is_error=is_error)

    def to_openai(self) -> dict[str, Any]:
        """This message in OpenAI chat-completions format."""
        import orjson

        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.role == "assistant" and self.tool_calls:
            out["content"] = self.content or None
            out["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": orjson.dumps(call.arguments).decode()},
                }
                for call in self.tool_calls
            ]
        if self.role == "tool":
            out["tool_call_id"] = self.tool_call_id
        return out
