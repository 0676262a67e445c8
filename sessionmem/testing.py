"""Test helpers for users of sessionmem: drive long conversations with a scripted model.

    from sessionmem.testing import ScriptedModel, flush_aware

    model = ScriptedModel(["Hi!", "Noted."], responder=flush_aware())

Names load lazily, so importing this module costs nothing until one is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sessionmem.model.scripted import (
        NO_REPLY,
        ScriptedModel,
        ScriptExhausted,
        count_request_tokens,
        default_summary,
        echo,
        flush_aware,
        flush_write,
    )

__all__ = [
    "NO_REPLY",
    "ScriptExhausted",
    "ScriptedModel",
    "count_request_tokens",
    "default_summary",
    "echo",
    "flush_aware",
    "flush_write",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("sessionmem.model.scripted"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
