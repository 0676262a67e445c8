"""The session's toolset (:class:`SessionTools`): what one session offers the model in each turn.

Ordinary turns get memory_search/memory_get (``sessionmem.memory.tools.reading``; memory_read when memory
search is off), the write tools of :mod:`sessionmem.memory.tools.writing` in private sessions
(``memoryTools`` config, default on for direct chats) and the developer's tools; the flush gets the
reading tools and the append-only writers only. The writer's callbacks turn each write into a
``MemoryWriteEvent`` and mark the memory index dirty.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sessionmem.memory.session_memory import SessionMemory
from sessionmem.memory.tools.reading import reading_tools
from sessionmem.memory.tools.writing import MemoryWriter, flush_write_tools, memory_write_tools, read_tool
from sessionmem.privacy import home_for, reader_visibility
from sessionmem.session.stores import keys
from sessionmem.session.turn.events import MemoryWriteEvent
from sessionmem.session.turn.prompt import PromptOptions, build_system_prompt
from sessionmem.tools.define import Tool

log = logging.getLogger(__name__)


class SessionTools:
    """The tools one session offers: the developer's, memory_search/memory_get, the write tools; and
    during the flush only reading tools plus the append-only daily-log writers."""

    def __init__(self, runner: Any, session_key: str, on_event: Callable[[Any], None]) -> None:
        agent = runner.agent
        self.runner = runner
        self.session_key = session_key
        self.parsed = keys.parse_key(session_key)
        scope = runner.config.memory.scope
        self.visibility = reader_visibility(session_key, scope)  # what this session may see
        self.home = home_for(session_key, scope)  # where it writes its own memory
        self.flush_target: str | None = None
        self.flush_write_failures: list[str] = []  # writes of the running flush the file system refused
        self.writes = 0  # memory files changed by this session's tools
        self.index: SessionMemory | None = runner.memory_index

        def written(rel: str, mode: str, chars: int) -> None:
            self.writes += 1
            if self.index is not None:  # the index re-reads the file on its next sync
                self.index.mark_dirty()
            on_event(MemoryWriteEvent(session_key=session_key, path=rel, mode=mode, chars=chars))  # type: ignore[arg-type]

        def failed(rel: str, problem: str) -> None:
            if self.flush_target is not None:
                self.flush_write_failures.append(problem)

        self.writer = MemoryWriter(
            runner.workspace,
            timezone_name=agent.user_timezone,
            on_write=written,
            on_failure=failed,
            visibility=self.visibility,
            home=self.home,
        )
        self.memory = self._memory_bundle()
        enabled = agent.memory_tools
        self.write_enabled = self.private if enabled is None else enabled

    @property
    def private(self) -> bool:
        """A private session (the main one, or a positively direct chat: :mod:`sessionmem.privacy`)."""
        return self.parsed.private

    def _memory_bundle(self) -> Any:
        """memory_search / memory_get from sessionmem.memory.tools.reading, when memory search is enabled."""
        agent = self.runner.agent
        if not agent.memory_search.enabled:
            return None
        from sessionmem.memory.sync.session_delta import sessions_enabled
        from sessionmem.memory.tools.reading import MemoryTools

        transcripts = None  # memory_get opens session hits (DESIGN 8) when transcripts are indexed
        if sessions_enabled(agent.memory_search) and self.index is not None:
            transcripts = self.index.transcripts
        return MemoryTools(
            index=self.runner.memory_index,
            workspace=self.runner.workspace,
            extra_paths=agent.memory_search.extra_paths,
            transcripts=transcripts,
            citations=self.runner.config.memory.citations,
            session_key=self.session_key,
            visibility=self.visibility,
        )

    async def sync_index(self, reason: str, session_files: list[Path] | None = None) -> None:
        """Index what the tools wrote, so a search right after (e.g. after the compaction that follows
        a flush) finds it; with ``session_files``, only those transcripts. Failures are logged: the
        notes are safe on disk either way."""
        index = self.index
        if index is None:
            return
        try:
            await asyncio.to_thread(functools.partial(index.sync, reason=reason, session_files=session_files))
        except Exception:
            log.warning("memory index sync after %s failed", reason, exc_info=True)

    async def after_compaction(self, transcript: Path | None = None) -> None:
        """``compaction.postIndexSync``: re-index session transcripts after a compaction (only when the
        index covers ``sessions`` and ``sync.sessions.postCompactionForce`` is on); given the compacted
        ``transcript``, only that file (its new lines) is indexed."""
        agent = self.runner.agent
        mode = agent.compaction.post_index_sync
        index = self.index
        search = agent.memory_search
        if index is None or mode == "off" or "sessions" not in search.sources:
            return
        if not search.sync.sessions.post_compaction_force:
            return
        if mode == "await":
            files = [transcript] if transcript is not None else None
            await self.sync_index("post-compaction", session_files=files)
            return
        try:
            if transcript is not None:
                index.sync_session_files_in_background([transcript], "post-compaction")
            else:
                index.sync_in_background("post-compaction")
        except Exception:
            log.warning("background memory sync after compaction failed to start", exc_info=True)

    def recall_section(self) -> str:
        if self.memory is None:
            return ""
        return str(self.memory.recall_section(prompt_mode=self.parsed.prompt_mode))

    def _reading_tools(self) -> list[Tool]:
        if self.memory is None:
            return [read_tool(self.writer)]
        return reading_tools(self.memory, session_key=self.session_key)

    def for_turn(self, kind: str) -> dict[str, Tool]:
        if kind == "flush":
            assert self.flush_target is not None
            tools = [*self._reading_tools(), *flush_write_tools(self.writer, self.flush_target)]
        else:
            tools = [*self._reading_tools()]
            if self.write_enabled:
                tools.extend(memory_write_tools(self.writer))
            tools.extend(self.runner.tools)  # the developer's tools win on a name clash
        return {t.name: t for t in tools}

    def system_prompt(self) -> str:
        agent = self.runner.agent
        options = PromptOptions(
            base=self.runner.system_prompt,
            private=self.private,
            visibility=self.visibility,
            home=self.home,
            minimal=self.parsed.prompt_mode == "minimal",
            recall_section=self.recall_section(),
            bootstrap_max_chars=agent.bootstrap_max_chars,
            load_daily_logs=agent.load_daily_logs,
            timezone_name=agent.user_timezone,
            silent_token=agent.silent_reply_token,
        )
        return build_system_prompt(self.runner.workspace, options)
