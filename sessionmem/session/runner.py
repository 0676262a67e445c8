"""The session runner: wraps each LLM turn with token projection, the silent flush and compaction.

One turn, top to bottom (:meth:`Session.run_turn`), each step in its own module working on the
session's :class:`~sessionmem.session.turn.state.SessionState`:

1. ``commands.before_turn``: a stale session (daily/idle reset) is rotated; a slash command (``/new``,
   ``/reset``, ``/compact``, ``/status``) is run and answers the turn;
2. ``gate.drive_turn``, the gate driving the turn: ``preflight`` projects the prompt size with the
   pending message; at the compaction threshold it compacts through the gate (which flushes first), else
   at the flush threshold it runs the silent flush (usually nothing is due: step 4 did it); then the model
   turn (``model_turn``) calls the model with the user message, dispatching tool calls, until it answers
   (bounded); the message is written to the transcript once the model accepted it (after any overflow
   recovery), usage recorded in the store; with ``on_partial`` the reply is streamed;
3. ``announce.emit``: the ``turn`` event; the reply goes to the caller now;
4. ``after_reply``, replies first: the flush or the compaction the turn made due runs after the reply, in
   the same hold of the turn lock (not the compaction in heartbeat runs, which may not flush: the next
   real turn's preflight does both). The session's next turn, arriving meanwhile, sends its first model
   call at once on the context of the last reply (``early_call``) and is written after the work
   (:meth:`Session.wait_idle` waits for the work too); the blocking API returns once it is done (the reply
   reaches ``on_partial`` first).

The caller's own tools: ``run_turn(text, tools=[ClientTool(...)])`` offers them to the model; when it calls
one, the turn ends suspended, its calls in ``TurnResult.tool_calls`` (the agent's own calls of that
assistant message ran, as always). :meth:`Session.submit_tool_results` gives their results and the same turn
goes on (:mod:`sessionmem.session.turn.client_calls`: no rotation, command or preflight; the model is called
again), until it answers or calls the caller's tools again. :attr:`Session.pending_tool_calls` says what is
awaited.

A provider context-overflow is reported by the model turn; the gate compacts and the turn goes on (keeping
a quarter of the context, then nothing; only a prompt that alone is over the window is raised); when the
provider's error states the model's real window, the session works within it from then on
(:meth:`SessionState.learn_context_window`).
Every compaction, whatever its reason, goes through
:func:`~sessionmem.session.turn.gate.compact_through_gate`,
which runs the flush first when the current compaction cycle has not had one (DESIGN 1). The flush is an
ordinary model turn of kind "flush": same loop, its own prompts and tools, output never delivered.

Each turn (and each command, rotation and :meth:`Session.compact`) runs under the session's turn lock:
turns of one session key wait for the ones before them, in order within a process (a queue per session),
and across runners and processes through the store's ``turn_lock`` (DESIGN 16, the store seam). After
taking it the session reloads what another runner wrote (:meth:`SessionState.resync`), so compaction
happens once per cycle and never summarises a context that is missing another runner's turns. A turn
that waits longer than ``session.turnLockTimeoutSeconds`` raises
:class:`~sessionmem.errors.TurnLockTimeout`.

The runner keeps the sessions it opened in memory; beyond ``session.maxIdleSessions`` sessions with no
turn running, the least recently used are dropped (their store entry and transcript stay; ``open()``
reads them again). :meth:`SessionRunner.aclose` (``async with``; :meth:`SessionRunner.close` and ``with``
for blocking code) lets the turns in flight finish, refuses new ones, and waits for the memory index's
background syncs (closing the index too unless ``close_index=False``).

Blocking store work (transcript appends, store updates: for ``sessions.json``, under its lock) runs
inline: each is one small write. Memory-index syncs run in a worker thread. The memory work after a reply
runs as a task on the caller's event loop (:meth:`Session._reply_first`), which must keep running for it:
``aclose()`` waits for it, as for the turns in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from sessionmem.clock import user_zone
from sessionmem.config import Config
from sessionmem.errors import TurnLockTimeout, UsageError
from sessionmem.memory.session_memory import SessionMemory
from sessionmem.messages import Message, ToolCall
from sessionmem.model.base import Model
from sessionmem.pathnames import given_path
from sessionmem.session.cache import SessionCache
from sessionmem.session.earlier_keys import adopt_earlier_session
from sessionmem.session.lifecycle.commands import SessionStatus, before_turn, ordinary_message, session_status
from sessionmem.session.stores import keys
from sessionmem.session.stores.backend import SessionBackend, TranscriptLog, open_entry, transcript_shelf
from sessionmem.session.stores.entry import SessionEntry
from sessionmem.session.stores.opening import open_session_store
from sessionmem.session.turn.after_reply import MemoryWorkFailed, memory_work_due, run_memory_work
from sessionmem.session.turn.announce import announce_created, emit
from sessionmem.session.turn.client_calls import continue_turn, pending_calls
from sessionmem.session.turn.early_call import EarlyCall, ReplyPoint, reply_point, start_early_call
from sessionmem.session.turn.events import CompactionResult, EventCallback, TurnEvent, TurnResult
from sessionmem.session.turn.gate import compact_through_gate, drive_turn
from sessionmem.session.turn.model_turn import ModelTurn
from sessionmem.session.turn.projection import ContextItem, Projection, TokenCounter
from sessionmem.session.turn.state import SessionState
from sessionmem.session.turn.streaming import PartialCallback
from sessionmem.session.turn.toolset import SessionTools
from sessionmem.tools.client import ClientTool, ToolResult, client_tool_map
from sessionmem.tools.define import Tool

if TYPE_CHECKING:
    from sessionmem.hooks import HookRegistry
    from sessionmem.memory.sync.transcript_names import TranscriptShelf
    from sessionmem.session.lifecycle.forget import ForgetReport

log = logging.getLogger(__name__)
T = TypeVar("T")


class SessionRunner:
    """Runs sessions of one agent: ``runner.open(key)`` gives a :class:`Session`."""

    def __init__(
        self,
        model: Model,
        *,
        config: Config | None = None,
        agent_id: str = keys.DEFAULT_AGENT_ID,
        workspace: Path | str,
        state_dir: Path | str,
        tools: Iterable[Tool] = (),
        on_event: EventCallback | None = None,
        memory_index: SessionMemory | None = None,
        heartbeat: bool = False,
        system_prompt: str = "",
        hooks: HookRegistry | None = None,
        command_source: str | None = None,
        store: SessionBackend | None = None,
        close_index: bool = True,
    ) -> None:
        self.model = model
        self.config = config or Config()
        self.agent_id = keys.validate_agent_id(agent_id)
        self.agent = self.config.for_agent(agent_id)
        self.workspace = given_path(workspace)  # resolved once: a later chdir moves nothing
        self.state_dir = given_path(state_dir)
        self.tools = tuple(tools)
        self.on_event = on_event
        self.memory_index = memory_index
        self.heartbeat = heartbeat
        self.system_prompt = system_prompt
        self.hooks = hooks  # the developer's, added to the discovered ones (hook_registry)
        self._hook_registry: HookRegistry | None = None
        self.command_source = command_source  # shown as "Source" in session-memory files ("cli", ...)
        # Where sessions are kept (sessionmem.session.stores.backend): the store given, else the one
        # session.store
        # names (sessionmem.session.stores.opening: sessions.json by default, SQLite for a *.sqlite path).
        if store is None:
            store = open_session_store(
                self.config.session.store, state_dir=self.state_dir, agent_id=self.agent_id
            )
        self.store: SessionBackend = store
        self._check_index_sessions_dir()
        self.close_index = close_index  # close(): close memory_index too (False: it is shared, keep it open)
        self.in_memory: SessionCache[Session] = SessionCache(self.config.session.max_idle_sessions)
        user_zone(self.agent.user_timezone)  # a bad userTimezone fails here, not in the middle of a flush

    def open(self, session_key: str | None = None) -> Session:
        """The session for ``session_key`` (default ``agent:<agentId>:main``), created if new.

        The same key gives the same :class:`Session` object while it is in memory, so two callers share
        one context. Opening reconciles the store entry with the transcript (DESIGN 16).

        A key without ``agent:`` is taken as ``agent:<agentId>:<key>``; a key of another agent raises
        :class:`~sessionmem.errors.UsageError` (:func:`~sessionmem.session.stores.keys.agent_session_key`)."""
        self.in_memory.check_open()
        key = keys.agent_session_key(self.agent_id, session_key)
        found = self.in_memory.get(key)
        if found is not None:
            return found
        entry = self.store.get(key) or adopt_earlier_session(self.store, key)
        created = False
        if entry is None:  # created in one locked update (two processes opening it adopt one session)
            entry, created = open_entry(self.store, key)
        transcript = self.store.open_transcript(key, entry, cwd=self.workspace)
        # Trigger: open() made a new store entry. Why: open() is sync and hooks are async, and
        # rotations announce their own new session. Outcome: session:start ("created") is due at the
        # first run_turn of the key (whichever handle runs it, even one opened again after the first was
        # dropped from memory) and fires once; a session reopened from the store does not announce.
        if created:
            self.in_memory.start_due(key)
        state = SessionState(self, key, transcript, entry)
        return self.in_memory.add(Session(self, state))

    session = open

    @property
    def sessions_in_memory(self) -> tuple[str, ...]:
        """The keys of the sessions this runner holds in memory, least recently used first."""
        return self.in_memory.keys()

    async def forget(self, who: str, *, names: Sequence[str] = (), dry_run: bool = False) -> ForgetReport:
        """Remove everything this runner's agent keeps of ``who``: a chat (a session key) or a person on every
        channel (a peer id): their notes, transcripts, store entries, index rows and cached vectors
        (:mod:`sessionmem.session.lifecycle.forget`, which says what stays and is listed). Their sessions are
        held meanwhile, as turns hold them; afterwards this runner holds none of them in memory, and a turn of
        theirs starts a new session. ``dry_run``: only say what would go. A gateway's
        ``DELETE /api/sessions/{key}``."""
        from sessionmem.session.lifecycle.forget import forget

        self.in_memory.check_open()
        report = await forget(
            who,
            store=self.store,
            workspace=self.workspace,
            agent_id=self.agent_id,
            memory_index=self.memory_index,
            extra_paths=self.agent.memory_search.extra_paths,
            names=names,
            dry_run=dry_run,
            lock_timeout_s=self.config.session.turn_lock_timeout_seconds,
        )
        if not dry_run:
            for key in report.session_keys:
                self.in_memory.discard(key)
        return report

    def forget_sync(self, who: str, *, names: Sequence[str] = (), dry_run: bool = False) -> ForgetReport:
        """Blocking :meth:`forget`; refuses to run inside an event loop (use ``await runner.forget``)."""
        return run_blocking("forget_sync", lambda: self.forget(who, names=names, dry_run=dry_run))

    # ------------------------------------------------------------ lifecycle

    async def aclose(self) -> None:
        """Stop taking turns, let the turns in flight (running or queued) finish, drop the sessions, and
        wait for the memory index's background syncs; close the index unless ``close_index=False``.
        Idempotent. A turn or ``open()`` after it raises :class:`~sessionmem.errors.UsageError`."""
        self.in_memory.close()
        while not self.in_memory.drained():
            await asyncio.sleep(0.01)
        index = self.memory_index
        if index is None:
            return
        await asyncio.to_thread(index.close if self.close_index else index.wait_idle)

    def close(self) -> None:
        """Blocking :meth:`aclose`; refuses to run inside an event loop (use ``await runner.aclose()``)."""
        run_blocking("close", self.aclose)

    async def __aenter__(self) -> SessionRunner:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __enter__(self) -> SessionRunner:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def hook_registry(self) -> HookRegistry:
        """The hooks for command:new/reset, session:start/end, memory:flush and compaction:before/after:
        the bundled, workspace and user hooks (loaded on first use; each can be disabled by name with
        ``hooks.internal.entries.<name>.enabled``), then those given as ``hooks=``, which replace a
        discovered hook of the same name."""
        if self._hook_registry is None:
            from sessionmem.hooks import HookRegistry, load_hooks

            try:
                registry = load_hooks(self.config, self.workspace, self.state_dir / "hooks")
            except Exception:  # hooks fail open, their loading too
                log.warning("could not load hooks; running without them", exc_info=True)
                registry = HookRegistry()
            if self.hooks is not None:
                registry.include(self.hooks)
            self._hook_registry = registry
        return self._hook_registry

    def _check_index_sessions_dir(self) -> None:
        # Trigger: session.store moves the transcripts (another folder, or PostgreSQL rows), and the memory
        # index was opened reading them from elsewhere. Why: the "sessions" source would index an empty
        # folder and never find this runner's conversations. Outcome: a warning saying what to pass.
        if self.memory_index is None or "sessions" not in self.agent.memory_search.sources:
            return
        ours = transcript_shelf(self.store)
        found = self.memory_index.transcripts
        if ours is None or _same_shelf(found, ours):
            return
        log.warning(
            "the memory index reads transcripts from %s but this runner writes them to %s "
            "(session.store); open the index with transcripts=transcript_shelf(runner.store)",
            found.where,
            ours.where,
        )


def _same_shelf(a: TranscriptShelf, b: TranscriptShelf) -> bool:
    if a.folder is not None and b.folder is not None:
        return os.path.realpath(a.folder) == os.path.realpath(b.folder)
    return a.folder is None and b.folder is None and a.where == b.where


class Session:
    """One conversation: its transcript, its store entry, its context in memory.

    A handle on a :class:`~sessionmem.session.turn.state.SessionState` (``session.state``), which the steps of
    a turn share; the attributes below read through to it.
    """

    def __init__(self, runner: SessionRunner, state: SessionState) -> None:
        self.runner = runner
        self.state = state
        self.in_flight = 0  # turns of this handle running or queued (the runner's lock guards it)
        # The in-process queue: one asyncio.Lock per event loop (FIFO). Callers in different threads run
        # different loops; the store's turn lock orders them against each other.
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._holder: asyncio.Task[Any] | None = None  # the task holding this session's turn
        self._holds: set[asyncio.Task[None]] = set()  # turns of this handle, to their memory work's end
        # While the memory work after a reply runs: the session at that reply, and the loop it runs on; and
        # the next turn's first model call, made meanwhile on that point (session.turn.early_call).
        self._working: tuple[asyncio.AbstractEventLoop, ReplyPoint] | None = None
        self._early: EarlyCall | None = None

    @property
    def key(self) -> str:
        return self.state.key

    @property
    def transcript(self) -> TranscriptLog:
        return self.state.transcript

    @property
    def entry(self) -> SessionEntry:
        """The session's store entry as last read or written by this process."""
        return self.state.entry

    @property
    def context(self) -> list[ContextItem]:
        """The model context: ``(transcript entry id, message)`` pairs."""
        return self.state.context

    @property
    def counter(self) -> TokenCounter:
        return self.state.counter

    @property
    def tools(self) -> SessionTools:
        return self.state.tools

    @property
    def context_window(self) -> int:
        return self.state.context_window

    def projection(self, pending: Sequence[Message] = ()) -> Projection:
        """The projected prompt of the next ordinary call (with ``pending``): the one measure the flush
        and compaction thresholds, ``/status``, compaction figures and the demo's timeline use."""
        return self.state.projection(pending)

    def status(self) -> SessionStatus:
        """What ``/status`` shows, counters read fresh from the store."""
        return session_status(self.state)

    # ---------------------------------------------------------------- the turn

    @contextlib.asynccontextmanager
    async def locked(self) -> AsyncIterator[SessionState]:
        """Hold this session's turn: after the turns queued before it in this process, under the store's
        turn lock (other runners and processes), with the state reloaded from what they wrote.

        Raises :class:`~sessionmem.errors.TurnLockTimeout` when the wait passes
        ``session.turnLockTimeoutSeconds``. Not re-entrant: the steps of a turn run inside one hold, and a
        turn asked for from inside a turn of the same session (an async ``on_event`` awaiting
        ``run_turn``) is a :class:`~sessionmem.errors.UsageError` at once rather than a wait for itself."""
        runner = self.runner
        timeout = runner.config.session.turn_lock_timeout_seconds
        self._refuse_nested()
        task = asyncio.current_task()
        runner.in_memory.turn_started(self)
        try:
            async with contextlib.AsyncExitStack() as held:
                loop = asyncio.get_running_loop()
                deadline = loop.time() + timeout
                queue = self._queues.setdefault(loop, asyncio.Lock())
                try:
                    if queue.locked():  # a timer only for a real wait: an unused one stays in the
                        async with asyncio.timeout(timeout):  # loop's heap until the loop next runs
                            await held.enter_async_context(queue)
                    else:
                        await held.enter_async_context(queue)
                    remaining = max(0.0, deadline - loop.time())
                    await held.enter_async_context(runner.store.turn_lock(self.key, timeout_s=remaining))
                except TimeoutError:
                    raise TurnLockTimeout(self.key, None, timeout) from None
                except TurnLockTimeout as exc:  # said with the whole wait, not what was left of it
                    raise TurnLockTimeout(self.key, exc.path, timeout) from None
                self._holder = task
                held.callback(setattr, self, "_holder", None)
                self.state.resync()
                self.state.settled = None  # until the turn ends cleanly (after a failed one: reload)
                yield self.state
                self.state.settle()
        finally:
            runner.in_memory.turn_ended(self)

    def _refuse_nested(self) -> None:
        if (task := asyncio.current_task()) is not None and task is self._holder:
            raise UsageError(
                f"session {self.key}: a turn was started from inside one of its own turns (an on_event "
                "callback or a tool awaiting run_turn); it would wait for itself. Start it after the turn"
            )

    async def _reply_first(self, body: Callable[[SessionState], Awaitable[TurnResult]]) -> TurnResult:
        """Run ``body`` (a turn, to its reply) in this session's turn, then the memory work it made due in
        the same hold (:mod:`~sessionmem.session.turn.after_reply`); return the reply as soon as it is there.

        The hold runs as a task of its own on the caller's loop: a caller cancelled before the reply cancels
        it; after the reply it goes on to its end, whatever the caller does (:meth:`wait_idle` waits for
        it, and so does the session's next turn)."""
        self._refuse_nested()  # here: the hold's task is not the caller's
        loop = asyncio.get_running_loop()
        replied: asyncio.Future[TurnResult] = loop.create_future()
        taken = asyncio.Event()  # the caller has its reply (or has gone): the work may begin

        async def hold() -> None:
            try:
                async with self.locked() as state:
                    result = await body(state)
                    replied.set_result(result)
                    await taken.wait()
                    said = next((m for m in result.messages if m.role == "user"), None)
                    if result.command is None and memory_work_due(state, said) is not None:
                        # the point an arriving turn is answered from; taken only when work will run
                        self._working = (loop, reply_point(state))
                        try:
                            await run_memory_work(state, said, next_turn_waits=self._early_waits)
                        finally:
                            self._working = None
            except MemoryWorkFailed:
                pass  # reported (event and log); the state is reloaded before the next turn
            except asyncio.CancelledError:
                replied.cancel()  # nothing when the reply was given
                raise
            except Exception as exc:
                if not replied.done():
                    replied.set_exception(exc)
                else:
                    log.exception("session %s: the turn's hold failed after its reply", self.key)

        task = loop.create_task(hold())
        self._holds.add(task)
        task.add_done_callback(self._holds.discard)
        try:
            return await asyncio.shield(replied)
        except asyncio.CancelledError:
            if not replied.done():  # the caller gave up before the reply: so does the turn
                task.cancel()
            raise
        finally:
            taken.set()

    def _early_waits(self) -> bool:
        return self._early is not None and self._early.in_hand()

    def _start_early(
        self, text: str, on_partial: PartialCallback | None, tools: Sequence[ClientTool]
    ) -> EarlyCall | None:
        """The first model call of a turn of ``text`` that arrives while the memory work after the last reply
        runs on this loop, sent now (:mod:`~sessionmem.session.turn.early_call`); None when there is no such
        work, another turn already made one, or the turn must wait as usual."""
        working = self._working
        if working is None or self._early is not None or working[0] is not asyncio.get_running_loop():
            return None
        state = self.state
        ordinary = ordinary_message(state, text)
        if ordinary is None or pending_calls(working[1].context):  # a suspended turn: the usual way
            return None
        client_tools = client_tool_map(tools, state.tools.for_turn("turn"))
        self._early = start_early_call(state, working[1], Message.user(ordinary), on_partial, client_tools)
        return self._early

    async def wait_idle(self) -> None:
        """Wait until this handle's turns on this event loop, and the memory work after their replies, have
        ended."""
        loop = asyncio.get_running_loop()
        while mine := [task for task in self._holds if task.get_loop() is loop and not task.done()]:
            await asyncio.wait(mine)

    async def run_turn(
        self, text: str, on_partial: PartialCallback | None = None, *, tools: Sequence[ClientTool] = ()
    ) -> TurnResult:
        """Run one user turn; the reply is None when the model answered NO_REPLY.

        Turns of one session run one at a time, in the order they were asked for (:meth:`locked`).
        With ``on_partial`` (sync or async, called with each new piece of text) the reply is streamed
        when the model can stream; nothing of a NO_REPLY answer is ever passed on, and the flush and
        compaction calls are never streamed.

        ``tools``: the caller's own tools, offered to the model beside the agent's; when it calls one the
        turn ends with those calls in ``TurnResult.tool_calls`` (the reply is the text before them, if
        any), and :meth:`submit_tool_results` goes on. A name of the agent's own tools is refused
        (:class:`~sessionmem.errors.UsageError`).

        Replies first: the flush or compaction this turn made due runs after the reply is returned
        (:meth:`wait_idle` waits for it), marked by ``memory_work_start`` / ``memory_work_end`` events; its
        events reach ``on_event`` and the hooks, not this result's ``events``."""

        self.runner.in_memory.check_open()
        self._refuse_nested()
        early = self._start_early(text, on_partial, tools)

        async def body(state: SessionState) -> TurnResult:
            client_tools = client_tool_map(tools, state.tools.for_turn("turn"))
            return await self._run_turn(state, text, on_partial, client_tools, early)

        try:
            return await self._reply_first(body)
        finally:
            if early is not None:
                early.close()
                if self._early is early:
                    self._early = None

    async def _run_turn(
        self,
        state: SessionState,
        text: str,
        on_partial: PartialCallback | None,
        client_tools: dict[str, ClientTool],
        early: EarlyCall | None,
    ) -> TurnResult:
        state.events = []
        if self.runner.in_memory.take_start(self.key):  # session:start ("created"), once (see open())
            await announce_created(state)
        outcome = await before_turn(state, text)  # stale-session rotation, slash commands
        if isinstance(outcome, TurnResult):  # the message was a command (/new, /compact, ...)
            return outcome
        answered = await early.answered(state) if early is not None else None
        # preflight (not after an early answer), model, compaction
        turn = await drive_turn(state, Message.user(outcome), on_partial, client_tools, answered=answered)
        return await self._turn_ended(state, turn)

    async def submit_tool_results(
        self,
        results: Sequence[ToolResult],
        on_partial: PartialCallback | None = None,
        *,
        tools: Sequence[ClientTool] = (),
    ) -> TurnResult:
        """Go on with the turn suspended on the caller's tools, given their ``results`` (one per pending
        call: :attr:`pending_tool_calls`); ``tools`` as :meth:`run_turn` takes them (offered again to the
        model). The turn is continued, not started: no rotation, no command, no flush or compaction before
        the model call. Results that do not answer exactly the pending calls raise
        :class:`~sessionmem.errors.ToolResultsMismatch` and change nothing. Replies first, as
        :meth:`run_turn`."""

        async def body(state: SessionState) -> TurnResult:
            client_tools = client_tool_map(tools, state.tools.for_turn("turn"))
            state.events = []
            turn = await continue_turn(state, results, client_tools, on_partial)
            return await self._turn_ended(state, turn)

        return await self._reply_first(body)

    @property
    def pending_tool_calls(self) -> tuple[ToolCall, ...]:
        """The caller's tool calls the suspended turn waits for (none when no turn is suspended)."""
        return pending_calls(self.state.context)

    async def _turn_ended(self, state: SessionState, turn: ModelTurn) -> TurnResult:
        """The ``turn`` event and the caller's result of a model turn that ended (or is suspended)."""
        reply = turn.reply
        await emit(
            state,
            TurnEvent(
                session_key=self.key,
                reply=reply,
                usage=turn.usage,
                model_calls=turn.model_calls,
                stopped=turn.stopped,
                early=turn.foreign is not None,
            ),
        )
        return TurnResult(
            reply,
            tuple(turn.messages),
            turn.usage,
            tuple(state.events),
            turn.stopped,
            tool_calls=turn.client_calls,
        )

    def run_turn_sync(
        self, text: str, on_partial: PartialCallback | None = None, *, tools: Sequence[ClientTool] = ()
    ) -> TurnResult:
        """Blocking :meth:`run_turn`; refuses to run inside an event loop (use ``await run_turn``). Returns
        once the memory work after the reply is done too (nothing is left running); the reply reaches
        ``on_partial`` before that work starts."""
        return run_blocking(
            "run_turn_sync", lambda: self._then_idle(self.run_turn(text, on_partial, tools=tools))
        )

    async def _then_idle(self, turn: Awaitable[TurnResult]) -> TurnResult:
        result = await turn
        await self.wait_idle()
        return result

    def submit_tool_results_sync(
        self, results: Sequence[ToolResult], *, tools: Sequence[ClientTool] = ()
    ) -> TurnResult:
        """Blocking :meth:`submit_tool_results`; refuses to run inside an event loop."""
        return run_blocking(
            "submit_tool_results_sync",
            lambda: self._then_idle(self.submit_tool_results(results, tools=tools)),
        )

    async def compact(self, instructions: str | None = None) -> CompactionResult:
        """Manual ``/compact [instructions]``, through the gate (flushes first if this cycle had none),
        in its turn like any other (:meth:`locked`)."""
        async with self.locked() as state:
            state.events = []
            return await compact_through_gate(state, "manual", instructions)

    def compact_sync(self, instructions: str | None = None) -> CompactionResult:
        """Blocking :meth:`compact`; refuses to run inside an event loop."""
        return run_blocking("compact_sync", lambda: self.compact(instructions))


def run_blocking(name: str, work: Callable[[], Awaitable[T]]) -> T:
    """The blocking API: ``work()`` on an event loop of its own, refused inside a running loop. Before
    the loop closes, what the model layer left running on it settles (litellm's logging callbacks), so a
    blocking call is as quiet as the async one on a long-lived loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise UsageError(
            f"{name}() cannot be called from a running event loop; await the async method instead"
        )

    async def main() -> T:
        try:
            return await work()
        finally:
            from sessionmem.model.litellm import settle_background_work

            await settle_background_work()

    return asyncio.run(main())


__all__ = [
    "CompactionResult",
    "Session",
    "SessionRunner",
    "TurnResult",
]
