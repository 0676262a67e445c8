"""What ``MemoryIndex.status()`` reports: the ``IndexStatus`` record, the counts read from the index
file, and the list of problems worth a user's attention."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessionmem.memory.search.calibration import CALIBRATION_KEY
from sessionmem.memory.store.meta import FILE_ISSUES_KEY, VECTOR_ISSUES_KEY, read_json, read_meta
from sessionmem.memory.sync.sources import list_memory_files

if TYPE_CHECKING:
    from collections.abc import Iterable

    from sessionmem.config import MemorySearchConfig

__all__ = ["IndexCounts", "IndexStatus", "collect_issues", "read_counts", "stale_vectors_issue"]


@dataclass(frozen=True)
class IndexStatus:
    agent_id: str
    workspace: str
    store_path: str  # the SQLite file, or the PostgreSQL DSN (no password) and schema
    provider_requested: str
    provider: str  # actual provider, "none" in FTS-only mode
    model: str  # embedding model or "fts-only"
    fallback_from: str | None
    fallback_reason: str | None  # why the fallback ran, or why FTS-only
    mode: str  # "hybrid" | "fts-only"
    sources: tuple[str, ...]
    extra_paths: tuple[str, ...]
    files: int
    chunks: int
    files_by_source: dict[str, int]
    chunks_by_source: dict[str, int]
    dirty: bool
    vector_loaded: bool
    vector_driver: str
    vector_version: str | None
    vector_reason: str
    vector_dims: int | None
    fts_available: bool
    fts_error: str | None
    cache_entries: int
    cache_max_entries: int | None
    issues: tuple[str, ...] = field(default_factory=tuple)
    endpoint: str | None = None  # where a remote provider's texts go; None for local and FTS-only
    calibration: dict[str, Any] | None = None  # how vector scores are calibrated (``calibration.py``)
    store_kind: str = "sqlite"  # "sqlite" or "postgresql" (``store.py``)


@dataclass(frozen=True, slots=True)
class IndexCounts:
    """What one read of the index file says; empty when it could not be read."""

    files_by_source: dict[str, int] = field(default_factory=dict)
    chunks_by_source: dict[str, int] = field(default_factory=dict)
    cache_entries: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    file_issues: dict[str, str] = field(default_factory=dict)  # per path; chunks without vectors too
    vector_issues: dict[str, str] = field(default_factory=dict)  # per path: chunks without vectors only
    vector_dims: int | None = None
    calibration: dict[str, Any] | None = None


def read_counts(reader: Any) -> IndexCounts:
    """Files and chunks per source, cache size, meta and per-file issues, including files with chunks
    left without a vector (raises the DB's errors)."""
    files_by = dict(reader.execute("SELECT source, COUNT(*) FROM files GROUP BY source").fetchall())
    chunks_by = dict(reader.execute("SELECT source, COUNT(*) FROM chunks GROUP BY source").fetchall())
    (cache_entries,) = reader.execute("SELECT COUNT(*) FROM embedding_cache").fetchone()
    meta = read_meta(reader) or {}
    file_issues = dict(read_json(reader, FILE_ISSUES_KEY) or {})
    vector_issues = dict(read_json(reader, VECTOR_ISSUES_KEY) or {})
    for path, issue in vector_issues.items():
        file_issues[path] = f"{file_issues[path]}; {issue}" if path in file_issues else issue
    return IndexCounts(
        files_by_source=files_by,
        chunks_by_source=chunks_by,
        cache_entries=int(cache_entries),
        meta=meta,
        file_issues=file_issues,
        vector_issues=vector_issues,
        vector_dims=reader.vec_dims() or meta.get("vectorDims"),
        calibration=read_json(reader, CALIBRATION_KEY),
    )


def stale_vectors_issue(embedder: Any, stored_dims: int | None) -> str | None:
    """Why the index's vectors no longer fit the provider (it now answers with another width), or None.
    The provider's width is known once it has answered (a remote model says it on its first call)."""
    dims = getattr(embedder, "dims", None) if embedder is not None else None
    if not dims or not stored_dims or dims == stored_dims:
        return None
    return (
        f"the index's vectors are stale: {embedder.model} now returns {dims}-dimensional vectors but the "
        f"index holds {stored_dims}-dimensional ones; the next sync rebuilds the index"
    )


def collect_issues(
    recorded: Iterable[str | None],
    *,
    workspace: Path,
    settings: MemorySearchConfig,
    sources: list[str],
    file_issues: dict[str, str],
) -> list[str]:
    """``recorded`` (the index's own notes, last sync error, FTS error; None skipped), then a missing
    memory folder or files, then each file indexed with a problem, sorted by path."""
    issues = [issue for issue in recorded if issue]
    if "memory" in sources:
        memory_dir = workspace / "memory"
        if not memory_dir.is_dir():
            issues.append(f"memory directory missing ({memory_dir})")
        if not list_memory_files(workspace, settings.extra_paths):
            issues.append(f"no memory files found in {workspace} (MEMORY.md, memory/**/*.md, extra paths)")
    issues.extend(file_issues[path] for path in sorted(file_issues))
    return issues
