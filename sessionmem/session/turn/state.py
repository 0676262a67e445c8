"""What every step of a turn works with: the session's state and the runner's services.

A turn is one pass down a few steps, each a function of :class:`SessionState` in its own module:

- :mod:`~sessionmem.session.lifecycle.commands` (``before_turn``): a stale session is rotated, a slash
  command run;
- :mod:`~sessionmem.session.turn.gate` (``preflight``, ``memory_work_at``,
  ``compact_through_gate``):
  the silent flush and compaction, before and after the model turn;
- :mod:`~sessionmem.session.turn.model_turn` (``run_model_turn``): the model call and tool loop;
- :mod:`~sessionmem.session.lifecycle.rotation` (``rotate``): ``/new``, ``/reset``, daily and idle resets;
- :mod:`~sessionmem.session.turn.announce` (``emit``, ``emit_hook``): events and hooks out of the session.

:class:`~sessionmem.session.runner.Session` strings them together. The steps share one
:class:`SessionState` (what this session knows: its transcript, its store entry, the model context and
its token caches, this turn's events) and reach the runner's services through it (``state.runner``, typed
:class:`RunnerDeps`: the model, the config, the store, the memory index, the hooks). Nothing reaches
into another step's private fields.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

import orjson

from sessionmem.messages import Message
from sessionmem.session.stores.backend import SessionBackend, TranscriptLog, open_entry, transcript_version
from sessionmem.session.stores.entry import SessionEntry
from sessionmem.session.stores.recovery import reconciled, replay_entries
from sessionmem.session.turn.events import Event, EventCallback
from sessionmem.session.turn.flush import window_budget, workspace_writable
from sessionmem.session.turn.projection import (
    Projection,
    TokenCounter,
    context_state,
    project_tokens,
    provider_owns_compaction,
    resolve_context_window,
    session_window,
)
from sessionmem.session.turn.toolset import SessionTools
from sessionmem.tokens import count_tokens

if TYPE_CHECKING:
    from sessionmem.config import AgentConfig, Config, WindowBudget
    from sessionmem.hooks import HookRegistry
    from sessionmem.memory.session_memory import SessionMemory
    from sessionmem.model.base import Model

TurnKind = Literal["turn", "flush"]


class RunnerDeps(Protocol):
    """The runner's services a turn uses; :class:`~sessionmem.session.runner.SessionRunner` provides
    them. Shared by every session of one agent."""

    @property
    def model(self) -> Model: ...

    @property
    def config(self) -> Config: ...

    @property
    def agent(self) -> AgentConfig: ...

    @property
    def agent_id(self) -> str: ...

    @property
    def workspace(self) -> Path: ...

    @property
    def state_dir(self) -> Path: ...

    @property
    def store(self) -> SessionBackend: ...

    @property
    def memory_index(self) -> SessionMemory | None: ...

    @property
    def heartbeat(self) -> bool: ...

    @property
    def on_event(self) -> EventCallback | None: ...

    @property
    def command_source(self) -> str | None: ...

    def hook_registry(self) -> HookRegistry:
        """The hooks to emit to (loaded on first use)."""
        ...


class SessionState:
    """One session as the steps of a turn see it. Mutable; the steps update it as they go."""

    def __init__(self, runner: RunnerDeps, key: str, transcript: TranscriptLog, entry: SessionEntry) -> None:
        self.runner = runner
        self.key = key
        self.configured_window = resolve_context_window(runner.agent, runner.model)
        # The window in use (the configured one, or what the provider stated: session_window) and how it
        # is shared out: thresholds, reserve, kept part. Computed once per window (use_window), read by
        # every step of a turn.
        self.budget: WindowBudget = window_budget(self.configured_window, runner.agent.compaction)
        self.events: list[Event] = []  # what the current turn reported (TurnResult.events)
        self.queued: list[Event] = []  # reported by tools mid-call; emitted after the tool call
        self.tools = SessionTools(runner, key, self.queued.append)
        self.compactions = 0  # compactions this session ran (the gate tells "compacted during the flush")
        self.flushing: int | None = None  # the cycle of the flush turn running now (no second one starts)
        # The transcript's version (backend.transcript_version) when this state last matched the transcript
        # and the store; None: unknown, reload before the next turn.
        self.settled: Hashable | None = None
        self.generation = 0  # how many times the state was rebuilt from the transcript (reload)
        self._schemas_counted: tuple[str, int] = ("", 0)  # the tool schemas' JSON and its token count
        self.attach(transcript, entry)

    def attach(self, transcript: TranscriptLog, entry: SessionEntry) -> None:
        """Point this session at ``transcript`` / ``entry`` (on open, and when a rotation starts a new
        transcript): the context, token caches and system prompt are rebuilt from them (:meth:`reload`)."""
        self.transcript = transcript
        self.entry = entry
        self.counter = TokenCounter()
        self.reload()
        self.system_prompt = self.tools.system_prompt()

    def reload(self) -> None:
        """Read the transcript again: the context, and the store entry reconciled with it (DESIGN 16).

        The transcript is written first, so a process stopped between it and the store (killed, out of
        disk) leaves the store behind: ``compactionCount`` and the last flush's cycle are set from the
        transcript (:func:`~sessionmem.session.stores.recovery.reconciled`) in one ``store.update``, which
        changes nothing when they agree. Safe without the turn lock: the update reconciles only when the
        transcript is still as it was read (same version, where the backend tells), so a read that a
        live turn of another runner has since overtaken never sets the store back.
        """
        version = transcript_version(self.transcript)  # before reading: an append after it shows next time
        entries = self.transcript.entries()
        self.context, self.stale = context_state(entries)
        _, figures = replay_entries(e.data for e in entries)
        session_id = self.entry.session_id

        def reconcile(current: SessionEntry | None) -> SessionEntry | None:
            if current is None or current.session_id != session_id:
                return None  # gone, or rotated by another runner: resync() follows that
            # Trigger: this read ran without the turn lock (open()), and another runner appended to the
            # transcript after it, then moved the store on. Why: figures from the older transcript would
            # set the counts back (a compaction uncounted, the cycle's flush forgotten: flushed again).
            # Outcome: when the transcript changed since it was read, nothing is reconciled now; the
            # next turn, under the lock, sees the new version and reloads.
            if version is not None and transcript_version(self.transcript) != version:
                return None
            return reconciled(current, figures)

        stored = self.runner.store.update(self.key, reconcile)
        if stored is not None and stored.session_id == session_id:
            self.entry = stored
        self.use_window(session_window(self.configured_window, self.entry, self.runner.model))
        self.settled = version
        self.generation += 1

    @property
    def context_window(self) -> int:
        """The window this session works with: the configured one, or the smaller one the provider
        stated (:meth:`learn_context_window`)."""
        return self.budget.context_window

    def use_window(self, tokens: int) -> None:
        """Work within ``tokens`` from now on: the window's budget is computed again when it changed."""
        if tokens != self.budget.context_window:
            self.budget = window_budget(tokens, self.runner.agent.compaction)

    def learn_context_window(self, tokens: int) -> bool:
        """The provider stated in an overflow error that the model's window is ``tokens``.

        Trigger: a model whose real window is far below the configured one (a local server started with
        a small context, a proxy in front of a smaller model). Why: recovering from each overflow keeps
        the thresholds of the configured window, so the session overflows again every time its context
        grows back. Outcome: when ``tokens`` is below the window in use, the session works within it
        from now on (flush, compaction, the kept part all scale with it), and it is recorded in the
        store entry (``learnedContextTokens`` for this model, ``contextTokens`` the window in use) so a
        reopened session, and the next one under this key, know it. True when it changed the window.
        """
        if tokens >= self.context_window:
            return False
        model = str(getattr(self.runner.model, "name", "") or "")
        session_id = self.entry.session_id

        def learn(current: SessionEntry | None) -> SessionEntry | None:
            entry = current if current is not None else self.entry
            if entry.session_id != session_id:
                return None
            learned = {**(entry.learned_context_tokens or {}), model: tokens}
            return entry.touched(learned_context_tokens=learned, context_tokens=tokens)

        stored = self.runner.store.update(self.key, learn)
        if stored is not None and stored.session_id == session_id:
            self.entry = stored
        self.use_window(tokens)  # the thresholds of this turn's later steps follow at once
        return True

    def reload_context(self) -> None:
        """Rebuild the context from the transcript (after a compaction entry was appended); the token
        counts of what left it are dropped (a long session's cache stays the size of its context)."""
        self.context, self.stale = context_state(self.transcript.entries())
        self.counter.keep_only(self.context)

    def resync(self) -> None:
        """Catch up with what other runners wrote, after taking the session's turn lock.

        Another runner may have rotated the session (a new session id in the store: its transcript is
        opened), or removed it (``forget``: a new session starts), or appended turns, flushes and
        compactions (the transcript's version changed: it is read again); and a turn of this session
        that failed half-way may have left the store behind its transcript. Either way :meth:`reload`
        rebuilds the state from the transcript. When nothing changed since this session's last turn
        ended (the same version, the same store entry), this costs one store read and, for file
        transcripts, one ``stat``.
        """
        store = self.runner.store
        stored = store.get(self.key)
        if stored is None:
            # Trigger: the entry is gone (the person was forgotten, or another runner deleted the
            # session) while this session was in memory. Why: going on with the old id would write the
            # old transcript's header and the context held in memory back, re-creating what was erased.
            # Outcome: a new session, as open() starts one for a key it does not know.
            stored, _ = open_entry(store, self.key)
        if stored.session_id != self.entry.session_id:
            self.attach(store.open_transcript(self.key, stored, cwd=self.runner.workspace), stored)
            return
        unchanged = stored == self.entry and transcript_version(self.transcript) == self.settled
        if self.settled is not None and unchanged:
            return
        self.entry = stored
        self.reload()

    def settle(self) -> None:
        """A turn ended cleanly: the state matches the transcript and the store as they are now."""
        self.settled = transcript_version(self.transcript)

    def projection(self, pending: Sequence[Message] = ()) -> Projection:
        """The projected prompt of the next ordinary call (with ``pending``): the one measure the flush
        and compaction thresholds, ``/status``, compaction figures and the demo's timeline use."""
        projection = project_tokens(
            self.context,
            self.counter,
            pending=pending,
            system_prompt=self.system_prompt,
            stale_entry_ids=self.stale,
        )
        if projection.fresh:
            return projection
        # Trigger: no fresh reported usage (a new session, or right after a compaction). Why: a reported
        # prompt includes the tool schemas sent with every call; counting the messages alone would fall
        # short by them, and the next reported figure would jump by that much. Outcome: the schemas of an
        # ordinary turn are counted too.
        schemas = self.schema_tokens()
        return Projection(projection.tokens + schemas, None, projection.counted + schemas)

    def schema_tokens(self) -> int:
        """Tokens of the tool schemas sent with every ordinary call (cached while they do not change)."""
        schemas = [tool.schema() for tool in self.tools.for_turn("turn").values()]
        if not schemas:
            return 0
        text = orjson.dumps(schemas, option=orjson.OPT_SORT_KEYS).decode()
        if text != self._schemas_counted[0]:
            self._schemas_counted = (text, count_tokens(text))
        return self._schemas_counted[1]

    def guards(self) -> dict[str, bool]:
        """What may forbid the flush here (``heartbeat``, ``writable``, ``provider_owns_compaction``),
        as :func:`~sessionmem.session.turn.flush.should_flush` and ``guard_reason`` take them."""
        runner = self.runner
        return {
            "heartbeat": runner.heartbeat,
            "writable": workspace_writable(runner.workspace),
            "provider_owns_compaction": provider_owns_compaction(runner.agent, runner.model),
        }

    def may_compact(self) -> bool:
        """Whether the runner compacts this session on its own (threshold): not in heartbeat runs, which
        may not flush first, nor when the provider owns compaction."""
        runner = self.runner
        return (
            runner.agent.compaction.enabled
            and not runner.heartbeat
            and not provider_owns_compaction(runner.agent, runner.model)
        )
