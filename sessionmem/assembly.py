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

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

from sessionmem.errors import SessionMemError
from sessionmem.safefs import make_private_dirs

if TYPE_CHECKING:
    from sessionmem.context import Context
    from sessionmem.memory.embed.embedder import EmbedderSelection
    from sessionmem.memory.index import MemoryIndex
    from sessionmem.memory.session_memory import SessionMemory
    from sessionmem.memory.sync.transcript_names import TranscriptShelf
    from sessionmem.model.base import Model
    from sessionmem.session.runner import SessionRunner
    from sessionmem.session.turn.events import EventCallback


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
    make_private_dirs(context.workspace / "memory")
    async with contextlib.AsyncExitStack() as stack:
        index = None
        if context.agent.memory_search.enabled:
            try:
                index = await _enter_in_thread(stack, open_index(context, watch=None))
            except SessionMemError as exc:
                if on_index_error is None:
                    raise
                on_index_error(exc)
        # the index is closed by the stack, in a worker thread, once the runner has drained
        runner = build_runner(context, model, index, on_event=on_event, command_source=command_source)
        try:
            yield runner
        finally:
            await runner.aclose()


def build_runner(
    context: Context,
    model: Model,
    memory_index: SessionMemory | None,
    *,
    on_event: EventCallback | None = None,
    command_source: str | None = None,
) -> SessionRunner:
    """The agent's runner over ``memory_index``, with the context's config, workspace and state folder;
    the index stays open when the runner closes (its opener closes it)."""
    from sessionmem.session.runner import SessionRunner

    return SessionRunner(
        model,
        config=context.config,
        agent_id=context.agent_id,
        workspace=context.workspace,
        state_dir=context.state_dir,
        on_event=on_event,
        memory_index=memory_index,
        command_source=command_source,
        close_index=False,
    )


async def _enter_in_thread(
    stack: contextlib.AsyncExitStack, manager: contextlib.AbstractContextManager[Any]
) -> Any:
    """Enter a blocking context manager in a worker thread, and exit it in one when ``stack`` closes."""
    import asyncio  # here: the one-shot commands import this module and never run a loop

    value = await asyncio.to_thread(manager.__enter__)

    async def leave(*exc_info: Any) -> None:
        await asyncio.to_thread(manager.__exit__, None, None, None)

    stack.push_async_exit(leave)
    return value


def embedder_selection(app: Context) -> EmbedderSelection:
    """Choose the embedding provider here, from the resolved environment (not ``os.environ``)."""
    from sessionmem.memory.embed.embedder import EmbedderSelection

    settings = app.agent.memory_search
    try:
        from sessionmem.memory.embed.choice import select_embedder
    except ModuleNotFoundError as exc:
        # Only a missing providers module degrades to FTS-only; any other import error is a bug to show.
        if not (exc.name or "").startswith("sessionmem.memory.embed.choice"):
            raise
        return EmbedderSelection(None, settings.provider, reason=f"embedding providers unavailable ({exc})")
    selection: EmbedderSelection = select_embedder(settings, app.env)
    return selection


@contextlib.contextmanager
def open_index(
    app: Context, selection: EmbedderSelection | None = None, *, watch: bool | None = False
) -> Iterator[MemoryIndex]:
    """The agent's index, closed on the way out whatever happens. Unwatched by default: the one-shot
    commands start no threads (and never import watchdog); ``sessionmem chat`` passes
    ``watch=None`` to follow ``sync.watch``."""
    if selection is None:
        selection = embedder_selection(app)
    with contextlib.ExitStack() as stack:
        transcripts = None
        if "sessions" in app.agent.memory_search.sources:
            transcripts = stack.enter_context(transcripts_of(app))
        index = _open_index(app, selection, watch, transcripts)
        try:
            yield index
        finally:
            index.close()


def _open_index(
    app: Context,
    selection: EmbedderSelection,
    watch: bool | None,
    transcripts: TranscriptShelf | None,
) -> MemoryIndex:
    from sessionmem.memory.index import MemoryIndex

    try:
        return MemoryIndex.open(
            app.agent_id,
            app.workspace,
            app.agent.memory_search,
            state_dir=app.state_dir,
            selection=selection,
            env=app.env,  # the runtime fallback finds its API key where the selection found the provider's
            watch=watch,
            sessions_dir=app.sessions_dir,  # follows session.store, where the runner writes transcripts
            transcripts=transcripts if transcripts is not None and transcripts.folder is None else None,
        )
    except OSError as exc:
        # Trigger: the store's folder cannot be created or opened (a file in the way, no permission).
        # Why: that is the user's setup, not a bug, so no traceback. Outcome: a MemoryIndexError with
        # the path and the cause (exit 1 via translate_errors; ``chat`` goes on without memory).
        from sessionmem.errors import MemoryIndexError

        raise MemoryIndexError(f"cannot open the memory index of agent {app.agent_id!r}: {exc}") from exc


@contextlib.contextmanager
def transcripts_of(app: Context) -> Iterator[TranscriptShelf]:
    """Where the agent's transcripts are read by the memory index and ``memory_get``: the sessions folder,
    or, when ``session.store`` keeps them as rows (PostgreSQL), that store's shelf, connected while open."""
    from sessionmem.memory.sync.transcript_names import FolderShelf
    from sessionmem.session.stores.opening import open_session_store, parse_store_spec

    spec = parse_store_spec(app.config.session.store, state_dir=app.state_dir, agent_id=app.agent_id)
    if spec.sessions_dir is not None:
        yield FolderShelf(spec.sessions_dir)
        return
    from sessionmem.session.stores.backend import transcript_shelf

    store = open_session_store(app.config.session.store, state_dir=app.state_dir, agent_id=app.agent_id)
    try:
        shelf = transcript_shelf(store)
        yield shelf if shelf is not None else FolderShelf(app.sessions_dir)
    finally:
        close = getattr(store, "close", None)
        if callable(close):
            close()
