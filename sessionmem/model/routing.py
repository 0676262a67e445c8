"""Which model answers which request: the agent's model, or the one configured for a housekeeping call.

Every request says what it is for (:attr:`~sessionmem.model.base.ModelRequest.purpose`): ``turn`` (the
user's turn and its tool calls), ``flush`` (the silent memory flush), ``compaction`` (the summary) and
``slug`` (the name of a ``/new`` memory file). OpenClaw's keys pick a cheaper or local model for the
housekeeping: ``agents.defaults.compaction.model`` for the summary and the slug,
``agents.defaults.compaction.memoryFlush.model`` for the flush. A developer who routes by themselves can
instead give the runner one model whose ``complete`` looks at ``request.purpose``.

A configured name becomes a :class:`~sessionmem.model.litellm.LiteLLMModel`. When the agent's model is a
LiteLLMModel of the same provider (``openai/...`` and ``openai/...``), the new one keeps its endpoint,
key, headers and timeout: a proxy serving the agent serves its housekeeping too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessionmem.model.base import Model, Purpose

if TYPE_CHECKING:
    from sessionmem.config import AgentConfig


def configured_name(agent: AgentConfig, purpose: Purpose) -> str | None:
    """The model name configured for ``purpose``, or None (the agent's model answers)."""
    compaction = agent.compaction
    if purpose == "flush":
        return compaction.memory_flush.model or None
    if purpose in ("compaction", "slug"):
        return compaction.model or None
    return None


def model_for(main: Model, agent: AgentConfig, purpose: Purpose) -> Model:
    """The model that answers a ``purpose`` request: ``main`` unless the config names another."""
    name = configured_name(agent, purpose)
    if name is None or name == main.name:
        return main
    from sessionmem.model.litellm import LiteLLMModel

    if isinstance(main, LiteLLMModel) and main.provider and name.split("/", 1)[0] == main.provider:
        return main.with_model(name)
    return LiteLLMModel(name)
