"""What one sync pass is to do, decided from ``stat`` alone (:func:`plan_source`, DESIGN decision 10),
and what it did (:class:`SyncReport`, which ``MemoryIndex.sync`` returns and the CLI prints)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sessionmem.memory.sync.sources import EntrySource, MemoryFile


@dataclass
class SyncReport:
    files_scanned: int = 0
    files_indexed: int = 0
    files_deleted: int = 0
    files_renamed: int = 0  # rows moved to a transcript's archive name (nothing re-read or re-embedded)
    files_unchanged: int = 0
    chunks_written: int = 0
    embedded: int = 0  # texts sent to the embedder
    cache_hits: int = 0  # chunks whose vector came from the cache or an existing chunk
    without_vectors: int = 0  # chunks written keyword-only: the embedder gave them no usable vector
    vectors_filled: int = 0  # chunks stored without a vector that a retry gave one (row kept in place)
    seconds: float = 0.0
    issues: list[str] = field(default_factory=list)
    full: bool = False  # a full rebuild ran
    reason: str = "manual"

    @property
    def wrote(self) -> bool:
        return bool(
            self.files_indexed
            or self.files_deleted
            or self.files_renamed
            or self.chunks_written
            or self.vectors_filled
            or self.full
        )


@dataclass(frozen=True, slots=True)
class SourcePlan:
    """What one source needs, decided from ``stat`` alone (DESIGN decision 10)."""

    scanned: int
    unchanged: int
    todo: list[tuple[MemoryFile, str | None]]  # (entry, previously indexed hash)
    gone: set[str]  # indexed paths no longer on disk

    @property
    def pending(self) -> int:
        return len(self.todo) + len(self.gone)


def plan_source(
    conn: Any,
    source: EntrySource,
    *,
    retry: Collection[str],
    full: bool = False,
    targeted: bool = False,
) -> SourcePlan:
    """Compare ``source``'s files (stat only) with the ``files`` table: what to index, what is gone.

    A path in ``retry`` (the files listed under ``VECTOR_ISSUES_KEY``, as the caller read them) is to
    index even when its stat is unchanged."""
    entries = source.scan()
    known = {
        row[0]: (row[1], row[2], row[3])
        for row in conn.execute(
            "SELECT path, hash, mtime_ns, size FROM files WHERE source = ?", (source.name,)
        )
    }
    todo: list[tuple[MemoryFile, str | None]] = []
    unchanged = 0
    for entry in entries:
        old = known.get(entry.rel_path)
        if (
            not full
            and old is not None
            and old[1] == entry.mtime_ns
            and old[2] == entry.size
            and entry.rel_path not in retry
        ):
            unchanged += 1
        else:
            todo.append((entry, old[0] if old else None))
    gone = set() if targeted else set(known) - {e.rel_path for e in entries}
    return SourcePlan(len(entries), unchanged, todo, gone)
