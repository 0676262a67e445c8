"""``sessionmem demo``: a scripted long conversation, shown as a timeline (or JSON lines with ``--json``).

No API key, no network: the model is scripted (:mod:`sessionmem.runs.walkthrough`), memory search is FTS-only
unless the agent's config names a local embedding model. The run happens in a fresh workspace (a new
temporary folder unless ``--workspace`` names an empty or new one); sessions and the index live in the
global ``--state-dir`` when one is given, else in the workspace's ``.sessionmem/`` folder, so nothing of
the user's own agent is touched by default (the global ``--workspace`` is not used for the same reason).

The exit status is 0 only when the new session found the early fact again through ``memory_search``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from sessionmem.cli import output
from sessionmem.safefs import make_private_dirs

if TYPE_CHECKING:
    from sessionmem.config import MemorySearchConfig
    from sessionmem.context import Context

BAR_WIDTH = 20
TEXT_WIDTH = 64
STATE_FOLDER = ".sessionmem"


# ---------------------------------------------------------------------------- formatting (pure)


def bar(tokens: int, limit: int, width: int = BAR_WIDTH) -> str:
    """``▕████░░░░▏``: ``tokens`` against ``limit`` (full, never longer, at or over the limit)."""
    filled = width if limit <= 0 else min(width, round(width * tokens / limit))
    return "▕" + "█" * filled + "░" * (width - filled) + "▏"


def _short(text: str | None, width: int = TEXT_WIDTH) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def format_record(record: dict[str, Any]) -> list[str]:
    """The timeline lines for one demo record (see :func:`sessionmem.runs.walkthrough.run_demo`)."""
    kind = record.get("event")
    pad = " " * 9
    if kind == "start":
        return [
            "sessionmem demo: a scripted conversation (no API key, no network)",
            f"  workspace  {record['workspace']}",
            f"  model      {record['model']} · memory search {record['memoryMode']}",
            f"  window     {record['contextWindow']:,} tokens · silent flush at "
            f"{record['flushThreshold']:,} · compaction at {record['compactionThreshold']:,}",
            "  tokens     the projected prompt (system prompt, messages, tool schemas), as the thresholds"
            " count it",
            "",
            "── session 1 " + "─" * 50,
        ]
    if kind == "turn":
        tokens, limit = record["tokens"], record["compactionThreshold"]
        head = (
            f"turn {record['turn']:>2}  {bar(tokens, limit)} {tokens:>5,} / {limit:,} tokens  "
            f"you: {_short(record['user'], 48)}"
        )
        if record.get("session", 1) > 1:
            return [head, f"{pad}assistant: {record.get('reply') or '(silent)'}"]
        return [head]
    if kind == "memory_write":
        if record.get("mode") == "create":
            return [f"{pad}✎ session-memory hook wrote {record['path']} ({record['chars']:,} chars)"]
        lines = [f"{pad}✎ wrote {record['path']} ({record.get('mode')}):"]
        return lines + [f"{pad}    + {_short(line, 90)}" for line in record.get("lines", []) if line.strip()]
    if kind == "flush":
        failed = f" · failed: {record['error']}" if record.get("error") else ""
        at = f" at {record['tokens']:,} tokens" if record.get("tokens") else ""
        reason = record.get("reason")
        return [f"{pad}⚑ silent memory flush{at} ({reason}) → {record.get('path')}, replied NO_REPLY{failed}"]
    if kind == "flush_skipped":
        return [f"{pad}⚑ memory flush skipped: {record.get('reason')}"]
    if kind == "compaction":
        return [
            f"{pad}⇣ compaction #{record['compactionCount']} ({record.get('reason')}): "
            f"{record['tokensBefore']:,} → {record['tokensAfter']:,} tokens"
        ]
    if kind == "compaction_failed":
        return [f"{pad}⇣ compaction failed: {record.get('error')}"]
    if kind == "hook_error":
        return [f"{pad}⚠ {record.get('error')}"]  # names the hook and the hook event
    if kind == "new":
        return [
            "",
            f"/new     ⟳ session {str(record.get('previousSessionId'))[:8]} archived as "
            f"{Path(str(record.get('archivedPath') or '-')).name}",
            f"{pad}saved under its slug: {record.get('memoryFile') or '(no memory file)'}",
            "",
            "── session 2 " + "─" * 50,
        ]
    if kind == "memory_search":
        results = record.get("results") or []
        mode = f" ({record['mode']})" if record.get("mode") else ""
        lines = [f'{pad}⌕ memory_search "{record.get("query")}"{mode}: {len(results)} hit(s)']
        if record.get("error"):
            lines.append(f"{pad}    error: {_short(record['error'], 90)}")
        terms = [t.lower() for t in str(record.get("query", "")).split() if len(t) > 2]
        for hit in results[:3]:
            lines_of = [ln for ln in str(hit.get("snippet", "")).splitlines() if ln.strip()]
            first = max(lines_of, key=lambda ln: sum(t in ln.lower() for t in terms), default="")
            lines.append(
                f"{pad}    {hit['path']}#L{hit['startLine']}-L{hit['endLine']}  score {hit['score']:.3f}"
                f"  {_short(first, 50)}"
            )
        return lines
    if kind == "done":
        files = ", ".join(record.get("memoryFiles") or []) or "(none)"
        verdict = (
            "✓ recalled the early fact" if record.get("recalled") else "✗ the early fact was NOT recalled"
        )
        return [
            "",
            f"{verdict} · {record.get('flushes')} flush(es), {record.get('compactions')} compaction(s)",
            f"  memory files: {files}",
        ]
    return []


class Timeline:
    """Prints records as timeline lines, in reading order: a flush's heading before the lines it wrote,
    a turn's line before the memory_search it ran and the answer."""

    def __init__(self, echo: Any = click.echo) -> None:
        self.echo = echo
        self._writes: list[dict[str, Any]] = []
        self._searches: list[dict[str, Any]] = []

    def __call__(self, record: dict[str, Any]) -> None:
        kind = record.get("event")
        if kind == "memory_write" and record.get("mode") != "create":
            self._writes.append(record)
            return
        if kind == "memory_search":
            self._searches.append(record)
            return
        lines = format_record(record)
        if kind == "flush":
            lines += [ln for w in self._writes for ln in format_record(w)]
            self._writes = []
        elif kind == "turn" and self._searches:
            searches = [ln for s in self._searches for ln in format_record(s)]
            lines = lines[:1] + searches + lines[1:]
            self._searches = []
        for pending in (*self._writes, *self._searches):  # not followed by their flush or turn
            lines += format_record(pending)
        self._writes, self._searches = [], []
        for line in lines:
            self.echo(line)


# ---------------------------------------------------------------------------- the command


def _workspace(given: str | None) -> Path:
    if given is None:
        return Path(tempfile.mkdtemp(prefix="sessionmem-demo-"))
    path = Path(given).expanduser().resolve()
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise click.UsageError(
            f"--workspace {path} must be a new or empty folder (the demo writes files there)"
        )
    make_private_dirs(path)
    return path


def _memory_search(app: Context) -> tuple[MemorySearchConfig | None, Any, str | None]:
    """The user's memory-search settings when they configure a local model, else FTS-only (None);
    a config that disables memory search is honoured (the recall then fails, visibly).

    Never a remote provider: the demo makes no network call. Returns (settings, selection, note).
    """
    from sessionmem.config import MemorySearchConfig
    from sessionmem.errors import EmbedderUnavailable

    settings = app.agent.memory_search
    if not settings.enabled:  # honoured, so the demo shows what happens without memory search
        return MemorySearchConfig(provider="none", enabled=False), None, "memory search is disabled in config"
    path = settings.local.model_path
    local_file = bool(path) and Path(str(path)).expanduser().is_file()
    if not (settings.provider == "local" or (settings.provider == "auto" and local_file)):
        return None, None, None
    try:
        from sessionmem.memory.embed.choice import select_embedder

        local = settings.model_copy(update={"provider": "local", "fallback": "none"})
        return local, select_embedder(local, app.env), None
    except (EmbedderUnavailable, ImportError) as exc:
        return None, None, f"local embeddings unavailable, using FTS-only: {exc}"


@click.command()
@click.option(
    "--workspace", "workspace", metavar="DIR", help="Run in DIR (new or empty). Default: a new temp folder."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per event, one per line.")
@click.pass_context
def demo(ctx: click.Context, workspace: str | None, as_json: bool) -> None:
    """Run a scripted long conversation: flush, compaction, /new, then recall.

    \b
    Examples:
      sessionmem demo
      sessionmem demo --json | jq -c 'select(.event == "memory_search")'
    """
    from sessionmem.runs.walkthrough import run_demo

    app = output.resolved(ctx)
    folder = _workspace(workspace)
    settings, selection, note = _memory_search(app)
    if note:
        output.echo_err(f"warning: {note}")

    report = run_demo(
        folder,
        output.explicit_state_dir(ctx) or folder / STATE_FOLDER,
        emit=output.echo_line_json if as_json else Timeline(),
        memory_search=settings,
        selection=selection,
        timezone=app.agent.user_timezone,
    )
    if not report.recalled:
        raise output.CommandFailed(
            "demo failed: the new session did not find the early fact (Tomás's peanut allergy) through "
            f"memory_search; answer was {report.answer!r}. Files are in {folder}"
        )
