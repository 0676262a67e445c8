"""The session's system prompt (reference §11, §1.9).

Assembled from: the developer's base prompt; the "## Silent Replies" section; the Memory Recall
section (when memory tools are offered, full prompt mode only); the Project Context with ``MEMORY.md``
(private sessions only, never in groups, truncated past ``bootstrapMaxChars`` keeping the head 70% and
the tail 20%) and, when ``loadDailyLogs`` is on, yesterday's and today's daily logs (OpenClaw leaves
that to an AGENTS.md instruction the model may skip); and the ``Current time:`` line.

The files come from the session's *home* (the root files, or its own ``memory/peers/<chat>/`` with
``memory.scope: peer``) and pass the same checks as ``memory_get``: no symlink, and only what the
session's visibility allows (:mod:`sessionmem.privacy`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sessionmem.clock import current_time_line, user_zone, zone_label
from sessionmem.errors import MemoryPathError
from sessionmem.memory.sync.sources import NotMarkdownError, read_markdown
from sessionmem.memory.tools.paths import check_visible, resolve_memory_target
from sessionmem.privacy import AGENT_HOME, EVERYTHING, MemoryHome, Visibility

SILENT_REPLIES_SECTION = """## Silent Replies
When you have nothing to say, respond with ONLY: {token}

Rules:
- It must be your ENTIRE message, nothing else.
- Never append it to an actual response (never include "{token}" in real replies).
- Never wrap it in markdown or code blocks.

Wrong: "Here's help... {token}"
Right: {token}"""

PROJECT_CONTEXT_HEADING = "# Project Context"
PROJECT_CONTEXT_INTRO = "The following project context files have been loaded:"
HEAD_SHARE = 0.7
TAIL_SHARE = 0.2


def truncate_bootstrap(content: str, name: str, max_chars: int) -> str:
    """``content`` unchanged when within ``max_chars``, else its head 70% and tail 20% around markers."""
    if max_chars <= 0 or len(content) <= max_chars:
        return content
    head_len = int(max_chars * HEAD_SHARE)
    tail_len = int(max_chars * TAIL_SHARE)
    head, tail = content[:head_len], content[len(content) - tail_len :] if tail_len else ""
    return (
        f"{head}\n[...truncated, read {name} for full content...]\n"
        f"…(truncated {name}: kept {head_len}+{tail_len} chars of {len(content)})…\n{tail}"
    )


@dataclass(frozen=True, slots=True)
class PromptOptions:
    base: str = ""
    private: bool = True  # direct/main session: long-term memory may be shown
    visibility: Visibility = EVERYTHING  # what the session may see (sessionmem.privacy)
    home: MemoryHome = AGENT_HOME  # where its MEMORY.md and daily logs live
    minimal: bool = False  # subagent and cron sessions
    recall_section: str = ""  # from the memory tools, "" when none are offered
    bootstrap_max_chars: int = 20_000
    load_daily_logs: bool = True
    timezone_name: str | None = None
    silent_token: str = "NO_REPLY"  # silentReplyToken


def memory_file(workspace: Path, home: MemoryHome = AGENT_HOME) -> str | None:
    """The home's long-term file: at the root ``MEMORY.md``, or ``memory.md`` only when MEMORY.md is
    absent (OpenClaw loads one); else the home's ``MEMORY.md``."""
    names = ("MEMORY.md", "memory.md") if home.memory_file == "MEMORY.md" else (home.memory_file,)
    for name in names:
        candidate = workspace / name
        if candidate.is_file() and not candidate.is_symlink():
            return name
    return None


def project_context_files(workspace: Path, options: PromptOptions, now: datetime) -> list[tuple[str, str]]:
    """``(display name, content)`` of the memory files the prompt shows; none outside private sessions."""
    if not options.private or options.minimal:
        return []
    names: list[str] = []
    main = memory_file(workspace, options.home)
    if main is not None:
        names.append(main)
    if options.load_daily_logs:
        zone = user_zone(options.timezone_name)
        today = (now if now.tzinfo else now.replace(tzinfo=UTC)).astimezone(zone).date()
        names += [options.home.daily_log(day.isoformat()) for day in (today - timedelta(days=1), today)]
    files = [(name, _read(workspace, name, options.visibility)) for name in names]
    return [(name, text) for name, text in files if text.strip()]


def build_system_prompt(workspace: Path, options: PromptOptions, now: datetime | None = None) -> str:
    """The full system prompt for one session (built at session start and after a compaction)."""
    now = now or datetime.now(UTC)
    sections = [options.base.strip()] if options.base.strip() else []
    sections.append(SILENT_REPLIES_SECTION.format(token=options.silent_token))
    if options.recall_section and not options.minimal:
        sections.append(options.recall_section.strip())
    files = project_context_files(workspace, options, now)
    if files:
        body = [PROJECT_CONTEXT_HEADING, PROJECT_CONTEXT_INTRO]
        for name, text in files:
            body.append(f"## {name}\n{truncate_bootstrap(text, name, options.bootstrap_max_chars)}")
        sections.append("\n\n".join(body))
    zone = user_zone(options.timezone_name)
    sections.append(current_time_line(now, zone, zone_label(options.timezone_name)))
    return "\n\n".join(sections)


def _read(workspace: Path, rel: str, visibility: Visibility) -> str:
    """The file's text when the session may see it and it is a safe memory file, else ""."""
    try:
        target = check_visible(resolve_memory_target(workspace, rel), visibility)
        return read_markdown(target.path).text
    except (MemoryPathError, NotMarkdownError, OSError):
        return ""
