"""``sessionmem sessions list | show KEY | delete KEY``: the agent's sessions as the management API and
the inspector show them (:mod:`sessionmem.session.overview` does the work; this module prints).

``list`` pages the store's sessions newest first (``--filter`` keeps the keys holding a text); ``show``
prints one session's entry, the thresholds in force, its timeline (turns, flushes, compactions,
``/new``, overflows) and a page of its transcript; ``delete`` forgets that chat, as ``sessionmem
forget KEY`` does (its report, its exit status). ``--json`` prints the API's own answer (camelCase).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import click

from sessionmem.cli.output import echo_json, resolved
from sessionmem.context import Context

_JSON = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")


def _store(app: Context) -> Any:
    from sessionmem.session.stores.opening import open_session_store

    return open_session_store(app.config.session.store, state_dir=app.state_dir, agent_id=app.agent_id)


def _close(store: Any) -> None:
    close = getattr(store, "close", None)
    if callable(close):
        close()


@click.command(name="list", short_help="List the agent's sessions, newest first.")
@click.option("--filter", "q", metavar="TEXT", help="Only the sessions whose key holds TEXT.")
@click.option("--page", type=click.IntRange(min=1), default=1, show_default=True, help="Which page.")
@click.option("--limit", type=click.IntRange(1, 200), default=50, show_default=True, help="Sessions a page.")
@_JSON
@click.pass_context
def list_(ctx: click.Context, q: str | None, page: int, limit: int, as_json: bool) -> None:
    """List the agent's sessions, newest first, with their counters.

    \b
    Examples:
      sessionmem sessions list
      sessionmem sessions list --filter telegram --json
    """
    from sessionmem.session.overview import list_sessions, page_of

    app = resolved(ctx)
    store = _store(app)
    try:
        listed = list_sessions(store, page=page_of(page, limit), q=q)
    finally:
        _close(store)
    if as_json:
        echo_json(listed)
        return
    if not listed["sessions"]:
        click.echo("No sessions." if not q else f"No session key holds {q!r}.")
        return
    for item in listed["sessions"]:
        flushed = "flushed" if item["flushedThisCycle"] else "not flushed"
        click.echo(
            f"{_when(item.get('updatedAt'))}  {item['sessionKey']}  "
            f"{_tokens(item.get('totalTokens'))} tokens · {item['compactionCount']} compactions · "
            f"{flushed} this cycle"
        )
    click.echo(f"Page {listed['page']} of {listed['pages']} ({listed['total']} sessions)")


@click.command(short_help="Show one session: entry, thresholds, timeline, transcript.")
@click.argument("key")
@click.option("--page", type=click.IntRange(min=1), help="Transcript page (default: the last).")
@click.option("--limit", type=click.IntRange(1, 200), default=50, show_default=True, help="Entries a page.")
@_JSON
@click.pass_context
def show(ctx: click.Context, key: str, page: int | None, limit: int, as_json: bool) -> None:
    """Show the session KEY (agent:main:telegram:direct:42, or telegram:direct:42 for this agent's).

    \b
    Examples:
      sessionmem sessions show agent:main:main
      sessionmem sessions show main --page 1 --json
    """
    from sessionmem.session.overview import show_session

    app = resolved(ctx)
    store = _store(app)
    try:
        shown = show_session(
            store, app.agent, app.agent_id, key, transcript_page=page, transcript_limit=limit
        )
    finally:
        _close(store)
    if as_json:
        echo_json(shown)
        return
    click.echo("\n".join(show_lines(shown)))


@click.command(short_help="Delete a session: forget that chat.")
@click.argument("key")
@click.option("--dry-run", is_flag=True, help="Only list what would go.")
@_JSON
@click.pass_context
def delete(ctx: click.Context, key: str, dry_run: bool, as_json: bool) -> None:
    """Delete the session KEY: everything kept of that chat goes, as with `sessionmem forget KEY`
    (its notes, transcripts and archives, the store entry, the index rows).

    \b
    Examples:
      sessionmem sessions delete agent:main:telegram:direct:42 --dry-run
    """
    from sessionmem.cli.forget import forget
    from sessionmem.session.overview import deletable_key

    app = resolved(ctx)
    store = _store(app)
    try:
        norm = deletable_key(store, app.agent_id, key)
    finally:
        _close(store)
    ctx.invoke(forget, who=norm, names=(), dry_run=dry_run, as_json=as_json)


# ---------------------------------------------------------------------------- printing


def _when(ms: Any) -> str:
    if not isinstance(ms, int) or ms <= 0:
        return "-" * 19
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def _tokens(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else "?"


def show_lines(shown: dict[str, Any]) -> Iterator[str]:
    """``show`` for people: the entry's figures, the thresholds, the markers, then the transcript page."""
    entry, limits = shown["entry"], shown["thresholds"]
    yield f"Session {entry['sessionKey']} · id {entry.get('sessionId')}"
    yield f"Updated: {_when(entry.get('updatedAt'))} UTC · model {entry.get('model') or 'unknown'}"
    yield (
        f"Context: {_tokens(entry.get('totalTokens'))} of {limits['contextWindow']:,} tokens · flush at "
        f"{limits['flushThreshold']:,} · compaction at {limits['compactionThreshold']:,}"
    )
    flushed = entry.get("memoryFlushCompactionCount")
    yield (
        f"Compactions: {entry['compactionCount']} · last flush in cycle "
        f"{flushed if flushed is not None else 'none'} · "
        f"{'flushed' if shown['flushedThisCycle'] else 'not flushed'} this cycle"
    )
    timeline = shown["timeline"]
    yield f"Timeline: {timeline['turns']} turns"
    for marker in timeline["markers"]:
        yield f"  after turn {marker['afterTurn']}: {_marker_text(marker)}"
    page = shown["transcript"]
    yield f"Transcript (page {page['page']} of {page['pages']}, {page['total']} entries):"
    for item in page["items"]:
        yield f"  {_item_text(item)}"


def _marker_text(marker: dict[str, Any]) -> str:
    kind = marker["kind"]
    if kind == "flush":
        writes = marker["writes"]
        wrote = "; ".join(_one_line(w.get("text", ""), 60) for w in writes) or "nothing"
        state = "" if marker["ended"] else " (cut short)"
        return f"flush (cycle {marker['cycle']}){state}: wrote {wrote}"
    if kind == "new":
        return "new session (/new, /reset or a reset)"
    before, after = marker.get("tokensBefore"), marker.get("tokensAfter")
    return f"{kind} {_tokens(before)} -> {_tokens(after)} tokens: {_one_line(marker.get('summary', ''), 80)}"


def _item_text(item: dict[str, Any]) -> str:
    kind = item["kind"]
    if kind == "compaction":
        return f"#{item['n']} [compaction] {_one_line(item.get('summary', ''), 100)}"
    role = item.get("role", item["type"])
    calls = ", ".join(call["name"] for call in item.get("toolCalls", ()))
    text = _one_line(item.get("text", ""), 100)
    tag = "[flush] " if kind == "flush" else ""
    return f"#{item['n']} {tag}{role}: {text}{f' -> {calls}' if calls else ''}"


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
