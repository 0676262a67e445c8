"""``sessionmem forget WHO``: remove everything the agent keeps of one chat, or of one person on every
channel (README, Privacy; :mod:`sessionmem.session.lifecycle.forget` does it,
:mod:`sessionmem.session.lifecycle.person`
says who WHO is).

The command is the owner's, like every command line: it sees every session and note. It holds the
person's sessions as a turn does, so it may run while a gateway serves the agent. It exits 1 when a part
could not be done (said under "Not done"), 0 otherwise, also when nothing was kept of them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from sessionmem.cli.output import EXIT_FAILURE, echo_json, resolved
from sessionmem.context import Context

if TYPE_CHECKING:
    from sessionmem.memory.index import MemoryIndex
    from sessionmem.memory.mentions import Mention
    from sessionmem.session.lifecycle.forget import ForgetReport

LISTED = 20  # items listed per kind in the human report (--json lists all)


@click.command(short_help="Remove everything the agent keeps of a chat or a person.")
@click.argument("who")
@click.option(
    "--name",
    "names",
    multiple=True,
    metavar="NAME",
    help="A name they go by, looked for in the notes that stay (repeatable).",
)
@click.option("--dry-run", is_flag=True, help="Only list what would go.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def forget(ctx: click.Context, who: str, names: tuple[str, ...], dry_run: bool, as_json: bool) -> None:
    """Remove everything the agent keeps of WHO: their notes (memory/peers/<chat>/, the /new files),
    earlier versions, transcripts and archives, session store entries, index rows and cached embeddings.

    WHO is a session key (agent:main:telegram:direct:42: that chat, its threads and topics included) or
    a peer id (42: every direct chat with that peer, on every channel). Shared notes that still name them
    or hold lines they wrote are listed, never edited.

    \b
    Examples:
      sessionmem forget agent:main:telegram:direct:42 --dry-run
      sessionmem forget 42 --name "Ana Lima" --json
    """
    from sessionmem.session.lifecycle.forget import forget_sync
    from sessionmem.session.stores.opening import open_session_store

    app = resolved(ctx)
    store = open_session_store(app.config.session.store, state_dir=app.state_dir, agent_id=app.agent_id)
    try:
        with _index(app) as index:
            report = forget_sync(
                who,
                store=store,
                workspace=app.workspace,
                agent_id=app.agent_id,
                memory_index=index,
                extra_paths=app.agent.memory_search.extra_paths,
                names=names,
                dry_run=dry_run,
                lock_timeout_s=app.config.session.turn_lock_timeout_seconds,
            )
    finally:
        close = getattr(store, "close", None)
        if callable(close):
            close()
    if as_json:
        echo_json(report.to_json())
    else:
        click.echo("\n".join(report_lines(report)))
    if report.issues:
        ctx.exit(EXIT_FAILURE)


@contextmanager
def _index(app: Context) -> Iterator[MemoryIndex | None]:
    """The agent's index without an embedder (forget embeds nothing); None when its SQLite file was never
    made (there is nothing in it to remove, and opening would create it)."""
    from sessionmem.assembly import open_index
    from sessionmem.memory.embed.embedder import EmbedderSelection
    from sessionmem.memory.index import store_location

    settings = app.agent.memory_search
    where = store_location(app.agent_id, settings, app.state_dir)
    if isinstance(where, Path) and not where.exists():
        yield None
        return
    selection = EmbedderSelection(None, settings.provider, reason="forget embeds nothing")
    with open_index(app, selection) as index:
        yield index


def report_lines(report: ForgetReport, limit: int = LISTED) -> Iterator[str]:
    """The report for people (``--json`` has every item)."""
    if not report.found:
        yield f"Nothing is kept of {report.who}."
    else:
        yield f"{'Would forget' if report.dry_run else 'Forgot'} {report.who}:"
    for title, items in (
        ("sessions", report.session_keys),
        ("transcripts", report.transcripts),
        ("notes", report.notes),
        ("earlier versions", report.history),
    ):
        yield from _listed(title, items, limit)
    index = report.index
    if index is not None and (index.paths or index.chunks or index.cache_entries):
        yield (
            f"  index: {len(index.paths)} files, {index.chunks} chunks, "
            f"{index.cache_entries} cached embeddings"
        )
        yield from (f"    {step}" for step in index.done)
    if report.mentions:
        yield "Still named in, or holding lines their sessions wrote (not edited: review them yourself):"
        for mention in report.mentions[:limit]:
            yield f"  {mention.path}: {_mention_text(mention)}"
        if len(report.mentions) > limit:
            yield f"  ... and {len(report.mentions) - limit} more files"
    if report.kept_aside:
        yield "Copies kept aside after damage, which may hold them (not edited):"
        yield from (f"  {path}" for path in report.kept_aside)
    if report.issues:
        yield "Not done:"
        yield from (f"  {issue}" for issue in report.issues)


def _listed(title: str, items: Sequence[str], limit: int) -> Iterator[str]:
    if not items:
        return
    yield f"  {title} ({len(items)}):"
    yield from (f"    {item}" for item in items[:limit])
    if len(items) > limit:
        yield f"    ... and {len(items) - limit} more"


def _mention_text(mention: Mention) -> str:
    lines = ", ".join(str(n) for n in mention.lines)
    more = f" and {mention.total - len(mention.lines)} more" if mention.total > len(mention.lines) else ""
    why = [f"names {name}" for name in mention.names]
    if mention.written:
        why.append(f"{mention.written} lines they wrote")
    return f"line{'s' if mention.total > 1 else ''} {lines}{more} ({'; '.join(why)})"
