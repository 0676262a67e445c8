"""Tools that let the agent write its own Markdown memory, scoped to the workspace's memory files.

- ``memory_read(path, from?, lines?)``: read ``MEMORY.md`` or ``memory/**.md`` (offered when the
  memory_get tool is not, e.g. memory search disabled).
- ``memory_append_daily(text)``: append to today's ``memory/YYYY-MM-DD.md`` (the user's time zone).
- ``memory_write(path, content, mode)``: ``MEMORY.md`` only, ``append`` or ``replace``.

Safety rules, on purpose:
- Appends never rewrite: the file is opened ``O_APPEND`` and the text is written in one call, with a
  newline separator when the file does not end in one (as OpenClaw's flush writer). Appending text that
  is already at the end of the file is a no-op, so a model re-emitting its note does not duplicate it.
- ``replace`` of MEMORY.md first copies the current file to ``MEMORY.md.bak`` and then writes the new
  content atomically (temp file + ``os.replace``); a replace that would drop more than half of a
  non-trivial file is refused (the model should append, or the developer edit by hand).
- During the silent flush the only writable file is the flush's daily log (the date at flush start, or
  today's if the flush crosses midnight); every other path is refused with a tool error that names it.

:class:`SessionTools` assembles what one session offers: ordinary turns get memory_search/memory_get
(``sessionmem.memory.tools``; memory_read when memory search is off), the write tools in private sessions
(``memoryTools`` config, default on for direct chats) and the developer's tools; the flush gets the
reading tools and the append-only writers only. Writes mark the memory index dirty.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sessionmem.errors import MemoryPathError
from sessionmem.memory.paths import normalize_rel_path, resolve_memory_path, writable_memory_path
from sessionmem.session.flush import daily_log_path, user_zone
from sessionmem.session.store import atomic_write_bytes
from sessionmem.session.tools import Tool, ToolError

log = logging.getLogger(__name__)

WriteListener = Callable[[str, str, int], None]  # (relative path, "append" | "replace", chars)

SHRINK_LIMIT = 0.5  # a replace may not drop more than half of MEMORY.md ...
SHRINK_MIN_CHARS = 400  # ... once it holds at least this much


def append_text(path: Path, text: str) -> bool:
    """Append ``text`` to ``path`` in one write, separated by a newline; False if already at the end."""
    path.parent.mkdir(parents=True, exist_ok=True)
    existing = path.read_text(encoding="utf-8") if path.exists() else ""
    if text.strip() and existing.rstrip().endswith(text.strip()):
        return False
    if existing and not existing.endswith("\n") and not text.startswith("\n"):
        text = "\n" + text
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        data = text.encode("utf-8")
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    return True


class MemoryWriter:
    """The workspace's memory files, with the rules above; ``on_write`` hears every change."""

    def __init__(
        self, workspace: Path, *, timezone_name: str | None = None, on_write: WriteListener | None = None
    ) -> None:
        self.workspace = Path(workspace)
        self.timezone_name = timezone_name
        self.on_write = on_write

    def today_path(self) -> str:
        return daily_log_path(datetime.now(UTC), user_zone(self.timezone_name))

    def read(self, path: str, start: int | None = None, count: int | None = None) -> str:
        target = self._resolve_read(path)
        if not target.is_file():
            return ""
        lines = target.read_text(encoding="utf-8").split("\n")
        if start is None and count is None:
            return "\n".join(lines)
        begin = max(1, start or 1) - 1
        return "\n".join(lines[begin : begin + max(1, count or len(lines))])

    def append(self, rel: str, text: str) -> str:
        if not text or not text.strip():
            raise ToolError("nothing to append: text is empty")
        target = self._resolve_write(rel)
        if not append_text(target, text):
            return f"Already present at the end of {rel}; nothing appended."
        self._notify(rel, "append", len(text))
        return f"Appended content to {rel}."

    def replace(self, rel: str, content: str) -> str:
        if rel != "MEMORY.md":
            raise ToolError(f"replace is only allowed for MEMORY.md, not {rel}; use mode=append")
        target = self._resolve_write(rel)
        old = target.read_text(encoding="utf-8") if target.exists() else ""
        if len(old) >= SHRINK_MIN_CHARS and len(content) < len(old) * SHRINK_LIMIT:
            raise ToolError(
                f"refusing to replace MEMORY.md ({len(old)} chars) with {len(content)} chars: that "
                "drops more than half of it. Append instead, or keep the existing entries in the new content."
            )
        if target.exists():
            shutil.copy2(target, target.with_name("MEMORY.md.bak"))
        atomic_write_bytes(target, content.encode("utf-8"), mode=0o644)
        self._notify(rel, "replace", len(content))
        return "Replaced MEMORY.md (previous version saved as MEMORY.md.bak)."

    def _resolve_read(self, path: str) -> Path:
        try:
            return resolve_memory_path(self.workspace, path)
        except MemoryPathError as exc:
            raise ToolError(str(exc)) from None

    def _resolve_write(self, rel: str) -> Path:
        try:
            return writable_memory_path(self.workspace, rel)
        except MemoryPathError as exc:
            raise ToolError(str(exc)) from None

    def _notify(self, rel: str, mode: str, chars: int) -> None:
        if self.on_write is not None:
            self.on_write(rel, mode, chars)


_READ_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "MEMORY.md or memory/<file>.md"},
        "from": {"type": "integer", "minimum": 1},
        "lines": {"type": "integer", "minimum": 1},
    },
    "required": ["path"],
}
_APPEND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string", "description": "Markdown to append"}},
    "required": ["text"],
}


def read_tool(writer: MemoryWriter) -> Tool:
    def memory_read(path: str, **kw: Any) -> str:
        return writer.read(path, kw.get("from"), kw.get("lines"))

    return Tool(
        "memory_read",
        "Read MEMORY.md or memory/*.md, optionally from a line for N lines.",
        _READ_SCHEMA,
        memory_read,
    )


def memory_write_tools(writer: MemoryWriter) -> list[Tool]:
    """The everyday write tools: append to today's daily log, append to / replace MEMORY.md."""

    def memory_append_daily(text: str) -> str:
        return writer.append(writer.today_path(), text)

    def memory_write(path: str, content: str, mode: str = "append") -> str:
        if path != "MEMORY.md":
            raise ToolError(
                f"memory_write only writes MEMORY.md (got {path}); use memory_append_daily for notes"
            )
        if mode == "replace":
            return writer.replace(path, content)
        if mode != "append":
            raise ToolError(f"mode must be 'append' or 'replace', not {mode!r}")
        return writer.append(path, content)

    write_schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "enum": ["MEMORY.md"]},
            "content": {"type": "string"},
            "mode": {"type": "string", "enum": ["append", "replace"], "default": "append"},
        },
        "required": ["path", "content"],
    }
    return [
        Tool(
            "memory_append_daily",
            "Append a durable note to today's daily log memory/YYYY-MM-DD.md.",
            _APPEND_SCHEMA,
            memory_append_daily,
        ),
        Tool(
            "memory_write",
            "Write long-term memory in MEMORY.md (append, or replace keeping MEMORY.md.bak).",
            write_schema,
            memory_write,
        ),
    ]


def flush_write_tools(writer: MemoryWriter, target: str) -> list[Tool]:
    """Write tools for the silent flush: append-only, to ``target`` (the daily log named in the flush
    prompt) or, if the flush crosses midnight, to the new day's log."""

    def allowed(path: str) -> str:
        norm = normalize_rel_path(path) if isinstance(path, str) else ""
        if norm in (target, writer.today_path()):
            return norm
        raise ToolError(f"Memory flush writes are restricted to {target}; use that path only.")

    def write(path: str, content: str) -> str:
        return writer.append(allowed(path), content)

    def memory_append_daily(text: str) -> str:
        return writer.append(target, text)

    write_schema = {
        "type": "object",
        "properties": {"path": {"type": "string", "enum": [target]}, "content": {"type": "string"}},
        "required": ["path", "content"],
    }
    note = f" During memory flush, this tool may only append to {target}."
    return [
        Tool("write", "Append content to a memory file." + note, write_schema, write),
        Tool(
            "memory_append_daily",
            f"Append a durable note to {target}." + note,
            _APPEND_SCHEMA,
            memory_append_daily,
        ),
    ]


class SessionTools:
    """The tools one session offers: the developer's, memory_search/memory_get, the write tools; and
    during the flush only reading tools plus the append-only daily-log writers."""

    def __init__(self, runner: Any, session_key: str, on_event: Callable[[Any], None]) -> None:
        from sessionmem.session import keys
        from sessionmem.session.events import MemoryWriteEvent

        agent = runner.agent
        self.runner = runner
        self.session_key = session_key
        self.parsed = keys.parse_key(session_key)
        self.private = keys.is_private(session_key)
        self.flush_target: str | None = None
        self.writes = 0  # memory files changed by this session's tools

        def written(rel: str, mode: str, chars: int) -> None:
            self.writes += 1
            mark_dirty = getattr(runner.memory_index, "mark_dirty", None)
            if callable(mark_dirty):  # the index re-reads the file on its next sync
                mark_dirty()
            on_event(MemoryWriteEvent(session_key=session_key, path=rel, mode=mode, chars=chars))  # type: ignore[arg-type]

        self.writer = MemoryWriter(runner.workspace, timezone_name=agent.user_timezone, on_write=written)
        self.memory = self._memory_bundle()
        enabled = agent.memory_tools
        self.write_enabled = self.private if enabled is None else enabled

    def _memory_bundle(self) -> Any:
        """memory_search / memory_get from sessionmem.memory.tools, when memory search is enabled."""
        agent = self.runner.agent
        if not agent.memory_search.enabled:
            return None
        try:
            from sessionmem.memory.tools import MemoryTools
        except ImportError:  # the memory layer is optional for the runner
            return None
        from sessionmem.memory.session_sync import sessions_enabled

        sessions_dir = None  # memory_get opens session hits (DESIGN 8) when transcripts are indexed
        if sessions_enabled(agent.memory_search):
            sessions_dir = getattr(self.runner.memory_index, "sessions_dir", None)
        return MemoryTools(
            index=self.runner.memory_index,
            workspace=self.runner.workspace,
            extra_paths=agent.memory_search.extra_paths,
            sessions_dir=sessions_dir,
            citations=self.runner.config.memory.citations,
            session_key=self.session_key,
        )

    async def sync_index(self, reason: str, session_files: list[Path] | None = None) -> None:
        """Index what the tools wrote, so a search right after (e.g. after the compaction that follows
        a flush) finds it; with ``session_files``, only those transcripts. Failures are logged: the
        notes are safe on disk either way."""
        sync = getattr(self.runner.memory_index, "sync", None)
        if not callable(sync):
            return
        kwargs: dict[str, Any] = {"reason": reason}
        if session_files is not None:
            kwargs["session_files"] = session_files
        try:
            await asyncio.to_thread(sync, **kwargs)
        except Exception:
            log.warning("memory index sync after %s failed", reason, exc_info=True)

    async def after_compaction(self, transcript: Path | None = None) -> None:
        """``compaction.postIndexSync``: re-index session transcripts after a compaction (only when the
        index covers ``sessions`` and ``sync.sessions.postCompactionForce`` is on); given the compacted
        ``transcript``, only that file (its new lines) is indexed."""
        agent = self.runner.agent
        mode = agent.compaction.post_index_sync
        index = self.runner.memory_index
        search = agent.memory_search
        if index is None or mode == "off" or "sessions" not in search.sources:
            return
        if not search.sync.sessions.post_compaction_force:
            return
        targeted = getattr(index, "sync_session_files_in_background", None)
        if mode == "await":
            files = [transcript] if transcript is not None and callable(targeted) else None
            await self.sync_index("post-compaction", session_files=files)
            return
        background = getattr(index, "sync_in_background", None)
        try:
            if transcript is not None and callable(targeted):
                targeted([transcript], "post-compaction")
            elif callable(background):
                background("post-compaction")
        except Exception:
            log.warning("background memory sync after compaction failed to start", exc_info=True)

    def recall_section(self) -> str:
        if self.memory is None:
            return ""
        return str(self.memory.recall_section(prompt_mode=self.parsed.prompt_mode))

    def _reading_tools(self) -> list[Tool]:
        if self.memory is None:
            return [read_tool(self.writer)]
        out = []
        for schema in self.memory.schemas():
            fn = schema["function"]

            async def handler(_name: str = fn["name"], **args: Any) -> str:
                return str(await self.memory.acall(_name, args, session_key=self.session_key))

            out.append(Tool(fn["name"], fn.get("description", ""), fn["parameters"], handler))
        return out

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
        from sessionmem.session.prompt import PromptOptions, build_system_prompt

        agent = self.runner.agent
        options = PromptOptions(
            base=self.runner.system_prompt,
            private=self.private,
            minimal=self.parsed.prompt_mode == "minimal",
            recall_section=self.recall_section(),
            bootstrap_max_chars=agent.bootstrap_max_chars,
            load_daily_logs=agent.load_daily_logs,
            timezone_name=agent.user_timezone,
            silent_token=agent.silent_reply_token,
        )
        return build_system_prompt(self.runner.workspace, options)
