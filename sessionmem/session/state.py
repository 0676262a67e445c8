"""What every step of a turn works with: the session's state and the runner's services.

A turn is one pass down a few steps, each a function of :class:`SessionState` in its own module:

- :mod:`~sessionmem.session.commands` (``before_turn``): a stale session is rotated, a slash command run;
- :mod:`~sessionmem.session.gate` (``preflight``, ``compact_if_over_threshold``, ``compact_through_gate``):
  the silent flush and compaction, before and after the model turn;
- :mod:`~sessionmem.session.turn` (``run_model_turn``): the model call and tool loop;
- :mod:`~sessionmem.session.lifecycle` (``rotate``): ``/new``, ``/reset``, daily and idle resets;
- :mod:`~sessionmem.session.announce` (``emit``, ``emit_hook``): events and hooks out of the session.

:class:`~sessionmem.session.runner.Session` strings them together. The steps share one
:class:`SessionState` (what this session knows: its transcript, its store entry, the model context and
its token caches, this turn's events) and reach the runner's services through it (``state.runner``, typed
:class:`RunnerDeps`: the model, the config, the store, the memory index, the hooks). Nothing reaches
into another step's private fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import orjson

from sessionmem.messages import Message
from sessionmem.session.backend import SessionBackend, TranscriptLog
from sessionmem.session.entry import SessionEntry
from sessionmem.session.events import Event, EventCallback
from sessionmem.session.flush import workspace_writable
from sessionmem.session.memory_tools import SessionTools
from sessionmem.session.projection import (
    ContextItem,
    Projection,
    TokenCounter,
    context_state,
    project_tokens,
    provider_owns_compaction,
    resolve_context_window,
)
from sessionmem.tokens import count_tokens

if TYPE_CHECKING:
    from sessionmem.config import AgentConfig, Config
    from sessionmem.hooks import HookRegistry
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
    def memory_index(self) -> Any: ...

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
        self.context_window = resolve_context_window(runner.agent, runner.model)
        self.events: list[Event] = []  # what the current turn reported (TurnResult.events)
        self.queued: list[Event] = []  # reported by tools mid-call; emitted after the tool call
        self.tools = SessionTools(runner, key, self.queued.append)
        self.compactions = 0  # compactions this session ran (the gate tells "compacted during the flush")
        self._schemas_counted: tuple[str, int] = ("", 0)  # the tool schemas' JSON and its token count
        self.attach(transcript, entry)

    def attach(self, transcript: TranscriptLog, entry: SessionEntry) -> None:
        """Point this session at ``transcript`` / ``entry`` (on open, and when a rotation starts a new
        transcript): the context, token caches and system prompt are rebuilt from them."""
        self.transcript = transcript
        self.entry = entry
        self.counter = TokenCounter()
        self.context: list[ContextItem]
        self.context, self.stale = context_state(transcript)
        self.system_prompt = self.tools.system_prompt()

    def reload_context(self) -> None:
        """Rebuild the context from the transcript (after a compaction entry was appended)."""
        self.context, self.stale = context_state(self.transcript)

    def refresh_entry(self) -> SessionEntry:
        """The store's entry for this session (another runner or process may have written it since);
        the cached one when the store has none."""
        stored = self.runner.store.get(self.key)
        if stored is not None:
            self.entry = stored
        return self.entry

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
        as :func:`~sessionmem.session.flush.should_flush` and ``guard_reason`` take them."""
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
