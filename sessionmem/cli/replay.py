"""``sessionmem replay FILE``: drive the session runner from a recorded transcript (scripted model).

The recorded assistant replies and tool calls are replayed in order (:mod:`sessionmem.runs.recorded`); with a
small ``--context-window`` the runner flushes and compacts as it would live. The replay writes into a
fresh workspace (a new temporary folder unless ``--workspace`` names a new or empty one), with its
sessions and index in the global ``--state-dir`` when one is given, else in that folder's
``.sessionmem/``. No API key, no network.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import click

from sessionmem.cli import output
from sessionmem.safefs import make_private_dirs

STATE_FOLDER = ".sessionmem"


def format_summary(report: dict[str, Any]) -> list[str]:
    """The human summary of a finished replay (its ``done`` record)."""
    cycles = ", ".join(str(c) for c in report.get("flushCycles") or []) or "none"
    files = ", ".join(report.get("memoryFiles") or []) or "(none)"
    return [
        f"Replayed {report['recording']}",
        f"  turns        {report['turns']}",
        f"  flushes      {report['flushes']} (in compaction cycles: {cycles})",
        f"  compactions  {report['compactions']}",
        f"  memory files {files}",
        f"  final tokens {report['finalTokens']:,}",
        f"  workspace    {report['workspace']}",
        f"  transcript   {report['transcript']}",
        f"  sessions     {report['sessionsJson']}",
    ]


def _workspace(given: str | None) -> Path:
    if given is None:
        return Path(tempfile.mkdtemp(prefix="sessionmem-replay-"))
    path = Path(given).expanduser().resolve()
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise click.UsageError(
            f"--workspace {path} must be a new or empty folder (the replay writes files there)"
        )
    make_private_dirs(path)
    return path


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--context-window",
    type=click.IntRange(min=500),
    default=3000,
    show_default=True,
    metavar="N",
    help="Context window in tokens; small windows make the runner flush and compact.",
)
@click.option(
    "--workspace", "workspace", metavar="DIR", help="Replay into DIR (new or empty). Default: a temp folder."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per event, one per line.")
@click.pass_context
def replay(ctx: click.Context, file: Path, context_window: int, workspace: str | None, as_json: bool) -> None:
    """Replay a recorded transcript FILE through the session runner.

    \b
    Examples:
      sessionmem replay transcripts/trip-planning.jsonl
      sessionmem replay transcripts/billing-migration.jsonl --context-window 2000 --json
    """
    from sessionmem.runs.recorded import run_replay

    app = output.resolved(ctx)
    folder = _workspace(workspace)
    done: dict[str, Any] = {}

    def emit(record: dict[str, Any]) -> None:
        if as_json:
            output.echo_line_json(record)
        elif record.get("event") == "done":
            done.update(record)

    run_replay(
        file.resolve(),
        folder,
        output.explicit_state_dir(ctx) or folder / STATE_FOLDER,
        context_window=context_window,
        emit=emit,
        timezone=app.agent.user_timezone,
    )
    for line in format_summary(done) if done else ():
        click.echo(line)
