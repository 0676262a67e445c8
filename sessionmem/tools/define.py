"""Developer tools: a name, a description, a JSON schema and a handler (sync or async).

A sync handler runs in a worker thread (``asyncio.to_thread``): a tool that blocks (HTTP, sqlite, a
subprocess) must not stall the caller's event loop while the turn waits for it. Async handlers are
awaited on the loop.

Failures are the model's business, not the user's: an unknown tool, bad arguments or an exception in
a handler come back to the model as a tool result with ``is_error`` set, and the turn goes on.

``@tool`` reads the schema from the function's type hints and docstring (``tool_schema``: Literal and
Enum choices, dataclasses and pydantic models, typed lists, per-parameter descriptions from an
``Args:`` section) and converts the model's JSON arguments back to those types before the call.
"""

from __future__ import annotations

import asyncio
import inspect
import typing
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from sessionmem.errors import SessionMemError
from sessionmem.messages import ToolCall
from sessionmem.tools.json_schema import ArgumentError, describe

Handler = Callable[..., Any]
ArgumentConverter = Callable[[Mapping[str, Any]], dict[str, Any]]


class ToolError(SessionMemError):
    """Raise from a handler to send a clean error message (no exception type) back to the model."""


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object
    handler: Handler  # (**arguments) -> str | dict | list, sync or async
    convert: ArgumentConverter | None = None  # JSON arguments -> the handler's types (raises ValueError)

    def schema(self) -> dict[str, Any]:
        """OpenAI function-calling schema."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


def tool(fn: Handler | None = None, *, name: str | None = None, description: str | None = None) -> Any:
    """Make a :class:`Tool` from a function; the schema comes from its type hints, the description and
    each parameter's from its docstring. Use bare (``@tool``) or with options (``@tool(name="lookup")``).
    A type with no JSON schema raises ``ToolSchemaError`` here, naming the parameter."""

    def build(func: Handler) -> Tool:
        signature = describe(func, name or func.__name__)
        return Tool(
            name=name or func.__name__,
            description=description or signature.description,
            parameters=signature.parameters,
            handler=func,
            convert=signature.convert,
        )

    return build(fn) if fn is not None else build


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    content: str
    is_error: bool = False


def tool_map(tools: Iterable[Tool]) -> dict[str, Tool]:
    """Tools by name; later tools with the same name replace earlier ones."""
    return {t.name: t for t in tools}


async def dispatch(tools: Mapping[str, Tool], call: ToolCall) -> ToolOutcome:
    """Run one tool call; every failure becomes an error result for the model. The one place tools
    are called: the runner's turns and the MCP server come through here."""
    found = tools.get(call.name)
    if found is None:
        available = ", ".join(sorted(tools)) or "none"
        return ToolOutcome(f"Unknown tool: {call.name}. Available tools: {available}.", is_error=True)
    try:
        arguments = checked_arguments(found, call)
    except ArgumentError as exc:
        return ToolOutcome(f"Invalid arguments for {call.name}: {exc}", is_error=True)
    try:
        if inspect.iscoroutinefunction(found.handler):
            result = await found.handler(**arguments)
        else:
            result = await asyncio.to_thread(found.handler, **arguments)
        if inspect.isawaitable(result):  # a sync callable that returned an awaitable (e.g. a partial)
            result = await typing.cast(Awaitable[Any], result)
    except ToolError as exc:
        return ToolOutcome(str(exc), is_error=True)
    except Exception as exc:
        return ToolOutcome(f"Tool {call.name} failed: {type(exc).__name__}: {exc}", is_error=True)
    return ToolOutcome(render_result(result))


def checked_arguments(found: Tool, call: ToolCall) -> dict[str, Any]:
    """The call's arguments as ``found``'s handler takes them, or ``ArgumentError`` saying what is wrong in
    the model's terms: refused or unparsable arguments, an argument the tool does not take (its schema
    does not list it, or its handler has no such parameter), a value of the wrong type, a missing one.
    Checked here, before the call, so no message names a Python function."""
    if call.refused_arguments is not None:
        raise ArgumentError(call.refused_arguments)
    if call.unparsed_arguments is not None:
        raise ArgumentError(unparsed_problem(call.unparsed_arguments))
    arguments = dict(call.arguments)
    signature = _signature(found.handler)
    declared = _declared(found.parameters)
    accepted = _accepted(signature)
    unexpected = [
        name
        for name in arguments
        if (declared is not None and name not in declared) or (accepted is not None and name not in accepted)
    ]
    if unexpected:
        listed = declared if declared is not None else sorted(accepted or ())
        takes = [n for n in listed if accepted is None or n in accepted]
        names = ", ".join(repr(n) for n in unexpected)
        raise ArgumentError(
            f"unexpected argument{'s' if len(unexpected) > 1 else ''} {names} "
            f"(it takes: {', '.join(takes) if takes else 'no arguments'})"
        )
    if found.convert is not None:
        try:
            arguments = found.convert(arguments)
        except ArgumentError:
            raise
        except (ValueError, TypeError) as exc:
            raise ArgumentError(str(exc)) from None
    if signature is not None:
        try:
            signature.bind(**arguments)
        except TypeError as exc:  # inspect's own words ("missing a required argument: 'q'"), no qualname
            raise ArgumentError(str(exc)) from None
    return arguments


def _signature(handler: Handler) -> inspect.Signature | None:
    try:
        return inspect.signature(handler)
    except (TypeError, ValueError):  # a builtin without one: it checks its own arguments
        return None


def _declared(parameters: Mapping[str, Any]) -> list[str] | None:
    """The argument names the tool's schema lists, or None when it allows others."""
    properties = parameters.get("properties")
    if not isinstance(properties, Mapping) or parameters.get("additionalProperties") not in (None, False):
        return None
    return list(properties)


def _accepted(signature: inspect.Signature | None) -> set[str] | None:
    """The keyword arguments the handler has a parameter for, or None when it takes any (``**kwargs``)."""
    if signature is None:
        return None
    names = set()
    for param in signature.parameters.values():
        if param.kind is param.VAR_KEYWORD:
            return None
        if param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            names.add(param.name)
    return names


def unparsed_problem(text: str) -> str:
    """Why argument text is unusable, with the text itself (cut), for the model to correct its call."""
    shown = text if len(text) <= 300 else text[:300] + "…"
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        return f"not valid JSON ({exc}); send the arguments as one JSON object. Received: {shown}"
    what = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}.get(
        type(value), "null"
    )
    return f"the arguments are a JSON {what}, not an object; send one JSON object. Received: {shown}"


def render_result(result: Any) -> str:
    if result is None:
        return ""
    if isinstance(result, str):
        return result
    return orjson.dumps(result, default=str).decode()
