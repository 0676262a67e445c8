"""The caller's own tools (client tools): declared to the model, run by the caller, never here.

A :class:`ClientTool` is a name, a description and a JSON schema, as an OpenAI request declares a
function. A turn given client tools offers them to the model beside the agent's own tools; when the model
calls one, the turn hands the call back to the caller, who runs it and submits a :class:`ToolResult`
(:mod:`sessionmem.session.turn.client_calls` says how the turn goes on).

Pure: what a caller may declare (:func:`client_tool_map`): names as OpenAI allows them (letters, digits,
``_`` and ``-``, at most 64), each once, at most :data:`MAX_CLIENT_TOOLS`, none named like one of the
agent's own tools (the model could not tell which one it calls, and the agent's memory tools always run
here).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sessionmem.errors import UsageError

MAX_CLIENT_TOOLS = 128  # OpenAI's own bound on a request's tools
MAX_DESCRIPTION_CHARS = 8_192
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _empty_object() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


@dataclass(frozen=True, slots=True)
class ClientTool:
    """A tool the caller runs: the model may call it, the turn returns the call
    (``TurnResult.tool_calls``)."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=_empty_object)  # JSON schema of the arguments

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not TOOL_NAME.fullmatch(self.name):
            raise UsageError(
                f"client tool name {str(self.name)[:80]!r}: use 1 to 64 letters, digits, '_' or '-'"
            )
        if not isinstance(self.description, str) or len(self.description) > MAX_DESCRIPTION_CHARS:
            raise UsageError(
                f"client tool {self.name!r}: the description must be text of at most "
                f"{MAX_DESCRIPTION_CHARS:,} characters"
            )
        if not isinstance(self.parameters, Mapping):
            raise UsageError(f"client tool {self.name!r}: 'parameters' must be a JSON schema object")

    def schema(self) -> dict[str, Any]:
        """OpenAI function-calling schema (the same shape as :meth:`~sessionmem.tools.define.Tool.schema`)."""
        function: dict[str, Any] = {"name": self.name, "parameters": dict(self.parameters)}
        if self.description:
            function["description"] = self.description
        return {"type": "function", "function": function}


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What the caller's run of one client tool call gave: the call's id, its text, whether it failed."""

    call_id: str
    content: str
    is_error: bool = False


def client_tool_map(tools: Iterable[ClientTool], own: Collection[str]) -> dict[str, ClientTool]:
    """``tools`` by name; :class:`~sessionmem.errors.UsageError` naming the problem when one is not a
    :class:`ClientTool`, a name comes twice, there are too many, or one is named like a tool of the
    agent's own (``own``)."""
    found: dict[str, ClientTool] = {}
    for item in tools:
        if not isinstance(item, ClientTool):
            raise UsageError(f"client tools are ClientTool values, not {type(item).__name__}")
        if item.name in found:
            raise UsageError(f"client tool {item.name!r} is declared twice")
        if item.name in own:
            raise UsageError(
                f"client tool {item.name!r} is named like one of the agent's own tools "
                f"({', '.join(sorted(own))}), which run server-side; rename it"
            )
        found[item.name] = item
        if len(found) > MAX_CLIENT_TOOLS:
            raise UsageError(f"more than {MAX_CLIENT_TOOLS} client tools declared")
    return found
