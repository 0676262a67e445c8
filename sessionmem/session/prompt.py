"""The session's system prompt (reference §11, §1.9).

Assembled from: the developer's base prompt; the "## Silent Replies" section; the Memory Recall
section (when memory tools are offered, full prompt mode only); the Project Context with ``MEMORY.md``
(private sessions only, never in groups, truncated past ``bootstrapMaxChars`` keeping the head 70% and
the tail 20%) and, when ``loadDailyLogs`` is on, yesterday's and today's daily logs (OpenClaw leaves
that to an AGENTS.md instruction the model may skip); and the ``Current time:`` line.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sessionmem.session.flush import current_time_line, user_zone, zone_label

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
    minimal: bool = False  # subagent and cron sessions
    recall_section: str = ""  # from the memory tools, "" when none are offered
    bootstrap_max_chars: int = 20_000
    load_daily_logs: bool = True
    timezone_name: str | None = None
    silent_token: str = "NO_REPLY"  # silentReplyToken


def memory_file(workspace: Path) -> Path | None:
    """``MEMORY.md``, or ``memory.md`` only when MEMORY.md is absent (OpenClaw loads one)."""
    for name in ("MEMORY.md", "memory.md"):
        candidate = workspace / name
        if candidate.is_file() and not candidate.is_symlink():
            return candidate
    return None


def project_context_files(workspace: Path, options: PromptOptions, now: datetime) -> list[tuple[str, str]]:
    """``(display name, content)`` of the memory files the prompt shows; none outside private sessions."""
    if not options.private or options.minimal:
        return []
    files: list[tuple[str, str]] = []
    main = memory_file(workspace)
    if main is not None:
        files.append((main.name, _read(main)))
    if options.load_daily_logs:
        zone = user_zone(options.timezone_name)
        today = (now if now.tzinfo else now.replace(tzinfo=UTC)).astimezone(zone).date()
        for day in (today - timedelta(days=1), today):
            rel = f"memory/{day.isoformat()}.md"
            path = workspace / rel
            if path.is_file() and not path.is_symlink():
                files.append((rel, _read(path)))
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


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
