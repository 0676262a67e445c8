"""Developer tools: a name, a description, a JSON schema and a handler (sync or async).

A sync handler runs in a worker thread (``asyncio.to_thread``): a tool that blocks (HTTP, sqlite, a
subprocess) must not stall the caller's event loop while the turn waits for it. Async handlers are
awaited on the loop.

Failures are the model's business, not the user's: an unknown tool, bad arguments or an exception in
a handler come back to the model as a tool result with ``is_error`` set, and the turn goes on.
"""

from __future__ import annotations

import asyncio
import inspect
import types
import typing
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Union, get_type_hints

import orjson

from sessionmem.errors import SessionMemError
from sessionmem.messages import ToolCall

Handler = Callable[..., Any]

_JSON_TYPES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    dict: "object",
}


class ToolError(SessionMemError):
    """Raise from a handler to send a clean error message (no exception type) back to the model."""


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object
    handler: Handler  # (**arguments) -> str | dict | list, sync or async

    def schema(self) -> dict[str, Any]:
        """OpenAI function-calling schema."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


def tool(fn: Handler | None = None, *, name: str | None = None, description: str | None = None) -> Any:
    """Make a :class:`Tool` from a function; the schema comes from its type hints, the description
    from its docstring. Use bare (``@tool``) or with options (``@tool(name="lookup")``)."""

    def build(func: Handler) -> Tool:
        return Tool(
            name=name or func.__name__,
            description=description or inspect.cleandoc(func.__doc__ or func.__name__),
            parameters=schema_from_signature(func),
            handler=func,
        )

    return build(fn) if fn is not None else build


def schema_from_signature(func: Handler) -> dict[str, Any]:
    """A JSON schema for ``func``'s keyword arguments (str/int/float/bool/list/dict and optionals)."""
    hints = get_type_hints(func)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        properties[param.name] = _json_type(hints.get(param.name, str))
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
    return {"type": "object", "properties": properties, "required": required}


def _json_type(hint: Any) -> dict[str, Any]:
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        options = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return _json_type(options[0]) if options else {}
    if origin in (list, tuple) or hint in (list, tuple):
        args = typing.get_args(hint)
        return {"type": "array", "items": _json_type(args[0]) if args else {}}
    if origin is dict:
        return {"type": "object"}
    return {"type": _JSON_TYPES.get(hint, "string")}


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    content: str
    is_error: bool = False


def tool_map(tools: Iterable[Tool]) -> dict[str, Tool]:
    """Tools by name; later tools with the same name replace earlier ones."""
    return {t.name: t for t in tools}


async def dispatch(tools: Mapping[str, Tool], call: ToolCall) -> ToolOutcome:
    """Run one tool call; every failure becomes an error result for the model."""
    found = tools.get(call.name)
    if found is None:
        available = ", ".join(sorted(tools)) or "none"
        return ToolOutcome(f"Unknown tool: {call.name}. Available tools: {available}.", is_error=True)
    arguments = call.arguments or {}
    try:
        if inspect.iscoroutinefunction(found.handler):
            result = await found.handler(**arguments)
        else:
            result = await asyncio.to_thread(found.handler, **arguments)
        if inspect.isawaitable(result):  # a sync callable that returned an awaitable (e.g. a partial)
            result = await typing.cast(Awaitable[Any], result)
    except ToolError as exc:
        return ToolOutcome(str(exc), is_error=True)
    except TypeError as exc:
        if _is_argument_error(exc, found.handler):
            return ToolOutcome(f"Invalid arguments for {call.name}: {exc}", is_error=True)
        return ToolOutcome(f"Tool {call.name} failed: TypeError: {exc}", is_error=True)
    except Exception as exc:
        return ToolOutcome(f"Tool {call.name} failed: {type(exc).__name__}: {exc}", is_error=True)
    return ToolOutcome(render_result(result))


def render_result(result: Any) -> str:
    if result is None:
        return ""
    if isinstance(result, str):
        return result
    return orjson.dumps(result, default=str).decode()


def _is_argument_error(exc: TypeError, handler: Handler) -> bool:
    text = str(exc)
    name = getattr(handler, "__name__", "")
    return name in text and ("argument" in text or "positional" in text)
