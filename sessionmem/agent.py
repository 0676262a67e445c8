"""An agent, opened: its session runner and its memory index, built from a resolved context.

``sessionmem chat`` and the gateway (``sessionmem serve``) run the same agent the same way: the memory
index of the agent (when memory search is on; watched when ``sync.watch`` says so, as a long-lived
process should), the runner over it with the agent's config, workspace and state folder, and both
closed together (the runner lets its turns in flight finish first). This is that one place.

Use::

    async with open_runner(context, LiteLLMModel("openai/gpt-4o-mini"), on_event=print) as runner:
        result = await runner.open("agent:main:main").run_turn("hello")

``context`` is a :class:`~sessionmem.context.Context` (``sessionmem.context.resolve``). An index
that cannot be opened (its folder not writable, a PostgreSQL server down) is raised, unless
``on_index_error`` is given: then it is told the error and the agent runs without memory search.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from sessionmem.errors import SessionMemError
from sessionmem.safefs import make_private_dirs

if TYPE_CHECKING:
    from sessionmem.context import Context
    from sessionmem.model.base import Model
    from sessionmem.session.turn.events import EventCallback
    from sessionmem.session.runner import SessionRunner


@contextlib.asynccontextmanager
async def open_runner(
    context: Context,
    model: Model,
    *,
    on_event: EventCallback | None = None,
    on_index_error: Callable[[SessionMemError], None] | None = None,
    command_source: str | None = None,
) -> AsyncIterator[SessionRunner]:
    """The agent's runner over its memory index; on exit the runner's turns in flight finish, then
    both close.

    The index is opened in a worker thread (it may take a while) and the runner on the event loop's
    thread (its session store may hold a connection bound to that thread)."""
    from sessionmem.session.runner import SessionRunner

    make_private_dirs(context.workspace / "memory")
    async with contextlib.AsyncExitStack() as stack:
        index = None
        if context.agent.memory_search.enabled:
            try:
                index = await _enter_in_thread(stack, _index_context(context))
            except SessionMemError as exc:
                if on_index_error is None:
                    raise
                on_index_error(exc)
        runner = SessionRunner(
            model,
            config=context.config,
            agent_id=context.agent_id,
            workspace=context.workspace,
            state_dir=context.state_dir,
            on_event=on_event,
            memory_index=index,
            command_source=command_source,
            close_index=False,  # closed by the stack, in a worker thread, once the runner has drained
        )
        try:
            yield runner
        finally:
            await runner.aclose()


def _index_context(context: Context) -> contextlib.AbstractContextManager[Any]:
    """The agent's index as a context manager, for a long-lived process: watched when ``sync.watch``
    is on (``sessionmem.cli.memory.open_index``, which every command opens the index with)."""
    from sessionmem.cli.memory import open_index

    return open_index(context, watch=None)


async def _enter_in_thread(
    stack: contextlib.AsyncExitStack, manager: contextlib.AbstractContextManager[Any]
) -> Any:
    """Enter a blocking context manager in a worker thread, and exit it in one when ``stack`` closes."""
    value = await asyncio.to_thread(manager.__enter__)

    async def leave(*exc_info: Any) -> None:
        await asyncio.to_thread(manager.__exit__, None, None, None)

    stack.push_async_exit(leave)
    return value
