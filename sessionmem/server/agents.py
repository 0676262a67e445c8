"""The agents an HTTP server of sessionmem serves: what its routes ask of them.

The gateway (``/v1/...``) and the management API and inspector (``/api/...``, the page) are written
against :class:`ServedAgents`, so either side can be tested with the other absent. The server's app
holds one implementation that opens each agent's runner (and its memory index) once, from the same
resolved :class:`~sessionmem.context.Context` the other commands use, and closes them on shutdown.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sessionmem.context import Context
    from sessionmem.session.runner import SessionRunner


class ServedAgents(Protocol):
    """The agents a server answers for, each opened at most once and shared by every request."""

    def agent_ids(self) -> Sequence[str]:
        """The agents this server serves, the default one first."""
        ...

    def context(self, agent_id: str) -> Context:
        """The agent's resolved settings (config, workspace, state and sessions folders, environment).
        An agent that is not served raises :class:`~sessionmem.errors.UsageError`."""
        ...

    async def runner(self, agent_id: str) -> SessionRunner:
        """The agent's runner (with its memory index when memory search is on), opened on first use."""
        ...
