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

from typing import TYPE_CHECKING

from sessionmem.lazy import lazy_names

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

__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "sessionmem.model.scripted": [
            "NO_REPLY",
            "ScriptExhausted",
            "ScriptedModel",
            "count_request_tokens",
            "default_summary",
            "echo",
            "flush_aware",
            "flush_write",
            "flush_write_target",
            "overflow_on_turn",
        ],
        "sessionmem.runs.common": ["small_window_config"],
        "sessionmem.runs.recorded": ["ReplayReport", "run_replay"],
    },
)

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
