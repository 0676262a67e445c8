"""How every config model is spelled and checked: the camelCase base model and the helpers of validation.

:mod:`sessionmem.config` builds its settings on :class:`CamelModel` (OpenClaw-compatible camelCase keys,
Python names accepted too, unknown keys refused, frozen, and knowing which values the user wrote). The
helpers here are the small pieces of reading a config document: path settings resolved once
(:func:`file_path`), byte sizes (:func:`parse_byte_size`), documents laid over one another
(:func:`deep_merge`) and pydantic's errors as one message naming each offending key
(:func:`validation_message`). ``camel_case`` is also the spelling of every JSON output's keys.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from sessionmem.pathnames import given_path


def camel_case(name: str) -> str:
    """``snake_name`` as ``snakeName``: the spelling of every config key and every JSON output's keys."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


class CamelModel(BaseModel):
    """Base of every settings model: camelCase aliases, populate by Python name too, unknown keys
    rejected, frozen."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True, alias_generator=camel_case)

    def user_set(self, name: str) -> bool:
        """True when field ``name`` was written (a config file, a dict, a keyword argument, an update),
        False when it holds its default."""
        return name in self.model_fields_set


def file_path(value: str | None) -> str | None:
    """A path setting resolved once, when the config is read (:func:`~sessionmem.pathnames.given_path`:
    ``~`` expanded, against the current folder of that moment). What names no file is kept as written:
    a URL or DSN (``://``), an ``hf:`` URI, a ``key=value`` string (refused later, saying why) and the
    ``sqlite`` keyword of ``session.store``."""
    text = (value or "").strip()
    if not text or "://" in text or "=" in text or text.startswith("hf:") or text.lower() == "sqlite":
        return value
    return str(given_path(text))


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` laid on ``base``, nested dicts merged key by key (the layering
    :func:`~sessionmem.config.merge` and :meth:`~sessionmem.config.Config.for_agent` use on config
    documents)."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def validation_message(exc: ValidationError) -> str:
    """pydantic's errors as one line: ``invalid config: <key.path>: <problem>; ...``."""
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(root)"
        lines.append(f"{where}: {err['msg']}")
    return "invalid config: " + "; ".join(lines)


BYTE_UNITS = {"": 1, "b": 1, "kb": 1024, "k": 1024, "mb": 1024**2, "m": 1024**2, "gb": 1024**3, "g": 1024**3}


def parse_byte_size(value: str) -> int:
    """Parse ``"2mb"``, ``"512 KB"``, ``"1048576"`` into bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", value)
    if not match or match.group(2).lower() not in BYTE_UNITS:
        raise ValueError(f"not a byte size: {value!r} (use e.g. 2097152, '512kb' or '2mb')")
    return int(float(match.group(1)) * BYTE_UNITS[match.group(2).lower()])
