"""``sessionmem memory ...``: status, index, search and get over the agent's memory index.

Each command resolves the context, opens the index once, calls one method and prints. The index,
the embedder and tqdm are imported inside the commands, so ``sessionmem memory --help`` and a
cold FTS-only search stay fast (no litellm, llama_cpp or watchdog on that path).

Examples::

    sessionmem memory index --force
    sessionmem memory search "billing cutover" --after 2024-01-01 --explain
    printf '{"query": "cutover"}\\n{"query": "db", "maxResults": 2}\\n' | sessionmem memory search --batch
    sessionmem memory get memory/2024-01-05.md --from 10 --lines 20
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import replace
from datetime import date
from typing import TYPE_CHECKING, Any

import click

from sessionmem.assembly import embedder_selection, open_index, transcripts_of
from sessionmem.cli import output

if TYPE_CHECKING:
    from sessionmem.memory.embed.embedder import EmbedderSelection
    from sessionmem.memory.index import MemoryIndex, SyncReport
    from sessionmem.memory.search.records import SearchRequest

MISSING_QUERY = "Missing search query. Provide a positional query or use --batch."

# Keys a --batch line may carry (camelCase, as in the tool's arguments); anything else is an error so
# a typo such as "max_results" is reported instead of silently ignored. "id" is echoed back.
BATCH_KEYS = frozenset({"query", "maxResults", "minScore", "after", "before", "explain", "id"})


class IsoDate(click.ParamType):
    """A YYYY-MM-DD date; click's error names the option (``Invalid value for '--after'``)."""

    name = "YYYY-MM-DD"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> date:
        if isinstance(value, date):
            return value
        try:
            return parse_date(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def parse_date(text: str) -> date:
    """Strict YYYY-MM-DD (``2024-1-5`` and ``2024-02-30`` are refused with a reason)."""
    stripped = text.strip()
    try:
        if len(stripped) != 10:
            raise ValueError
        return date.fromisoformat(stripped)
    except ValueError:
        raise ValueError(f"{text!r} is not a date in YYYY-MM-DD form") from None


@click.group()
def memory() -> None:
    """Index, search and read the agent's Markdown memory (MEMORY.md, memory/*.md).

    The command line is the owner's view: it sees every memory file and transcript, including
    MEMORY.md, direct chats and other people's notes that agent sessions in groups (or, with
    memory.scope peer, other people) never see.
    """


# ---------------------------------------------------------------------------- opening the index


# ---------------------------------------------------------------------------- search


@memory.command(short_help="Search memory by keywords (and meaning, with a provider).")
@click.argument("query", required=False)
@click.option("--max-results", type=click.IntRange(min=1), help="At most N results (default: config).")
@click.option("--min-score", type=click.FloatRange(0.0, 1.0), help="Drop results under X (default: config).")
@click.option("--after", type=IsoDate(), help="Only results dated on or after this day.")
@click.option("--before", type=IsoDate(), help="Only results dated on or before this day.")
@click.option(
    "--explain", is_flag=True, help="Show each result's FTS, vector, merged, decay and MMR figures."
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object: {results, provider, model, mode}."
)
@click.option(
    "--batch",
    is_flag=True,
    help="Read one JSON request per stdin line; write one JSON result per line (exit 1 if any failed).",
)
@click.pass_context
def search(
    ctx: click.Context,
    query: str | None,
    max_results: int | None,
    min_score: float | None,
    after: date | None,
    before: date | None,
    explain: bool,
    as_json: bool,
    batch: bool,
) -> None:
    """Search memory for QUERY (keywords and, with an embedding provider, meaning).

    \b
    Examples:
      sessionmem memory search "billing cutover"
      sessionmem memory search deploy --after 2024-03-01 --before 2024-03-31 --json
      echo '{"query": "cutover", "maxResults": 3}' | sessionmem memory search --batch
    """
    from sessionmem.memory.search.records import SearchRequest

    if after and before and after > before:
        raise click.BadParameter(f"--after {after} is later than --before {before}", param_hint="'--after'")
    defaults = SearchRequest(
        query="", max_results=max_results, min_score=min_score, after=after, before=before, explain=explain
    )
    if batch:
        if query:
            raise click.UsageError("Give either a positional query or --batch, not both.")
        app = output.resolved(ctx)
        with open_index(app) as index:
            failed, answered = run_batch(index, sys.stdin, defaults)
        if failed:
            # Every line was answered; the status tells a script that some answers are errors.
            raise output.CommandFailed(
                f'{failed} of {answered} batch lines failed (their answers carry "error")'
            )
        return
    if not query or not query.strip():
        raise click.UsageError(MISSING_QUERY)
    app = output.resolved(ctx)
    with open_index(app) as index:
        response = index.search(replace(defaults, query=query))
        # Answer before leaving the block: close() waits for the background sync a search on a dirty
        # index starts, and the answer must not wait for it (click.echo flushes each write).
        if as_json:
            output.echo_json(response.to_json())
            return
        for warning in response.warnings:
            output.echo_err(f"warning: {warning}")
        if response.query_cut is not None:
            output.echo_err(f"note: {response.query_cut.note()}")
        click.echo(output.format_response(response, explain=explain))


# ---------------------------------------------------------------------------- --batch


def parse_batch_line(text: str, defaults: SearchRequest) -> tuple[SearchRequest, Any]:
    """One stdin line → a request (command-line options fill what the line leaves out) and its id.

    Raises ``ValueError`` with a message naming the problem; the caller reports it on that line.
    """
    import json

    from sessionmem.memory.search.records import SearchRequest

    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError("each line must be a JSON object")
    unknown = sorted(set(data) - BATCH_KEYS)
    if unknown:
        raise ValueError(f"unknown key(s): {', '.join(unknown)} (allowed: {', '.join(sorted(BATCH_KEYS))})")
    query = data.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ValueError("missing search query: 'query' must be a non-empty string")
    max_results = data.get("maxResults", defaults.max_results)
    if max_results is not None and (isinstance(max_results, bool) or not isinstance(max_results, int)):
        raise ValueError("'maxResults' must be an integer")
    if max_results is not None and max_results < 1:
        raise ValueError("'maxResults' must be at least 1")
    min_score = data.get("minScore", defaults.min_score)
    if min_score is not None and (isinstance(min_score, bool) or not isinstance(min_score, (int, float))):
        raise ValueError("'minScore' must be a number")
    if min_score is not None and not 0.0 <= min_score <= 1.0:
        raise ValueError("'minScore' must be between 0 and 1")
    after = _batch_date(data, "after", defaults.after)
    before = _batch_date(data, "before", defaults.before)
    if after and before and after > before:
        raise ValueError(f"'after' ({after}) is later than 'before' ({before})")
    explain = data.get("explain", defaults.explain)
    if not isinstance(explain, bool):
        raise ValueError("'explain' must be true or false")
    request = SearchRequest(
        query=query,
        max_results=max_results,
        min_score=None if min_score is None else float(min_score),
        after=after,
        before=before,
        explain=explain,
    )
    return request, data.get("id")


def _batch_date(data: dict[str, Any], key: str, default: date | None) -> date | None:
    if key not in data or data[key] is None:
        return default
    value = data[key]
    if not isinstance(value, str):
        raise ValueError(f"'{key}' must be a YYYY-MM-DD string")
    try:
        return parse_date(value)
    except ValueError as exc:
        raise ValueError(f"'{key}': {exc}") from None


def run_batch(index: MemoryIndex, lines: Any, defaults: SearchRequest) -> tuple[int, int]:
    """Answer each non-blank line with one JSON line; a bad line gets ``{"error", "line"}``.

    Returns how many lines failed and how many were answered. A failing search (not only a
    malformed line) is reported on its line too, so one bad request never costs the rest of the
    batch; the command exits 1 afterwards when any line failed.
    """
    from sessionmem.errors import SessionMemError

    failures = 0
    answered = 0
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        answered += 1
        request_id: Any = None
        try:
            request, request_id = parse_batch_line(raw, defaults)
            answer = index.search(request).to_json()
        except Exception as exc:
            # Malformed lines (ValueError) and failing searches (SessionMemError) say what went wrong;
            # anything else is named by its type. Either way the next line is still answered.
            failures += 1
            message = str(exc) if isinstance(exc, (ValueError, SessionMemError)) else repr(exc)
            error: dict[str, Any] = {"error": message, "line": number}
            if request_id is not None:
                error["id"] = request_id
            output.echo_line_json(error)
            continue
        answer["line"] = number
        if request_id is not None:
            answer["id"] = request_id
        output.echo_line_json(answer)
    return failures, answered


# ---------------------------------------------------------------------------- get


@memory.command(short_help="Print a memory file or a window of its lines.")
@click.argument("path")
@click.option("--from", "start", type=click.IntRange(min=1), help="First line to print (1-based).")
@click.option("--lines", "count", type=click.IntRange(min=1), help="How many lines to print.")
@click.pass_context
def get(ctx: click.Context, path: str, start: int | None, count: int | None) -> None:
    """Print a memory file, or the lines --from N for --lines N of it (at most 400 lines and 12,000
    characters at a time; a longer read says on stderr where to go on).

    PATH is what search results show: MEMORY.md, memory/<file>.md, a file in an extra path, or
    sessions/<id>.jsonl for a session hit.

    \b
    Example:
      sessionmem memory get memory/2024-01-05.md --from 12 --lines 8
    """
    from sessionmem.errors import MemoryPathError
    from sessionmem.memory.tools.paths import resolve_memory_target, target_exists
    from sessionmem.memory.tools.reading import handle_memory_get

    app = output.resolved(ctx)
    settings = app.agent.memory_search
    args: dict[str, Any] = {"path": path}
    if start is not None:
        args["from"] = start
    if count is not None:
        args["lines"] = count
    with contextlib.ExitStack() as stack:
        transcripts = stack.enter_context(transcripts_of(app)) if "sessions" in settings.sources else None
        answer = handle_memory_get(
            app.workspace, args, extra_paths=settings.extra_paths, transcripts=transcripts
        )
        if answer.get("error"):
            raise output.CommandFailed(str(answer["error"]))
        text = str(answer.get("text", ""))
        if not text:
            # The tool answers a missing file with empty text (the model may ask for a note not yet
            # written); a person at a terminal should be told the file is not there.
            try:
                target = resolve_memory_target(
                    app.workspace, path, settings.extra_paths, transcripts=transcripts
                )
            except MemoryPathError as exc:
                raise output.CommandFailed(str(exc)) from exc
            if not target_exists(target):
                where = target.shelf.where if target.shelf is not None else target.path.parent
                what = "session transcript" if target.kind == "session" else "memory file"
                raise output.CommandFailed(f"no such {what}: {target.display} (looked in {where})")
    click.echo(text, nl=not text.endswith("\n"))
    if answer.get("truncated"):
        from sessionmem.memory.tools.reading import GET_MAX_CHARS, GET_MAX_LINES

        click.echo(
            f"(output capped at {GET_MAX_LINES} lines and {GET_MAX_CHARS:,} characters; read on with: "
            f"sessionmem memory get {path} --from {answer['nextFrom']} --lines N)",
            err=True,
        )


# ---------------------------------------------------------------------------- index


@memory.command("index", short_help="Update the index from changed Markdown files.")
@click.option("--force", is_flag=True, help="Rebuild from every file, not only the changed ones.")
@click.option("--json", "as_json", is_flag=True, help="Print the sync report as one JSON object.")
@click.pass_context
def index_command(ctx: click.Context, force: bool, as_json: bool) -> None:
    """Bring the index in line with the Markdown files (only changed files are read).

    A progress bar is drawn on stderr when it is a terminal; the summary goes to stdout.

    \b
    Examples:
      sessionmem memory index
      sessionmem memory index --force --json
    """
    app = output.resolved(ctx)
    with open_index(app) as index:
        report = sync_with_progress(index, app.agent_id, force=force)
        # Printed before close(), which may still wait for background work (as in ``search``).
        if as_json:
            output.echo_json(output.sync_report_json(report, app.agent_id))
            return
        for issue in report.issues:
            output.echo_err(f"warning: {issue}")
        click.echo(output.format_sync_summary(app.agent_id, report))


def sync_with_progress(index: MemoryIndex, agent_id: str, *, force: bool) -> SyncReport:
    from sessionmem.errors import MemoryIndexError

    try:
        with output.progress_bar(f"Indexing memory ({agent_id})") as progress:
            return index.sync(force=force, progress=progress, reason="cli")
    except MemoryIndexError as exc:
        raise output.CommandFailed(f"Memory index failed ({agent_id}): {exc}") from exc


# ---------------------------------------------------------------------------- status


@memory.command(short_help="Show provider, index contents, vector path and issues.")
@click.option("--deep", is_flag=True, help="Also probe the embedding provider (one embed call) and vectors.")
@click.option("--index", "sync_first", is_flag=True, help="Sync the index first (with progress).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def status(ctx: click.Context, deep: bool, sync_first: bool, as_json: bool) -> None:
    """Show what the index holds, which provider and vector path serve it, and any issues.

    \b
    Examples:
      sessionmem memory status
      sessionmem --agent work memory status --deep --json
    """
    from sessionmem.errors import EmbedderUnavailable
    from sessionmem.memory.embed.embedder import EmbedderSelection

    app = output.resolved(ctx)
    provider_error: str | None = None
    try:
        selection = embedder_selection(app)
    except EmbedderUnavailable as exc:
        # Trigger: the configured provider cannot be created (no model file, bad endpoint). Why: status
        # is where a user goes to find out what is wrong, so it must still answer. Outcome: the index
        # is read (never synced: a sync without the provider would rebuild it FTS-only) and the
        # error is shown as the provider's state.
        if sync_first:
            raise
        provider_error = exc.reason
        selection = EmbedderSelection(None, app.agent.memory_search.provider, reason=exc.reason)
    with open_index(app, selection) as index:
        report = sync_with_progress(index, app.agent_id, force=False) if sync_first else None
        probe = probe_embeddings(selection) if deep else None
        vector_path = current_vector_path(index, warm=deep and provider_error is None)
        state = index.status()
        if provider_error is not None:
            state = replace(
                state, mode="unavailable", issues=(f"embedding provider: {provider_error}", *state.issues)
            )
        # Printed before close(), which may still wait for background work (as in ``search``).
        if as_json:
            data = output.status_json(state, vector_path, probe)
            if report is not None:
                data["sync"] = output.sync_report_json(report, app.agent_id)
            output.echo_json(data)
            return
        if report is not None:
            click.echo(output.format_sync_summary(app.agent_id, report))
        click.echo(output.format_status(state, vector_path, probe))


def probe_embeddings(selection: EmbedderSelection) -> dict[str, Any]:
    """One real embed call, timed (OpenClaw's probe embeds ``"ping"``)."""
    import time

    if selection.embedder is None:
        return {"ok": False, "error": selection.reason or "no embedding provider (FTS-only mode)"}
    started = time.perf_counter()
    try:
        vector = selection.embedder.embed_query("ping")
    except Exception as exc:  # any provider failure is the probe's answer, not a crash
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    return {"ok": True, "dims": len(vector), "ms": round((time.perf_counter() - started) * 1000, 1)}


def current_vector_path(index: MemoryIndex, *, warm: bool) -> dict[str, str]:
    """The path the next vector query takes and why; ``warm`` loads the matrix first (--deep)."""
    path = index.vector_path(warm=warm)
    return {"name": str(path.name), "reason": str(path.reason)}
