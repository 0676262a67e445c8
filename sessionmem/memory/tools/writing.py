"""The tools that let the agent write its own Markdown memory, scoped to the workspace's memory files.

- ``memory_read(path, from?, lines?)``: read ``MEMORY.md`` or ``memory/**.md`` (offered when the
  memory_get tool is not, e.g. memory search disabled); it answers what ``memory_get`` would.
- ``memory_append_daily(text)``: append to today's daily log (the user's time zone) in the session's
  home folder (``memory/``, or its own ``memory/peers/<chat>/`` with ``memory.scope: peer``).
- ``memory_write(path, content, mode)``: the home's ``MEMORY.md`` only, ``append`` or ``replace``.

Safety rules, on purpose:
- Appends never rewrite: the file is opened ``O_APPEND`` without following a symlink, and the text is
  appended whole or not at all (a write cut short by a full disk is rolled back,
  :func:`sessionmem.safefs.append_under`), with a newline separator when the file does not end in one
  (as OpenClaw's flush writer). Appending text that is already at the end of the file is a no-op, so a
  model re-emitting its note does not duplicate it. A write refused (the file system's error, a full
  disk, a symlink on the way, a path the session may not write) is a tool error naming the file; in
  the flush it also keeps the flush from counting and its event carries the error
  (:mod:`sessionmem.session.turn.gate`): a flush's note is never lost without a word.
- ``replace`` of MEMORY.md first saves the current text as a dated version under
  ``.memory-history/MEMORY.md/`` (the newest 20 kept, never indexed; ``sessionmem.memory.tools.history``) and
  then writes the new content atomically (temp file + rename); a replace that would drop more than half
  of a non-trivial file is refused (the model should append, or the developer edit by hand). The tool
  result names the saved version.
- During the silent flush the only writable file is the flush's daily log (the date at flush start, or
  today's if the flush crosses midnight); every other path is refused with a tool error that names it.
- Privacy (:mod:`sessionmem.privacy`): a session reads and writes only what its visibility allows (a
  group cannot append to the owner's MEMORY.md), and writes into its *home*: the root files with
  ``memory.scope: agent``, its own ``memory/peers/<chat>/`` with ``memory.scope: peer``.

The writer speaks to no session: what it may see and where its home is come in as values
(:mod:`sessionmem.privacy`), and every write and refusal goes to the callbacks it is given (the session's
toolset turns them into ``MemoryWriteEvent`` and marks the index dirty; the MCP server indexes the write).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sessionmem.clock import date_stamp, user_zone
from sessionmem.errors import FileWriteError, MemoryPathError, UnsafeWriteError
from sessionmem.memory.sync.sources import strip_control_chars
from sessionmem.memory.tools.history import MAX_VERSIONS, history_folder, save_version
from sessionmem.memory.tools.paths import normalize_rel_path, writable_memory_path
from sessionmem.messages import text_problem
from sessionmem.privacy import AGENT_HOME, EVERYTHING, MemoryHome, Visibility, markdown_label, refusal
from sessionmem.safefs import append_under, open_under, read_all, replace_under
from sessionmem.tools.define import ArgumentConverter, Tool, ToolError
from sessionmem.tools.json_schema import ArgumentError

WriteListener = Callable[[str, str, int], None]  # (relative path, "append" | "replace", chars)
FailureListener = Callable[[str, str], None]  # (relative path, what went wrong)

SHRINK_LIMIT = 0.5  # a replace may not drop more than half of MEMORY.md ...
SHRINK_MIN_CHARS = 400  # ... once it holds at least this much


def append_text(workspace: Path, rel: str, text: str) -> bool:
    """Append ``text`` to ``workspace/rel`` in one write, separated by a newline; False if already at the
    end. The file is opened once, without following a symlink, and read and appended through that one
    descriptor, whole or not at all (:func:`sessionmem.safefs.append_under`)."""

    def addition(current: bytes) -> bytes | None:
        existing = current.decode("utf-8", errors="replace")
        if text.strip() and existing.rstrip().endswith(text.strip()):
            return None
        separator = "\n" if existing and not existing.endswith("\n") and not text.startswith("\n") else ""
        return (separator + text).encode("utf-8")

    return append_under(workspace, rel, addition)


def _clean(text: object) -> tuple[str, int]:
    """Text for a memory file: control characters (NUL included) removed, so one stray byte can never
    make a file unreadable (:func:`sessionmem.memory.sync.sources.strip_control_chars`)."""
    problem = text_problem(text)
    if problem is not None:
        raise ToolError(f"the text to write {problem}")
    assert isinstance(text, str)
    return strip_control_chars(text)


def text_arguments(*required: str, optional: tuple[str, ...] = ()) -> ArgumentConverter:
    """A tool's argument check: each named argument must be text (:func:`~sessionmem.messages.text_problem`:
    a string without a lone surrogate); the first that is not is named in the error, before anything is
    written. ``optional`` ones are checked when given."""

    def convert(args: Mapping[str, Any]) -> dict[str, Any]:
        for name in (*required, *optional):
            if name not in args and name in optional:
                continue
            problem = text_problem(args.get(name))
            if problem is not None:
                raise ArgumentError.about(name, problem)
        return dict(args)

    return convert


def _removed_note(removed: int) -> str:
    if not removed:
        return ""
    return f" (removed {removed} control character{'s' if removed > 1 else ''})"


class MemoryWriter:
    """The workspace's memory files, with the rules above; ``on_write`` hears every change.

    ``visibility``: what the session may read and write (everything by default, as the owner);
    ``home``: where its own memory lives (the root files by default); ``on_failure`` hears every write refused
    once its text was checked (by the file system, a full disk; as unsafe; as not the session's to write),
    which the tool reports to the model as an error naming the file."""

    def __init__(
        self,
        workspace: Path,
        *,
        timezone_name: str | None = None,
        on_write: WriteListener | None = None,
        on_failure: FailureListener | None = None,
        visibility: Visibility = EVERYTHING,
        home: MemoryHome = AGENT_HOME,
    ) -> None:
        self.workspace = Path(workspace)
        self.timezone_name = timezone_name
        self.on_write = on_write
        self.on_failure = on_failure
        self.visibility = visibility
        self.home = home

    def today_path(self) -> str:
        """Today's daily log in the home folder (the user's time zone)."""
        return self.home.daily_log(date_stamp(datetime.now(UTC), user_zone(self.timezone_name)))

    def read(self, path: str, start: int | None = None, count: int | None = None) -> str:
        """What ``memory_get`` answers (same checks, same caps), as plain text for ``memory_read``."""
        from sessionmem.memory.tools.reading import handle_memory_get

        args: dict[str, Any] = {"path": path}
        if start is not None:
            args["from"] = start
        if count is not None:
            args["lines"] = count
        answer = handle_memory_get(self.workspace, args, visibility=self.visibility)
        if answer.get("error"):
            raise ToolError(str(answer["error"]))
        text = str(answer["text"])
        return f"{text}\n\n[{answer['note']}]" if answer.get("truncated") else text

    def append(self, rel: str, text: str) -> str:
        text, removed = _clean(text)
        if not text.strip():
            raise ToolError("nothing to append: text is empty")
        try:
            self._resolve_write(rel)
            if not append_text(self.workspace, rel, text):
                return f"Already present at the end of {rel}; nothing appended."
        except (ToolError, UnsafeWriteError) as exc:
            raise self._refused(rel, str(exc)) from None
        except FileWriteError as exc:
            raise self._failed(rel, exc, f"nothing was appended; {rel} is as it was") from None
        self._notify(rel, "append", len(text))
        return f"Appended content to {rel}{_removed_note(removed)}."

    def replace(self, rel: str, content: str) -> str:
        content, removed = _clean(content)
        if rel != self.home.memory_file:
            raise ToolError(
                f"replace is only allowed for {self.home.memory_file}, not {rel}; use mode=append"
            )
        try:
            self._resolve_write(rel)
        except ToolError as exc:
            raise self._refused(rel, str(exc)) from None
        try:
            old = self._current(rel)
            if len(old) >= SHRINK_MIN_CHARS and len(content) < len(old) * SHRINK_LIMIT:
                raise ToolError(
                    f"refusing to replace {rel} ({len(old)} chars) with {len(content)} chars: that drops "
                    "more than half of it. Append instead, or keep the existing entries in the new content."
                )
            saved = save_version(self.workspace, rel, old) if old else None
            replace_under(self.workspace, rel, content.encode("utf-8"))
        except UnsafeWriteError as exc:
            raise self._refused(rel, str(exc)) from None
        except FileWriteError as exc:
            raise self._failed(rel, exc, f"{rel} is unchanged") from None
        self._notify(rel, "replace", len(content))
        if saved is None:
            return f"Replaced {rel} (it was empty){_removed_note(removed)}."
        return (
            f"Replaced {rel} (previous version saved as {saved} ; the newest {MAX_VERSIONS} versions are "
            f"kept in {history_folder(rel)}/, never indexed){_removed_note(removed)}."
        )

    def _current(self, rel: str) -> str:
        """The file's text as it is now, read without following a symlink ("" when missing)."""
        try:
            fd = open_under(self.workspace, rel, os.O_RDONLY, create_dirs=False)
        except FileNotFoundError:
            return ""
        try:
            return read_all(fd).decode("utf-8", errors="replace")
        finally:
            os.close(fd)

    def _resolve_write(self, rel: str) -> Path:
        """A path the session may write: an allowed memory file that it may also read."""
        try:
            target = writable_memory_path(self.workspace, rel)
        except MemoryPathError as exc:
            raise ToolError(str(exc)) from None
        if not self.visibility.allows(markdown_label(rel)):
            raise ToolError(str(MemoryPathError(rel, refusal(self.visibility))))
        return target

    def _refused(self, rel: str, problem: str) -> ToolError:
        """The tool error for a write of ``rel`` refused here (not the session's to write, or unsafe: a
        symlink on the way), reported to ``on_failure`` first: the note was saved nowhere."""
        if self.on_failure is not None:
            self.on_failure(rel, problem)
        return ToolError(problem)

    def _failed(self, rel: str, exc: FileWriteError, outcome: str) -> ToolError:
        """The tool error for a write the file system refused, reported to ``on_failure`` first."""
        if self.on_failure is not None:
            self.on_failure(rel, str(exc))
        return ToolError(f"{exc}; {outcome}. Nothing else was changed; try again once there is space.")

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


# The tools that write memory files, and the argument holding the text each writes (``forget`` reads them
# in a person's transcripts to find the lines they wrote in shared notes).
WRITTEN_TEXT_ARGUMENT = {"memory_append_daily": "text", "memory_write": "content", "write": "content"}


def memory_write_tools(writer: MemoryWriter) -> list[Tool]:
    """The everyday write tools: append to today's daily log, append to / replace the session's MEMORY.md
    (``MEMORY.md`` names the home's long-term file, e.g. ``memory/peers/<chat>/MEMORY.md``)."""
    home = writer.home

    def memory_append_daily(text: str) -> str:
        return writer.append(writer.today_path(), text)

    def memory_write(path: str, content: str, mode: str = "append") -> str:
        if path not in ("MEMORY.md", home.memory_file):
            raise ToolError(
                f"memory_write only writes {home.memory_file} (got {path}); use memory_append_daily for notes"
            )
        if mode == "replace":
            return writer.replace(home.memory_file, content)
        if mode != "append":
            raise ToolError(f"mode must be 'append' or 'replace', not {mode!r}")
        return writer.append(home.memory_file, content)

    write_schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "enum": sorted({"MEMORY.md", home.memory_file})},
            "content": {"type": "string"},
            "mode": {"type": "string", "enum": ["append", "replace"], "default": "append"},
        },
        "required": ["path", "content"],
    }
    return [
        Tool(
            "memory_append_daily",
            f"Append a durable note to today's daily log {home.daily_folder}/YYYY-MM-DD.md.",
            _APPEND_SCHEMA,
            memory_append_daily,
            convert=text_arguments("text"),
        ),
        Tool(
            "memory_write",
            f"Write long-term memory in {home.memory_file} (append, or replace keeping earlier versions).",
            write_schema,
            memory_write,
            convert=text_arguments("path", "content", optional=("mode",)),
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
        Tool(
            "write",
            "Append content to a memory file." + note,
            write_schema,
            write,
            convert=text_arguments("path", "content"),
        ),
        Tool(
            "memory_append_daily",
            f"Append a durable note to {target}." + note,
            _APPEND_SCHEMA,
            memory_append_daily,
            convert=text_arguments("text"),
        ),
    ]
