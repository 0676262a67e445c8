"""The agents a server serves, each opened once: :class:`AgentPool`, the app's :class:`ServedAgents`.

Each agent's runner and memory index are opened on the first request that needs them
(:func:`sessionmem.assembly.open_runner`, as ``sessionmem chat`` opens them), shared by every request
after it, and closed by :meth:`AgentPool.aclose` at shutdown: the turns in flight finish first (the
runner's rule), then the index closes. Two requests racing for an agent not opened yet open it once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from sessionmem.errors import SessionMemError, UsageError

if TYPE_CHECKING:
    from sessionmem.context import Context
    from sessionmem.model.base import Model
    from sessionmem.session.runner import SessionRunner
    from sessionmem.session.turn.events import EventCallback

log = logging.getLogger(__name__)

ModelFactory = Callable[["Context"], "Model"]


class AgentPool:
    """:class:`~sessionmem.server.agents.ServedAgents` over resolved contexts, the first the default.

    ``model_for(context)`` makes the model an agent's runner calls (the gateway: ``LiteLLMModel`` of
    the agent's configured ``model``). An index that cannot be opened is logged and the agent runs
    without memory search, as ``sessionmem chat`` does."""

    def __init__(
        self,
        contexts: Iterable[Context],
        model_for: ModelFactory,
        *,
        on_event: EventCallback | None = None,
        command_source: str = "gateway",
    ) -> None:
        self._contexts = {context.agent_id: context for context in contexts}
        if not self._contexts:
            raise UsageError("a server needs at least one agent")
        self._model_for = model_for
        self._on_event = on_event
        self._command_source = command_source
        self._runners: dict[str, SessionRunner] = {}
        self._opening: dict[str, asyncio.Lock] = {}
        self._stack = contextlib.AsyncExitStack()
        self._closed = False

    def agent_ids(self) -> Sequence[str]:
        return tuple(self._contexts)

    def context(self, agent_id: str) -> Context:
        try:
            return self._contexts[agent_id]
        except KeyError:
            served = ", ".join(repr(a) for a in self._contexts)
            raise UsageError(f"agent {agent_id!r} is not served here (served: {served})") from None

    async def runner(self, agent_id: str) -> SessionRunner:
        found = self._runners.get(agent_id)
        if found is not None:
            return found
        context = self.context(agent_id)
        async with self._opening.setdefault(agent_id, asyncio.Lock()):
            found = self._runners.get(agent_id)
            if found is not None:
                return found
            if self._closed:
                raise UsageError("the server is shutting down")
            from sessionmem.assembly import open_runner

            def without_memory(exc: SessionMemError) -> None:
                log.warning(
                    "agent %s: memory index unavailable, serving without memory_search: %s", agent_id, exc
                )

            runner = await self._stack.enter_async_context(
                open_runner(
                    context,
                    self._model_for(context),
                    on_event=self._on_event,
                    on_index_error=without_memory,
                    command_source=self._command_source,
                )
            )
            self._runners[agent_id] = runner
            return runner

    def opened(self) -> tuple[str, ...]:
        """The agents whose runner is open."""
        return tuple(self._runners)

    async def aclose(self) -> None:
        """Close every runner opened (turns in flight finish first), the last opened first. Idempotent."""
        self._closed = True
        self._runners.clear()
        await self._stack.aclose()
