"""Shared plumbing for commands: resolved context, error translation, JSON, progress bars.

Formatting of records into lines lives in pure functions (``format_*``) so tests can check the
text without running a command; ``echo_*`` helpers do the writing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from sessionmem.errors import ConfigError, SessionMemError

if TYPE_CHECKING:
    from sessionmem.context import Context
    from sessionmem.memory.index import IndexStatus, SyncReport
    from sessionmem.memory.search.records import SearchResponse, SearchResult

Progress = Callable[[int, int], None]

EXIT_FAILURE = 1
EXIT_CONFIG = 2  # same as click's usage errors: the invocation or its configuration is wrong


class CommandFailed(click.ClickException):
    """A domain error, shown as ``Error: <message>`` on stderr with a chosen exit status."""


class ConfigFailed(CommandFailed):
    exit_code = EXIT_CONFIG


@contextmanager
def translate_errors() -> Iterator[None]:
    """Expected errors become a message and an exit status, never a traceback."""
    try:
        yield
    except ConfigError as exc:
        raise ConfigFailed(str(exc)) from exc
    except SessionMemError as exc:
        raise CommandFailed(str(exc)) from exc
    except BrokenPipeError:
        # Trigger: `sessionmem memory search x | head -1`. Why: the reader left; that is not our
        # failure. Outcome: quiet exit, with stdout pointed at devnull so the interpreter's final
        # flush does not print a second error.
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(EXIT_FAILURE)


def resolved(ctx: click.Context) -> Context:
    """The composition root's :class:`Context` for this invocation (resolved once, then cached).

    The composition root is imported here, on first use: it brings the config models and pydantic,
    which ``--help`` and the group's error handling must not pay for."""
    from sessionmem.context import Context, GlobalOptions, resolve

    root = ctx.find_root()
    cached = root.meta.get("sessionmem.context")
    if isinstance(cached, Context):
        return cached
    options = root.obj if isinstance(root.obj, GlobalOptions) else GlobalOptions()
    context = resolve(options)
    root.meta["sessionmem.context"] = context
    return context


def explicit_state_dir(ctx: click.Context) -> Path | None:
    """The state folder when the global ``--state-dir`` names one, else None (the scripted runs then keep
    their state beside their workspace, away from the user's own agent in ``~/.sessionmem``)."""
    from sessionmem.context import GlobalOptions

    root = ctx.find_root()
    options = root.obj if isinstance(root.obj, GlobalOptions) else GlobalOptions()
    return resolved(ctx).state_dir if options.state_dir else None


# ---------------------------------------------------------------------------- JSON


def _default(value: Any) -> Any:
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    to_json = getattr(value, "to_json", None)
    if callable(to_json):
        return to_json()
    from dataclasses import asdict, is_dataclass

    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    raise TypeError(f"cannot serialise {type(value).__name__} to JSON")


def to_json_text(value: Any, *, indent: int | None = None) -> str:
    """JSON text of records (dataclasses, ``to_json()`` objects, dates, paths), UTF-8 as is."""
    return json.dumps(value, ensure_ascii=False, default=_default, indent=indent)


def echo_json(value: Any, *, indent: int | None = 2) -> None:
    click.echo(to_json_text(value, indent=indent))


def echo_line_json(value: Any) -> None:
    """One JSON object on one line, flushed, for line-by-line pipelines."""
    sys.stdout.write(to_json_text(value) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------------------- progress


@contextmanager
def progress_bar(
    description: str, *, enabled: bool | None = None, unit: str = "file"
) -> Iterator[Progress | None]:
    """A ``progress(done, total)`` callback drawing a tqdm bar on stderr, or ``None``.

    The bar is drawn only when stderr is a terminal (``enabled=None``), so logs and pipes get
    nothing but the final summary. tqdm is imported only when a bar is drawn.
    """
    if enabled is None:
        enabled = _stderr_is_tty()
    if not enabled:
        yield None
        return
    from tqdm import tqdm

    bar = tqdm(total=0, desc=description, unit=unit, file=sys.stderr, leave=False, dynamic_ncols=True)

    def update(done: int, total: int) -> None:
        if bar.total != total:
            bar.total = total
        bar.n = done
        bar.refresh()

    try:
        yield update
    finally:
        bar.close()


def _stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def echo_err(message: str) -> None:
    click.echo(message, err=True)


# ---------------------------------------------------------------------------- search results


def format_response(response: SearchResponse, *, explain: bool = False) -> str:
    """Human output: per result a header line, the snippet, a blank line; or ``No matches.`` (saying
    what was held back under the floor, if anything was)."""
    if not response.results:
        if response.held_back is not None:
            return f"No matches: {response.held_back.note()} (--min-score)."
        return "No matches."
    blocks = [format_result(result, explain=explain) for result in response.results]
    if explain and response.calibration is not None:
        blocks.insert(0, format_calibration(response.calibration))
    return "\n\n".join(blocks) + "\n"


def format_calibration(cal: dict[str, Any]) -> str:
    """How raw cosines became vector scores (``--explain``)."""
    from sessionmem.memory.search.calibration import Z_SCALE

    notes = cal.get("reference_notes")
    reference = f" and {notes} reference notes" if notes else ""
    return (
        f"vector scores: cosine calibrated for {cal['model']} on this index: unrelated questions score "
        f"{cal['centre']:.3f} +/- {cal['spread']:.3f} (over {cal['vectors']} chunks{reference}); "
        f"score = 1 - exp(-z / {Z_SCALE:g}), z = (cosine - that) / spread"
    )


def format_result(result: SearchResult, *, explain: bool = False) -> str:
    header = f"{result.score:.3f} {result.path}:{result.start_line}-{result.end_line}"
    if result.date:
        header += f" ({result.date})"
    lines = [header]
    if explain and result.explanation is not None:
        lines.append("  " + format_explanation(result))
    lines.append(result.snippet.rstrip("\n"))
    return "\n".join(lines)


def format_explanation(result: SearchResult) -> str:
    e = result.explanation
    if e is None:
        return ""

    def num(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    parts = [
        f"fts={num(e.text_score)}" + ("" if e.bm25 is None else f" (bm25 {e.bm25:.3f})"),
        f"second={num(e.proximity)}/{num(e.trailing)}",
        f"vector={num(e.vector_score)}" + ("" if e.cosine is None else f" (cosine {e.cosine:.3f})"),
        f"merged={num(e.merged)}",
        f"decay={num(e.decay_multiplier)}",
        f"date={num(e.date_weight)}",
        f"final={num(e.final)}",
        f"mmr={'-' if e.mmr_rank is None else '#' + str(e.mmr_rank)}",
        f"path={e.vector_path or '-'}",
        f"source={result.source}",
    ]
    return " ".join(parts)


# ---------------------------------------------------------------------------- sync reports


def sync_report_json(report: SyncReport, agent_id: str) -> dict[str, Any]:
    return {
        "agentId": agent_id,
        "reason": report.reason,
        "full": report.full,
        "filesScanned": report.files_scanned,
        "filesIndexed": report.files_indexed,
        "filesUnchanged": report.files_unchanged,
        "filesDeleted": report.files_deleted,
        "filesRenamed": report.files_renamed,
        "chunksWritten": report.chunks_written,
        "embedded": report.embedded,
        "cacheHits": report.cache_hits,
        "withoutVectors": report.without_vectors,  # written keyword-only: the provider gave no usable vector
        "vectorsFilled": report.vectors_filled,  # such chunks given their vector later, in place
        "seconds": round(report.seconds, 3),
        "issues": list(report.issues),
    }


def format_sync_summary(agent_id: str, report: SyncReport) -> str:
    """One line; chunks the provider gave no usable vector (kept keyword-only) are named when there
    are any, pointing at ``memory status``, whose Issues list them by file with the provider's reason."""
    rebuilt = " (full rebuild)" if report.full else ""
    missing = (
        f", {report.without_vectors} without vectors (see memory status)" if report.without_vectors else ""
    )
    if report.vectors_filled:
        missing += f", {report.vectors_filled} earlier missing vectors filled"
    return (
        f"Memory index updated ({agent_id}){rebuilt}: {report.files_indexed} files indexed, "
        f"{report.files_unchanged} unchanged, {report.files_deleted} deleted, "
        f"{report.files_renamed} renamed, {report.chunks_written} chunks, "
        f"{report.embedded} embedded ({report.cache_hits} cached){missing} in {report.seconds:.2f} s"
    )


# ---------------------------------------------------------------------------- status


def status_json(
    state: IndexStatus, vector_path: dict[str, str], probe: dict[str, Any] | None
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "agentId": state.agent_id,
        "provider": state.provider,
        "requestedProvider": state.provider_requested,
        "model": state.model,
        "endpoint": state.endpoint,
        "mode": state.mode,
        "fallback": (
            {"from": state.fallback_from, "reason": state.fallback_reason} if state.fallback_from else None
        ),
        "providerUnavailableReason": state.fallback_reason if state.mode == "fts-only" else None,
        "sources": list(state.sources),
        "extraPaths": list(state.extra_paths),
        "files": state.files,
        "chunks": state.chunks,
        "bySource": {
            source: {
                "files": state.files_by_source.get(source, 0),
                "chunks": state.chunks_by_source.get(source, 0),
            }
            for source in sorted({*state.sources, *state.files_by_source, *state.chunks_by_source})
        },
        "dirty": state.dirty,
        "store": state.store_path,
        "storeKind": state.store_kind,
        "workspace": state.workspace,
        "vector": {
            "loaded": state.vector_loaded,
            "driver": state.vector_driver,
            "version": state.vector_version,
            "reason": state.vector_reason,
            "dims": state.vector_dims,
            "path": vector_path["name"],
            "pathReason": vector_path["reason"],
        },
        "calibration": state.calibration,
        "fts": {"available": state.fts_available, "error": state.fts_error},
        "cache": {"entries": state.cache_entries, "maxEntries": state.cache_max_entries},
        "issues": list(state.issues),
    }
    if probe is not None:
        data["embeddingProbe"] = probe
    return data


def format_status(state: IndexStatus, vector_path: dict[str, str], probe: dict[str, Any] | None) -> str:
    """The human status block (reference §12's lines, plus the vector path and FTS-only mode)."""
    fts_only = state.mode == "fts-only"
    lines = [
        f"Memory Search ({state.agent_id})",
        f"Provider: {state.provider} (requested: {state.provider_requested})",
        f"Model: {state.model}",
    ]
    if state.endpoint:
        lines.append(f"Endpoint: {state.endpoint}")
    if state.mode == "unavailable":
        lines.append("Mode: unavailable — the configured embedding provider cannot be created (see Issues)")
    elif fts_only:
        why = f": {state.fallback_reason}" if state.fallback_reason else ""
        lines.append(f"Mode: fts-only — keyword search only, no embedding provider{why}")
    else:
        lines.append("Mode: hybrid (keywords + vectors)")
    lines += [
        f"Sources: {', '.join(state.sources) or '(none)'}",
        f"Extra paths: {', '.join(state.extra_paths) or '(none)'}",
        f"Indexed: {state.files} files · {state.chunks} chunks",
    ]
    by_source = sorted({*state.sources, *state.files_by_source, *state.chunks_by_source})
    if by_source:
        lines.append("By source:")
        for source in by_source:
            files = state.files_by_source.get(source, 0)
            chunks = state.chunks_by_source.get(source, 0)
            lines.append(f"  {source} · {files} files · {chunks} chunks")
    lines += [
        f"Dirty: {'yes' if state.dirty else 'no'}",
        f"Store: {state.store_path}"
        if state.store_kind == "sqlite"
        else f"Store: PostgreSQL {state.store_path}",
        f"Workspace: {state.workspace}",
    ]
    if state.mode == "unavailable":
        lines.append("Embeddings: unavailable (see Issues)")
    elif probe is not None:
        if probe.get("ok"):
            lines.append(f"Embeddings: ready ({probe['dims']} dims, probe {probe['ms']:.0f} ms)")
        else:
            lines.append(f"Embeddings: unavailable ({probe.get('error')})")
    if state.provider == "none":
        lines.append(f"Vector: disabled (no embedding provider; store: {state.vector_reason})")
    else:
        lines.append(f"Vector: {'ready' if state.vector_loaded else 'unavailable'} ({state.vector_reason})")
    lines.append(f"Vector path: {vector_path['name']} ({vector_path['reason']})")
    if state.vector_dims is not None:
        lines.append(f"Vector dims: {state.vector_dims}")
    if not fts_only and state.mode != "unavailable":
        cal = state.calibration
        lines.append(
            "Vector scores: raw cosine (not calibrated yet: the next sync measures it)"
            if cal is None
            else f"Vector scores: calibrated (unrelated text {cal['centre']:.3f} +/- {cal['spread']:.3f}"
            f" over {cal['vectors']} chunks; minScore applies to the calibrated score)"
        )
    fts = "ready" if state.fts_available else f"unavailable ({state.fts_error})"
    lines.append(f"FTS: {fts}")
    cap = "unlimited" if state.cache_max_entries is None else str(state.cache_max_entries)
    lines.append(f"Embedding cache: {state.cache_entries} entries (cap: {cap})")
    if state.fallback_from:
        lines.append(f"Fallback: from {state.fallback_from} ({state.fallback_reason or 'no reason given'})")
    if state.issues:
        lines.append("Issues:")
        lines += ["  - " + issue.replace("\n", "\n    ") for issue in state.issues]
    else:
        lines.append("Issues: none")
    return "\n".join(lines)
