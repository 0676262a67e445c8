"""Checks of the arguments a model sends to the memory tools: each error names the argument and what is
wrong with it (``ArgumentError.about``), so the model can fix its call; numbers come as models send them
(``5``, ``5.0`` or ``"5"``)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import date
from typing import Any

from sessionmem.messages import text_problem
from sessionmem.tools.json_schema import ArgumentError

_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def required_str(args: Mapping[str, Any], name: str) -> str:
    value = args.get(name)
    if value is None:
        raise ArgumentError.about(name, "is required")
    problem = text_problem(value)  # not a string, or a lone surrogate no result could echo back
    if problem is not None:
        raise ArgumentError.about(name, problem)
    assert isinstance(value, str)
    if not value.strip():
        raise ArgumentError.about(name, "must not be empty")
    return value.strip()


def optional_int(args: Mapping[str, Any], name: str, *, minimum: int | None) -> int | None:
    """An integer, also from an integral float (5.0) or a digit string ("5"), as models send both."""
    value = args.get(name)
    if value is None:
        return None
    number: float | int | None = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif (isinstance(value, float) and math.isfinite(value) and value.is_integer()) or (
        isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value)
    ):
        number = int(value)
    if number is None:
        raise ArgumentError.about(name, f"must be an integer, got {value!r}")
    if minimum is not None and number < minimum:
        raise ArgumentError.about(name, f"must be at least {minimum}, got {number}")
    return int(number)


def optional_number(args: Mapping[str, Any], name: str, *, minimum: float | None) -> float | None:
    value = args.get(name)
    if value is None:
        return None
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            number = None
    if number is None or not math.isfinite(number):
        raise ArgumentError.about(name, f"must be a number, got {value!r}")
    if minimum is not None and number < minimum:
        raise ArgumentError.about(name, f"must be at least {minimum:g}, got {number:g}")
    return number


def optional_date(args: Mapping[str, Any], name: str) -> date | None:
    value = args.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str) or not _DATE_RE.match(value.strip()):
        raise ArgumentError.about(name, f"must be a date as YYYY-MM-DD, got {value!r}")
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        raise ArgumentError.about(name, f"is not a real calendar date: {value!r}") from None
