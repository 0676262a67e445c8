"""Saving the ending session to ``memory/`` on ``/new`` and ``/reset`` (the session-memory hook).

What it does (reference §4, with DESIGN decision 6):

1. find the ending session's transcript: where the store keeps it in a database (the event's ``transcript``
   has no ``path``), its entries are read through the store seam; else ``event.transcript_path`` (the live
   file: the runner emits before it archives), else the session entry's ``sessionFile``, else
   ``<sessionId>.jsonl`` or the newest ``<sessionId>-topic-*.jsonl`` in the sessions folder; when that file
   yields no messages, the newest ``<file>.reset.*`` archive of it;
2. keep the last N (15) user/assistant messages, after dropping slash commands, tool and system
   entries and messages relayed from other sessions (filter first, then slice: OpenClaw #2681);
3. name the file ``<YYYY-MM-DD>-<slug>.md`` with a model-made slug or the UTC ``HHMM``, in the chat's
   own folder ``memory/peers/<chat>/`` (:func:`sessionmem.privacy.chat_folder`): the file is an excerpt
   of the transcript, so only who may see the transcript may find it (DESIGN decision 14);
4. write it with OpenClaw's body, never replacing an existing file (``-2``, ``-3`` … instead), and never
   through a symlink (:func:`sessionmem.safefs.create_new_under`).

The message selection and the body are pure functions; only the last two helpers touch the disk.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessionmem.errors import TranscriptError
from sessionmem.memory.sync.sources import strip_control_chars
from sessionmem.messages import FLUSH_PROVENANCE, provenance_kind
from sessionmem.privacy import chat_folder
from sessionmem.safefs import create_new_under
from sessionmem.session.lifecycle.slug import as_utc, fallback_slug, generate_slug
from sessionmem.session.stores.keys import sessions_dir
from sessionmem.session.stores.transcript_folder import read_entries

if TYPE_CHECKING:
    from sessionmem.hooks import HookEvent

HOOK_NAME = "session-memory"
DEFAULT_MESSAGES = 15


@dataclass(frozen=True, slots=True)
class SessionMemoryOptions:
    messages: int = DEFAULT_MESSAGES
    llm_slug: bool = True

    @classmethod
    def from_entry(cls, options: dict[str, Any]) -> SessionMemoryOptions:
        """From ``hooks.internal.entries["session-memory"]``'s extra keys (``messages``, ``llmSlug``)."""
        messages = options.get("messages")
        llm_slug = options.get("llmSlug", options.get("llm_slug", True))
        count = (
            messages
            if isinstance(messages, int) and not isinstance(messages, bool) and messages > 0
            else None
        )
        return cls(messages=count or DEFAULT_MESSAGES, llm_slug=llm_slug is not False)


# ---------------------------------------------------------------------------- pure selection


def _first_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
                return str(block["text"])
    return ""


def conversation_lines(entries: Iterable[Any]) -> list[str]:
    """``"user: …"`` / ``"assistant: …"`` for every message worth remembering, oldest first."""
    out = []
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("type") != "message":
            continue
        message = entry.get("message")
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role not in ("user", "assistant") or not message.get("content"):
            continue
        kind = provenance_kind(message)
        if (role == "user" and kind == "inter_session") or kind == FLUSH_PROVENANCE:
            continue  # relayed from another session, or the silent flush turn (prompt and reply)
        text = _first_text(message.get("content"))
        if not text or text.lstrip().startswith("/"):
            continue
        out.append(f"{role}: {text}")
    return out


def recent_content(entries: Iterable[Any], limit: int = DEFAULT_MESSAGES) -> str:
    """The last ``limit`` kept messages, joined by newlines (filtering happens before slicing)."""
    lines = conversation_lines(entries)
    return "\n".join(lines[-limit:] if limit > 0 else lines)


def memory_body(
    when: datetime, session_key: str, session_id: str | None, source: str | None, content: str
) -> str:
    """OpenClaw's file body; the ``Conversation Summary`` block only when there is content."""
    utc = as_utc(when)
    parts = [
        f"# Session: {utc.strftime('%Y-%m-%d')} {utc.strftime('%H:%M:%S')} UTC",
        "",
        f"- **Session Key**: {session_key}",
        f"- **Session ID**: {session_id or 'unknown'}",
        f"- **Source**: {source or 'unknown'}",
        "",
    ]
    if content:
        parts += ["## Conversation Summary", "", content, ""]
    return "\n".join(parts)


# ---------------------------------------------------------------------------- transcript lookup


def read_transcript_entries(path: Path) -> list[dict[str, Any]]:
    """The transcript's entries (:func:`~sessionmem.session.stores.transcript_folder.read_entries`:
    malformed and torn lines skipped); [] if unreadable (the hook saves what it can)."""
    try:
        return [entry for _, entry in read_entries(path)]
    except TranscriptError:
        return []


def _strip_reset(name: str) -> str:
    index = name.find(".reset.")
    return name if index < 0 else name[:index]


def find_session_file(
    directories: Iterable[Path], session_file: Path | None, session_id: str | None
) -> Path | None:
    """OpenClaw's ``findPreviousSessionFile``: the live transcript for a missing or archived path.

    Tried in each folder: the archived name without ``.reset.*``, ``<sessionId>.jsonl``, then the
    newest ``<sessionId>-topic-*.jsonl``. (OpenClaw's last resort, "any newest transcript", is left
    out: it can pick the *new* session's file.)
    """
    for folder in dict.fromkeys(directories):
        if not folder.is_dir():
            continue
        if session_file is not None:
            candidate = folder / _strip_reset(session_file.name)
            if candidate.is_file():
                return candidate
        if session_id:
            candidate = folder / f"{session_id}.jsonl"
            if candidate.is_file():
                return candidate
            topics = sorted(
                (p for p in folder.glob(f"{session_id}-topic-*.jsonl") if ".reset." not in p.name),
                key=lambda p: p.name,
                reverse=True,
            )
            if topics:
                return topics[0]
    return None


def newest_reset_archive(path: Path) -> Path | None:
    """The lexicographically last ``<path>.reset.*`` sibling (ISO stamps sort by time)."""
    base = _strip_reset(path.name)
    try:
        archives = sorted(p for p in path.parent.glob(f"{base}.reset.*") if p.is_file())
    except OSError:
        return None
    return archives[-1] if archives else None


def _entry(event: HookEvent) -> dict[str, Any]:
    return event.previous_session_entry or event.session_entry or {}


def session_dirs(event: HookEvent, session_file: Path | None) -> list[Path]:
    dirs = []
    if session_file is not None:
        dirs.append(session_file.parent)
    extra = event.extra.get("sessions_dir")
    if extra:
        dirs.append(Path(extra))
    dirs.append(sessions_dir(event.state_dir, event.agent_id))
    dirs.append(Path(event.workspace) / "sessions")
    return dirs


def resolve_transcript(event: HookEvent) -> Path | None:
    """The ending session's transcript file, per the lookup order in the module docstring."""
    entry = _entry(event)
    if event.transcript_path is not None and Path(event.transcript_path).is_file():
        return Path(event.transcript_path)
    given = event.transcript_path or entry.get("sessionFile")
    session_file = Path(given) if given else None
    if session_file is not None and session_file.is_file() and ".reset." not in session_file.name:
        return session_file
    found = find_session_file(session_dirs(event, session_file), session_file, entry.get("sessionId"))
    if found is not None:
        return found
    if session_file is not None:  # the live file is gone: it may already have been archived
        return newest_reset_archive(session_file) if not session_file.is_file() else session_file
    return None


def load_recent_content(path: Path | None, limit: int) -> tuple[str, dict[str, Any] | None]:
    """(recent content, transcript header); an empty live file falls back to its newest archive."""
    if path is None:
        return "", None
    entries = read_transcript_entries(path)
    content = recent_content(entries, limit)
    if not content:
        archive = newest_reset_archive(path)
        if archive is not None and archive != path:
            entries = read_transcript_entries(archive)
            content = recent_content(entries, limit)
    header = next((e for e in entries if isinstance(e, dict) and e.get("type") == "session"), None)
    return content, header


# ---------------------------------------------------------------------------- writing


async def save_session_memory(event: HookEvent) -> Path | None:
    """Write the ending session's memory file; returns its path (None for other events)."""
    from sessionmem.hooks import COMMAND_NEW, COMMAND_RESET, hook_options

    if event.name not in (COMMAND_NEW, COMMAND_RESET):
        return None
    options = SessionMemoryOptions.from_entry(hook_options(event.config, HOOK_NAME))
    live = event.transcript
    if live is not None and live.path is None:  # a database transcript: no file to find
        entries = [entry.data for entry in live.entries()]
        content, header = recent_content(entries, options.messages), getattr(live, "header", None)
    else:
        content, header = load_recent_content(resolve_transcript(event), options.messages)
    slug = None
    if content and options.llm_slug:
        slug = await generate_slug(event.model, content)
    when = as_utc(event.timestamp)
    entry = _entry(event)
    session_id = entry.get("sessionId") or (header or {}).get("id")
    body = memory_body(when, event.session_key, session_id, event.command_source, content)
    stem = f"{when.strftime('%Y-%m-%d')}-{slug or fallback_slug(when)}"
    workspace = Path(event.workspace)
    text, _ = strip_control_chars(body)  # a stray NUL in the conversation must not make the file binary
    return workspace / create_new_under(workspace, chat_folder(event.session_key), stem, text.encode("utf-8"))
