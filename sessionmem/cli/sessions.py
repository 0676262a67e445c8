"""``sessionmem sessions``: move the agent's sessions between store backends (``list``, ``show`` and
``delete`` are in :mod:`sessionmem.cli.session_view`).

``export --to SPEC`` copies every session of the configured store (``session.store``) to the store SPEC
names; ``import --from SPEC`` copies every session of SPEC into the configured store. SPEC is written
as ``session.store`` is (a sessions.json path, a ``*.sqlite`` path or ``sqlite:///<path>``, ``sqlite``
for the default folder; ``~`` and ``{agentId}`` expanded). Entries are copied field for field and
transcripts line for line (:mod:`sessionmem.session.stores.copy`).
"""

from __future__ import annotations

import click

from sessionmem.cli.output import echo_json, progress_bar, resolved
from sessionmem.context import Context
from sessionmem.errors import UsageError
from sessionmem.session.stores.copy import copy_sessions
from sessionmem.session.stores.opening import open_session_store, parse_store_spec


@click.group()
def sessions() -> None:
    """List, show and delete the agent's sessions; move them (entries and transcripts) between store
    backends.

    \b
    Examples:
      sessionmem sessions list --filter telegram
      sessionmem sessions show agent:main:main
      sessionmem sessions delete agent:main:telegram:direct:42
      sessionmem sessions export --to ~/.sessionmem/agents/main/sessions/sessions.sqlite
      sessionmem sessions import --from /backup/agents/main/sessions/sessions.json
    """


_FORCE = click.option(
    "--force", is_flag=True, help="Copy into a store that holds sessions (copied keys are replaced)."
)
_JSON = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")


@sessions.command(short_help="Copy every session of the configured store to another store.")
@click.option("--to", "spec", required=True, metavar="SPEC", help="The target store (as session.store).")
@_FORCE
@_JSON
@click.pass_context
def export(ctx: click.Context, spec: str, force: bool, as_json: bool) -> None:
    """Copy every session of the configured store (session.store) to SPEC."""
    app = resolved(ctx)
    _copy(app, app.config.session.store, spec, force=force, as_json=as_json)


@sessions.command(name="import", short_help="Copy every session of another store into the configured one.")
@click.option("--from", "spec", required=True, metavar="SPEC", help="The source store (as session.store).")
@_FORCE
@_JSON
@click.pass_context
def import_(ctx: click.Context, spec: str, force: bool, as_json: bool) -> None:
    """Copy every session of SPEC into the configured store (session.store)."""
    app = resolved(ctx)
    _copy(app, spec, app.config.session.store, force=force, as_json=as_json)


def _copy(
    app: Context, source_spec: str | None, target_spec: str | None, *, force: bool, as_json: bool
) -> None:
    source_at = parse_store_spec(source_spec, state_dir=app.state_dir, agent_id=app.agent_id)
    target_at = parse_store_spec(target_spec, state_dir=app.state_dir, agent_id=app.agent_id)
    if source_at == target_at:
        raise UsageError(f"the source and the target are the same store ({source_at.shown})")
    source = open_session_store(source_spec, state_dir=app.state_dir, agent_id=app.agent_id)
    target = open_session_store(target_spec, state_dir=app.state_dir, agent_id=app.agent_id)
    with progress_bar("Copying sessions", unit="session") as progress:
        report = copy_sessions(source, target, cwd=app.workspace, force=force, progress=progress)
    shown_from, shown_to = source_at.shown, target_at.shown
    if as_json:
        echo_json(
            {
                "from": shown_from,
                "to": shown_to,
                "sessions": report.sessions,
                "transcriptLines": report.transcript_lines,
            }
        )
        return
    click.echo(
        f"Copied {report.sessions} session(s) ({report.transcript_lines} transcript lines) "
        f"from {shown_from} to {shown_to}"
    )


# list, show and delete: the management API's views (sessionmem.cli.session_view)
from sessionmem.cli.session_view import delete, list_, show  # noqa: E402

sessions.add_command(list_)
sessions.add_command(show)
sessions.add_command(delete)
