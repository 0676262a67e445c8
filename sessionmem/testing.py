"""The testing kit: drive long conversations through the real runner with a scripted model.

    from sessionmem.testing import ScriptedModel, flush_aware, flush_write, small_window_config

    config = small_window_config(3000)  # the flush and compaction come within a few turns
    model = ScriptedModel(responder=flush_aware(flush=flush_write("- the user prefers metric\\n")))

- :class:`ScriptedModel`: steps (replies, tool calls, exceptions, callables), then a ``responder``;
  deterministic token usage; ``context_window=`` raises the provider's overflow past that size.
- :func:`flush_aware` routes by ``request.purpose``: the flush, the compaction summary, the rest;
  :func:`flush_write` writes today's daily log (the user's time zone, a frozen clock's day) in every
  flush; :func:`overflow_on_turn` raises the provider's context overflow once, on turn N.
- :func:`small_window_config`: a config whose flush and compaction thresholds come within a few turns.
- :func:`run_replay`: drive the runner from a recorded transcript (the CLI's ``sessionmem replay``).

Every event the runner reports carries ``session_key`` and ``session_id``, so a test can follow one
session in the stream of a runner serving many.

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
        flush_write_target,
        overflow_on_turn,
    )
    from sessionmem.runs.common import small_window_config
    from sessionmem.runs.recorded import ReplayReport, run_replay

_MODULES = {
    "NO_REPLY": "sessionmem.model.scripted",
    "ReplayReport": "sessionmem.runs.recorded",
    "ScriptExhausted": "sessionmem.model.scripted",
    "ScriptedModel": "sessionmem.model.scripted",
    "count_request_tokens": "sessionmem.model.scripted",
    "default_summary": "sessionmem.model.scripted",
    "echo": "sessionmem.model.scripted",
    "flush_aware": "sessionmem.model.scripted",
    "flush_write": "sessionmem.model.scripted",
    "flush_write_target": "sessionmem.model.scripted",
    "overflow_on_turn": "sessionmem.model.scripted",
    "run_replay": "sessionmem.runs.recorded",
    "small_window_config": "sessionmem.runs.common",
}

__all__ = [
    "NO_REPLY",
    "ReplayReport",
    "ScriptExhausted",
    "ScriptedModel",
    "count_request_tokens",
    "default_summary",
    "echo",
    "flush_aware",
    "flush_write",
    "flush_write_target",
    "overflow_on_turn",
    "run_replay",
    "small_window_config",
]


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
