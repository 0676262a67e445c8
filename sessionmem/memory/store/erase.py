"""Taking a person's rows out of the index: the index's part of ``forget`` (DESIGN 21).

What goes: every row of the indexed files that belong to them, found by audience label (their chat's
notes and transcripts are labelled ``peer:<folder>``, :mod:`sessionmem.privacy`) or by path (a transcript
the caller attributes to them whose header names no session key): the files' ``files`` rows, their
chunks with their keyword rows and sqlite-vec rows, the meta's notes about those files, and the
embedding cache's vectors of their chunks' texts. The cache is keyed by the hash of the embedded text,
so an entry stays when a chunk of someone else still has the same text (removing it would only cost a
re-embedding, but the text is not theirs alone).

All of it in one transaction inside the store's :meth:`~sessionmem.memory.store.seam.IndexStore.erasure`,
which makes sure no copy of the deleted rows stays readable in the database (free pages, keyword
segments, the log). A crash before the commit leaves the index as it was; after it, the rows are gone;
the scrub runs even when no row is found, so a second run finishes what a killed one left.
The caller holds the index's sync lock, so no sync re-indexes the files before they are deleted.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sessionmem.memory.store.meta import FILE_ISSUES_KEY, VECTOR_ISSUES_KEY, read_json, write_json

if TYPE_CHECKING:
    from sessionmem.memory.store.seam import IndexStore

BATCH = 400  # parameters per IN list (old SQLite builds allow 999)


@dataclass(frozen=True, slots=True)
class IndexErasure:
    """What left the index (with ``dry_run``: what would), and how it was made unreadable."""

    paths: tuple[str, ...] = ()  # the indexed files whose rows went
    chunks: int = 0
    cache_entries: int = 0
    done: tuple[str, ...] = ()  # the store's scrubbing steps (IndexStore.erasure)
    issues: tuple[str, ...] = ()


@dataclass
class _Found:
    paths: set[str] = field(default_factory=set)
    chunks: dict[int, tuple[str, str]] = field(default_factory=dict)  # rowid -> (id, hash)


def erase_rows(
    store: IndexStore,
    *,
    audiences: Collection[str],
    paths: Collection[str] = (),
    vectors: bool,
    dry_run: bool = False,
) -> IndexErasure:
    """Delete the rows of ``audiences`` and ``paths`` (see the module docstring). ``vectors``: sqlite-vec is
    loaded (its rows go too). Returns what went; nothing is written with ``dry_run``."""
    found = _find(store, sorted(set(audiences)), sorted(set(paths)))
    hashes = sorted({digest for _, digest in found.chunks.values()})
    kept = _still_used(store, hashes, set(found.chunks))
    orphaned = [digest for digest in hashes if digest not in kept]
    cache_entries = _count(store, "embedding_cache", "hash", orphaned)
    if dry_run:
        return IndexErasure(tuple(sorted(found.paths)), len(found.chunks), cache_entries)
    # Scrubbed even when no row is theirs any more: a forget killed after its commit and before the
    # scrub left their deleted rows readable in the file, and running it again must finish the job.
    with store.erasure() as notes, store.atomic():
        rowids = sorted(found.chunks)
        if vectors and store.vec_dims() is not None:
            ids = [(found.chunks[r][0],) for r in rowids]
            store.executemany("DELETE FROM chunks_vec WHERE id = ?", ids)
        for part in _batches(rowids):
            store.delete_chunks(part)
        for part in _batches(sorted(found.paths)):
            among, params = store.one_of("path", part)
            store.execute(f"DELETE FROM files WHERE {among}", params)
        for part in _batches(orphaned):
            among, params = store.one_of("hash", part)
            store.execute(f"DELETE FROM embedding_cache WHERE {among}", params)
        for key in (FILE_ISSUES_KEY, VECTOR_ISSUES_KEY):
            issues = read_json(store, key)
            if isinstance(issues, dict) and found.paths & set(issues):
                write_json(store, key, {p: v for p, v in issues.items() if p not in found.paths})
    return IndexErasure(
        tuple(sorted(found.paths)),
        len(found.chunks),
        cache_entries,
        tuple(notes.done),
        tuple(notes.issues),
    )


def _find(store: IndexStore, audiences: list[str], paths: list[str]) -> _Found:
    found = _Found()
    for column, values in (("audience", audiences), ("path", paths)):
        for part in _batches(values):
            among, params = store.one_of(column, part)
            rows = store.execute(f"SELECT path FROM files WHERE {among}", params).fetchall()
            found.paths.update(str(r[0]) for r in rows)
            rows = store.execute(f"SELECT rowid, id, hash, path FROM chunks WHERE {among}", params).fetchall()
            for rowid, cid, digest, path in rows:
                found.chunks[int(rowid)] = (str(cid), str(digest))
                found.paths.add(str(path))  # a chunk whose files row is gone still goes
    return found


def _still_used(store: IndexStore, hashes: Sequence[str], going: set[int]) -> set[str]:
    """The hashes a chunk that stays still has."""
    used: set[str] = set()
    for part in _batches(hashes):
        among, params = store.one_of("hash", part)
        rows = store.execute(f"SELECT rowid, hash FROM chunks WHERE {among}", params)
        used.update(str(digest) for rowid, digest in rows.fetchall() if int(rowid) not in going)
    return used


def _count(store: IndexStore, table: str, column: str, values: Sequence[str]) -> int:
    total = 0
    for part in _batches(values):
        among, params = store.one_of(column, part)
        total += int(store.execute(f"SELECT COUNT(*) FROM {table} WHERE {among}", params).fetchone()[0])
    return total


def _batches(values: Sequence[Any]) -> Iterator[list[Any]]:
    for start in range(0, len(values), BATCH):
        yield list(values[start : start + BATCH])
