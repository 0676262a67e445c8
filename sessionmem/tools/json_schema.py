"""A tool's JSON schema from its function's type hints and docstring, and the converter that turns the
model's JSON arguments back into the declared types.

What maps to what (the schema a provider receives):

- ``str``, ``int``, ``float``, ``bool`` -> ``string``, ``integer``, ``number``, ``boolean``; ``Any``: any
- ``Literal["a", "b"]`` and ``Enum`` subclasses -> ``enum`` (an Enum argument arrives as the member)
- ``list[X]``, ``tuple[X, ...]``, ``set[X]`` -> ``array`` with ``items``; ``dict[str, X]`` -> ``object`` with
  ``additionalProperties``
- dataclasses and pydantic models -> ``object`` with their fields (arguments arrive as instances; a
  dataclass accepts no unknown keys, a model validates as pydantic does)
- ``X | None`` -> X, not required (a missing argument arrives as ``None``); ``X | Y`` -> ``anyOf``
- ``Annotated[X, "description"]`` -> X with that description
- a parameter with a default is not required

Descriptions come from the docstring: the prose before the first section is the tool's description, and
a Google-style ``Args:`` section (or ``Attributes:`` on a dataclass) or a NumPy-style ``Parameters``
section describes each parameter. Anything else (a class with no schema, a fixed-length tuple, a
recursive type) is refused when the tool is made, with an error naming the tool and the parameter.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

from sessionmem.errors import UsageError

Converter = Callable[[Any, str], Any]  # (value, where) -> converted value; raises ArgumentError

_PRIMITIVES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_SEQUENCES = (list, tuple, set, frozenset, Sequence, typing.Sequence, typing.List, typing.Set)  # noqa: UP006
_MAPPINGS = (dict, Mapping, typing.Mapping, typing.Dict)  # noqa: UP006
_ARG_SECTIONS = {
    "args",
    "arguments",
    "parameters",
    "params",
    "attributes",
    "keyword args",
    "keyword arguments",
}
_OTHER_SECTIONS = {
    "returns",
    "return",
    "yields",
    "yield",
    "raises",
    "examples",
    "example",
    "notes",
    "note",
    "see also",
    "references",
    "warnings",
    "warning",
    "todo",
    "other parameters",
}


class ToolSchemaError(UsageError):
    """A tool's function cannot be described to a model (raised when the tool is made)."""


class ArgumentError(ValueError):
    """The model's arguments do not fit the function's types (sent back to the model as a tool error).

    ``argument``: the argument at fault, when one is (:meth:`about` names it in the message too), so a
    handler can tell the model which one to fix."""

    def __init__(self, message: str, *, argument: str | None = None) -> None:
        super().__init__(message)
        self.argument = argument

    @classmethod
    def about(cls, argument: str, problem: str) -> ArgumentError:
        """``invalid argument '<argument>': <problem>``."""
        return cls(f"invalid argument '{argument}': {problem}", argument=argument)


@dataclass(frozen=True, slots=True)
class ToolSignature:
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object
    convert: Callable[[Mapping[str, Any]], dict[str, Any]] | None  # None: arguments pass through as sent


def describe(func: Callable[..., Any], name: str | None = None) -> ToolSignature:
    """The description, argument schema and converter of ``func`` (see the module docstring)."""
    label = name or str(getattr(func, "__name__", repr(func)))
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except NameError as exc:
        raise ToolSchemaError(
            f"tool {label!r}: cannot resolve its type hints ({exc}); define the types it uses at module level"
        ) from None
    summary, documented = parse_docstring(func.__doc__ or "")
    properties: dict[str, Any] = {}
    required: list[str] = []
    converters: dict[str, Converter] = {}
    fill_none: list[str] = []
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        where = f"tool {label!r}, parameter {param.name!r}"
        hint = hints.get(param.name, str)
        built = _Builder(where).build(hint)
        schema = dict(built.schema)
        if documented.get(param.name):  # the docstring's word on this parameter wins over its type's
            schema["description"] = documented[param.name]
        properties[param.name] = schema
        if param.default is inspect.Parameter.empty:
            if built.optional:
                fill_none.append(param.name)
            else:
                required.append(param.name)
        if built.convert is not None:
            converters[param.name] = built.convert
    parameters = {"type": "object", "properties": properties, "required": required}
    convert = _arguments_converter(converters, fill_none) if converters or fill_none else None
    return ToolSignature(summary or label, parameters, convert)


def _arguments_converter(
    converters: dict[str, Converter], fill_none: list[str]
) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    def convert(arguments: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(arguments)
        for name in fill_none:
            out.setdefault(name, None)
        for name, converter in converters.items():
            if name in out:
                out[name] = converter(out[name], name)
        return out

    return convert


# ---------------------------------------------------------------------------- type hints -> schema


@dataclass(frozen=True, slots=True)
class _Built:
    schema: dict[str, Any]
    convert: Converter | None = None  # None: the JSON value is already what the function wants
    optional: bool = False  # the hint admits None


class _Builder:
    """Schemas and converters for one parameter; errors name it (``where``)."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.stack: list[type] = []  # classes being expanded, to refuse recursive types

    def fail(self, hint: Any, why: str = "") -> ToolSchemaError:
        shown = getattr(hint, "__name__", None) or repr(hint)
        reason = why or (
            "it has no JSON schema; use str, int, float, bool, Any, Literal[...], an Enum, a dataclass, "
            "a pydantic model, list[...]/tuple[..., ...]/set[...], dict[str, ...], or X | None"
        )
        return ToolSchemaError(f"{self.where}: unsupported type {shown}: {reason}")

    def build(self, hint: Any) -> _Built:
        origin = typing.get_origin(hint)
        args = typing.get_args(hint)
        if origin is typing.Annotated:
            inner = self.build(args[0])
            notes = [m for m in args[1:] if isinstance(m, str)]
            notes += [m.description for m in args[1:] if isinstance(getattr(m, "description", None), str)]
            schema = {**inner.schema, "description": notes[0]} if notes else inner.schema
            return _Built(schema, inner.convert, inner.optional)
        if hint is Any:
            return _Built({})
        if hint is None or hint is type(None):
            return _Built({"type": "null"}, optional=True)
        if origin in (Union, types.UnionType):
            return self._union(args)
        if origin is typing.Literal:
            return _choices(list(args), convert=_literal(list(args)))
        if hint in _PRIMITIVES:
            return _Built({"type": _PRIMITIVES[hint]})
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return _choices([m.value for m in hint], convert=_enum(hint))
        if hint in _SEQUENCES or origin in _SEQUENCES:
            return self._array(hint, origin, args)
        if hint in _MAPPINGS or origin in _MAPPINGS:
            return self._mapping(hint, args)
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            return self._expand(hint, self._dataclass)
        if isinstance(hint, type) and _is_pydantic_model(hint):
            return self._expand(hint, self._pydantic)
        raise self.fail(hint)

    def _union(self, args: tuple[Any, ...]) -> _Built:
        options = [a for a in args if a is not type(None)]
        optional = len(options) < len(args)
        built = [self.build(a) for a in options]
        if len(built) == 1:
            inner = built[0]
            convert = inner.convert
            if convert is not None and optional:
                convert = _none_or(convert)
            return _Built(inner.schema, convert, True if optional else inner.optional)
        convert = _first_fit([b.convert for b in built]) if any(b.convert for b in built) else None
        if convert is not None and optional:
            convert = _none_or(convert)
        return _Built({"anyOf": [b.schema for b in built]}, convert, optional)

    def _array(self, hint: Any, origin: Any, args: tuple[Any, ...]) -> _Built:
        kind = origin or hint
        if kind is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            raise self.fail(hint, "fixed-length tuples have no portable schema; use tuple[X, ...] or list[X]")
        item = self.build(args[0]) if args else _Built({})
        schema: dict[str, Any] = {"type": "array", "items": item.schema}
        if kind in (set, frozenset, typing.Set):  # noqa: UP006
            schema["uniqueItems"] = True
        make: Callable[[list[Any]], Any] = {tuple: tuple, set: set, frozenset: frozenset}.get(kind, list)
        if item.convert is None and make is list:
            return _Built(schema)  # a JSON array is already a list
        return _Built(schema, _sequence(item.convert, make))

    def _mapping(self, hint: Any, args: tuple[Any, ...]) -> _Built:
        if args and args[0] is not str:
            raise self.fail(hint, "JSON object keys are strings; use dict[str, X]")
        value = self.build(args[1]) if len(args) == 2 else _Built({})
        schema: dict[str, Any] = {"type": "object"}
        if value.schema:
            schema["additionalProperties"] = value.schema
        return _Built(schema, None if value.convert is None else _mapping(value.convert))

    def _expand(self, cls: type, how: Callable[[type], _Built]) -> _Built:
        if cls in self.stack:
            raise self.fail(cls, "recursive types cannot be described to a model")
        self.stack.append(cls)
        try:
            return how(cls)
        finally:
            self.stack.pop()

    def _dataclass(self, cls: type) -> _Built:
        try:
            hints = typing.get_type_hints(cls, include_extras=True)
        except NameError as exc:
            raise self.fail(cls, f"cannot resolve its field types ({exc})") from None
        summary, documented = parse_docstring(_own_doc(cls))
        properties: dict[str, Any] = {}
        required: list[str] = []
        converters: dict[str, Converter] = {}
        optional: list[str] = []
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            built = self.build(hints.get(f.name, Any))
            schema = dict(built.schema)
            if documented.get(f.name):
                schema["description"] = documented[f.name]
            properties[f.name] = schema
            has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            if not has_default:
                (optional if built.optional else required).append(f.name)
            if built.convert is not None:
                converters[f.name] = built.convert
        schema = _object(properties, required, summary)
        schema["additionalProperties"] = False
        return _Built(schema, _dataclass_converter(cls, set(properties), required, optional, converters))

    def _pydantic(self, cls: type) -> _Built:
        fields: dict[str, Any] = cls.model_fields  # type: ignore[attr-defined]
        properties: dict[str, Any] = {}
        required: list[str] = []
        for name, info in fields.items():
            key = info.alias if isinstance(info.alias, str) else name
            built = self.build(info.annotation)
            schema = dict(built.schema)
            if info.description and "description" not in schema:
                schema["description"] = info.description
            properties[key] = schema
            if info.is_required():
                required.append(key)
        summary, _ = parse_docstring(_own_doc(cls))
        return _Built(_object(properties, required, summary), _pydantic_converter(cls))


def _object(properties: dict[str, Any], required: list[str], description: str) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties, "required": required}
    if description:
        schema["description"] = description
    return schema


def _choices(values: list[Any], *, convert: Converter) -> _Built:
    kinds = {_PRIMITIVES.get(type(v)) for v in values}
    schema: dict[str, Any] = {"enum": values}
    if len(kinds) == 1 and None not in kinds:
        schema = {"type": kinds.pop(), "enum": values}
    return _Built(schema, convert)


def _is_pydantic_model(cls: type) -> bool:
    pydantic = sys.modules.get("pydantic")  # a model class exists only if pydantic was imported
    return pydantic is not None and issubclass(cls, pydantic.BaseModel)


def _own_doc(cls: type) -> str:
    """The class's own docstring, not the one dataclasses or pydantic generate (``Name(a: int)``)."""
    doc = cls.__dict__.get("__doc__") or ""
    return "" if doc.startswith(f"{cls.__name__}(") else doc


# ---------------------------------------------------------------------------- JSON -> declared types


def _shown(values: Sequence[Any]) -> str:
    return ", ".join(repr(v) for v in values)


def _literal(values: list[Any]) -> Converter:
    def convert(value: Any, where: str) -> Any:
        if value in values and type(value) in {type(v) for v in values}:
            return value
        raise ArgumentError(f"{where}: {value!r} is not one of {_shown(values)}")

    return convert


def _enum(cls: type[enum.Enum]) -> Converter:
    def convert(value: Any, where: str) -> Any:
        if isinstance(value, cls):
            return value
        try:
            return cls(value)
        except ValueError:
            allowed = _shown([m.value for m in cls])
            raise ArgumentError(f"{where}: {value!r} is not one of {allowed}") from None

    return convert


def _none_or(inner: Converter) -> Converter:
    def convert(value: Any, where: str) -> Any:
        return None if value is None else inner(value, where)

    return convert


def _first_fit(converters: list[Converter | None]) -> Converter:
    """The first option that takes the value; an option with no converter (a plain JSON type) takes
    whatever no other option took."""
    active = [c for c in converters if c is not None]
    passthrough = len(active) < len(converters)

    def convert(value: Any, where: str) -> Any:
        problems = []
        for converter in active:
            try:
                return converter(value, where)
            except ArgumentError as exc:
                problems.append(str(exc))
        if passthrough:
            return value
        raise ArgumentError("; ".join(problems))

    return convert


def _sequence(item: Converter | None, make: Callable[[list[Any]], Any]) -> Converter:
    def convert(value: Any, where: str) -> Any:
        if not isinstance(value, list):
            raise ArgumentError(f"{where}: expected an array, got {type(value).__name__}")
        items = value if item is None else [item(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return make(items)

    return convert


def _mapping(value_converter: Converter) -> Converter:
    def convert(value: Any, where: str) -> Any:
        if not isinstance(value, dict):
            raise ArgumentError(f"{where}: expected an object, got {type(value).__name__}")
        return {k: value_converter(v, f"{where}.{k}") for k, v in value.items()}

    return convert


def _dataclass_converter(
    cls: type, known: set[str], required: list[str], optional: list[str], converters: dict[str, Converter]
) -> Converter:
    def convert(value: Any, where: str) -> Any:
        if isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            raise ArgumentError(f"{where}: expected an object, got {type(value).__name__}")
        unknown = sorted(set(value) - known)
        if unknown:
            expected = _shown(sorted(known))
            raise ArgumentError(f"{where}: unknown field(s) {_shown(unknown)}; expected {expected}")
        missing = [name for name in required if name not in value]
        if missing:
            raise ArgumentError(f"{where}: missing required field(s) {_shown(missing)}")
        fields = {name: None for name in optional} | dict(value)
        for name, converter in converters.items():
            if name in fields:
                fields[name] = converter(fields[name], f"{where}.{name}")
        return cls(**fields)

    return convert


def _pydantic_converter(cls: type) -> Converter:
    def convert(value: Any, where: str) -> Any:
        from pydantic import ValidationError

        try:
            return cls.model_validate(value)  # type: ignore[attr-defined]
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(value)'}: {err['msg']}" for err in exc.errors()
            )
            raise ArgumentError(f"{where}: {problems}") from None

    return convert


# ---------------------------------------------------------------------------- docstrings

_GOOGLE_HEADER = re.compile(r"^(?P<name>[A-Za-z][A-Za-z ]*):\s*$")
_GOOGLE_ENTRY = re.compile(r"^\*{0,2}(?P<name>\w+)\s*(?:\([^)]*\))?\s*:\s*(?P<text>.*)$")
_NUMPY_RULE = re.compile(r"^-{3,}\s*$")
_NUMPY_ENTRY = re.compile(r"^\*{0,2}(?P<name>\w+)\s*(?::.*)?$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """``(description, {parameter: description})`` from a Google- or NumPy-style docstring.

    The description is the prose before the first section (``Args:``, ``Returns:``, ``Parameters`` over a
    rule of dashes, ...); entries of the argument sections may wrap onto more-indented lines.
    """
    lines = inspect.cleandoc(doc).splitlines() if doc else []
    description: list[str] = []
    params: dict[str, str] = {}
    i = 0
    in_prose = True
    while i < len(lines):
        line = lines[i]
        header = _section_at(lines, i)
        if header is None:
            if in_prose:
                description.append(line)
            i += 1
            continue
        in_prose = False
        name, numpy = header
        i += 2 if numpy else 1
        body_end = _section_end(lines, i, numpy)
        if name in _ARG_SECTIONS:
            params.update(_entries(lines[i:body_end], numpy))
        i = body_end
    return "\n".join(description).strip(), params


def _section_at(lines: list[str], i: int) -> tuple[str, bool] | None:
    """``(section name, is NumPy style)`` when a section header starts at line ``i``, else None."""
    line = lines[i]
    if line != line.lstrip():
        return None
    name = line.strip().rstrip(":").strip().lower()
    if i + 1 < len(lines) and _NUMPY_RULE.match(lines[i + 1].strip()) and line.strip():
        return name, True
    match = _GOOGLE_HEADER.match(line)
    if match and match.group("name").strip().lower() in _ARG_SECTIONS | _OTHER_SECTIONS:
        return name, False
    return None


def _section_end(lines: list[str], start: int, numpy: bool) -> int:
    i = start
    while i < len(lines):
        if lines[i].strip() and _section_at(lines, i) is not None:
            return i
        if not numpy and lines[i].strip() and lines[i] == lines[i].lstrip():
            return i  # Google sections are indented; a flush-left line ends them
        i += 1
    return i


def _entries(body: list[str], numpy: bool) -> dict[str, str]:
    entries: dict[str, list[str]] = {}
    indent: int | None = None
    current: str | None = None
    for raw in body:
        if not raw.strip():
            continue
        depth = len(raw) - len(raw.lstrip())
        if indent is None:
            indent = depth
        text = raw.strip()
        if depth <= indent:
            match = (_NUMPY_ENTRY if numpy else _GOOGLE_ENTRY).match(text)
            if match:
                current = match.group("name")
                first = "" if numpy else match.group("text").strip()
                entries[current] = [first] if first else []
                continue
        if current is not None:
            entries[current].append(text)
    return {name: " ".join(parts).strip() for name, parts in entries.items() if parts}
