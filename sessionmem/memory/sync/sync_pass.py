"""One sync pass of the memory index over one SQLite connection (used by ``index.MemoryIndex``).

``Indexer.sync`` compares each source's entries with the ``files`` table, re-reads and re-chunks
only what changed, embeds only texts never embedded before (cache first, then batched calls to the
embedder), and writes each batch of files in one ``BEGIN IMMEDIATE`` transaction, so an interrupted
sync leaves every file either fully old or fully new. The SQL helpers here are the only code that
writes ``files``, ``chunks``, ``chunks_fts``, ``chunks_vec`` and ``embedding_cache``.

Invariant kept for cheap deletes: a chunk's ``chunks_fts`` row has the chunk's ``rowid`` (FTS5's
``UNINDEXED`` columns cannot be looked up without a full scan).

Bad vectors. When the embedder gives some chunk no usable vector (NaN, all zeros, another width than
the rest), that chunk is written without one (``embedding`` NULL, no ``chunks_vec`` row, nothing
cached): keyword search finds it, the rest of its file and every other file index normally. The file
is listed in the meta key ``vector_issues_v1`` ({path: issue}), which ``status`` shows, and that list is
also the retry marker: ``plan_source`` puts a listed file on the to-do list every sync. When its content
is unchanged, the pass asks the embedder only for the chunks stored without a vector and fills those in
place (``embedding``, ``chunks_vec``, cache); the file is not rewritten nor counted as indexed, and a
chunk still rejected is left as it is. A changed file is re-read in full, so its chunks without a
vector are asked for again with the rest. A file leaves the list once all its chunks have vectors.
Only when a call of several texts returns no usable vector at all is the provider itself at fault:
that raises ``EmbeddingError`` as a failed call does (and may trigger the runtime fallback).

One width per index. Every vector in ``chunks`` and ``chunks_vec`` has the width of the index
(``Indexer.width``: the vec table's, else the stored meta's, else a stored vector's). Lookups only
return vectors of that width, and when the embedder answers with another width the pass raises
:class:`VectorWidthChanged` before writing anything of it; ``MemoryIndex`` then rebuilds the whole
index at the new width in a scratch file. A pass never drops or recreates ``chunks_vec``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from sessionmem.errors import EmbeddingError, SessionMemError
from sessionmem.memory.store.fts_view import fts_text
from sessionmem.memory.store.meta import (
    FILE_ISSUES_KEY,
    FTS_ONLY_MODEL,
    VECTOR_ISSUES_KEY,
    read_json,
    stored_width,
    write_json,
)
from sessionmem.memory.sync.chunk_context import chunk_context, heading_trails, indexed_text
from sessionmem.memory.sync.chunking import (
    Chunk,
    chunk_markdown,
    drop_blank,
    remap_lines,
    split_for_embedding,
)
from sessionmem.memory.sync.plan import SourcePlan, SyncReport, plan_source
from sessionmem.memory.sync.rows import INSERT_CACHE, VectorWidthChanged, chunk_id, ensure_vec_table, to_blob
from sessionmem.memory.sync.sources import EntryContent, MemoryFile, NotMarkdownError, file_date, named_date

if TYPE_CHECKING:
    import numpy as np

    from sessionmem.memory.embed.embedder import Embedder
    from sessionmem.memory.store.seam import IndexStore
    from sessionmem.memory.sync.sources import EntrySource

EMBED_BATCH = 64  # texts per embed_documents call
WRITE_BATCH_CHUNKS = 512  # chunks buffered before a batch is embedded and written
UNREADABLE_HASH = "unreadable"

# Upserts in the form both stores run (``seam.py``).
_UPSERT_FILE = (
    "INSERT INTO files(path, source, hash, mtime_ns, size, date, audience) VALUES (?,?,?,?,?,?,?)"
    " ON CONFLICT(path) DO UPDATE SET source = excluded.source, hash = excluded.hash,"
    " mtime_ns = excluded.mtime_ns, size = excluded.size, date = excluded.date, audience = excluded.audience"
)


# ---------------------------------------------------------------------------- the sync pass


@dataclass
class _Prepared:
    entry: MemoryFile
    content_hash: str
    date: str
    chunks: list[tuple[Chunk, str | None]]  # (chunk, its date)
    audience: str  # who may see the file (sessionmem.privacy); every chunk carries it
    from_line: int | None = None  # append-only pass: replace only chunks starting at/after this line


@dataclass
class Indexer:
    """Syncs sources into ``conn`` (an ``IndexStore``). ``embedder`` None means FTS-only (model
    ``fts-only``, no vectors)."""

    conn: IndexStore
    embedder: Embedder | None
    chunk_tokens: int
    chunk_overlap: int
    fts: bool
    vectors: bool  # sqlite-vec loaded: keep chunks_vec in step
    cache_enabled: bool
    report: SyncReport
    progress: Callable[[int, int], None] | None = None
    file_issues: dict[str, str] = field(default_factory=dict)
    vector_issues: dict[str, str] = field(default_factory=dict)  # see the module docstring
    width: int | None = None  # the width of every vector in the index (None: none yet)

    @property
    def model(self) -> str:
        return self.embedder.model if self.embedder is not None else FTS_ONLY_MODEL

    def sync(
        self,
        sources: Sequence[EntrySource],
        *,
        full: bool,
        targeted: bool = False,
        meta: dict[str, Any] | None = None,
    ) -> None:
        """Bring the index in line with ``sources``; ``full`` re-reads every entry. ``targeted``: the
        sources list only some of their files (a session-delta pass), so none is deleted as gone.
        ``meta``: the index's stored meta as the caller read it (None: none)."""
        self.file_issues = dict(read_json(self.conn, FILE_ISSUES_KEY) or {})
        self.vector_issues = dict(read_json(self.conn, VECTOR_ISSUES_KEY) or {})
        before = dict(self.file_issues), dict(self.vector_issues)
        if self.embedder is not None:
            self.width = stored_width(self.conn, meta)
        plans = []
        for source in sources:
            plan = plan_source(self.conn, source, retry=self.vector_issues, full=full, targeted=targeted)
            if not full:
                plan = self._adopt_renames(source, plan)
            self.report.files_scanned += plan.scanned
            self.report.files_unchanged += plan.unchanged
            plans.append((source, plan.todo, plan.gone))
        total = sum(len(todo) for _, todo, _ in plans)
        done = 0
        if self.progress is not None:
            self.progress(0, total)
        with self.conn.bulk_writes(total):
            for source, todo, gone in plans:
                done = self._index_entries(source, todo, full, done, total)
                if gone:
                    with self.conn.atomic():
                        for path in sorted(gone):
                            self._drop_path(path)
                    self.report.files_deleted += len(gone)
        if (self.file_issues, self.vector_issues) != before:
            with self.conn.atomic():
                write_json(self.conn, FILE_ISSUES_KEY, self.file_issues)
                write_json(self.conn, VECTOR_ISSUES_KEY, self.vector_issues)
        self.report.issues.extend(self.file_issues.values())
        self.report.issues.extend(self.vector_issues.values())

    def _adopt_renames(self, source: EntrySource, plan: SourcePlan) -> SourcePlan:
        """Give a renamed file the rows of the path it was renamed from (a transcript archived by ``/new``).

        Why: an archive holds the same bytes as the live transcript it was, so re-reading, re-chunking
        and re-embedding it would only repeat work. ``source.renamed_from(path)`` names the old path;
        when that path is gone and the new one is not indexed yet, its ``files``/``chunks``/
        ``chunks_fts``/``chunks_vec`` rows move over in one transaction. Chunk ids are recomputed for
        the new path (ids hash the path, and append-only passes match chunks by id), vectors are reused.
        The entry then goes through the normal pass with the moved ``files.hash``, which checks the
        content: unchanged costs a read of the last chunk's lines, a grown file only its new lines,
        and a different file under that name is indexed anew (so a wrong guess is never wrong data).
        """
        renamed_from = getattr(source, "renamed_from", None)
        if renamed_from is None or not plan.gone:
            return plan
        gone = set(plan.gone)
        moves: dict[str, str] = {}  # new path -> old path
        for entry, old_hash in plan.todo:
            old = renamed_from(entry.rel_path) if old_hash is None else None
            if old is not None and old in gone:
                gone.discard(old)
                moves[entry.rel_path] = old
        if not moves:
            return plan
        hashes: dict[str, str] = {}
        with self.conn.atomic():
            for new, old in moves.items():
                row = self.conn.execute("SELECT hash FROM files WHERE path = ?", (old,)).fetchone()
                if row is not None:
                    self._move_path(old, new)
                    hashes[new] = row[0]
        self.report.files_renamed += len(hashes)
        todo = [(entry, hashes.get(entry.rel_path, old_hash)) for entry, old_hash in plan.todo]
        return SourcePlan(plan.scanned, plan.unchanged, todo, gone)

    def _move_path(self, old: str, new: str) -> None:
        """Rename a path's rows in place (inside the caller's transaction); see :meth:`_adopt_renames`."""
        rows = self.conn.execute(
            "SELECT rowid, id, source, start_line, end_line, hash, model, embedding FROM chunks"
            " WHERE path = ?",
            (old,),
        ).fetchall()
        has_vec = self.vectors and self.conn.vec_dims() is not None
        for rowid, old_id, source, start, end, text_hash, model, blob in rows:
            new_id = chunk_id(source, new, start, end, text_hash, model)
            self.conn.move_chunk(rowid, new_id, new)
            if has_vec:
                self.conn.execute("DELETE FROM chunks_vec WHERE id = ?", (old_id,))
                if blob is not None:
                    self.conn.execute("INSERT INTO chunks_vec(id, embedding) VALUES (?, ?)", (new_id, blob))
        self.conn.execute("UPDATE files SET path = ? WHERE path = ?", (new, old))
        if old in self.file_issues:
            self.file_issues[new] = self.file_issues.pop(old)
        if old in self.vector_issues:
            self.vector_issues[new] = self.vector_issues.pop(old)

    def _index_entries(
        self,
        source: EntrySource,
        todo: list[tuple[MemoryFile, str | None]],
        full: bool,
        done: int,
        total: int,
    ) -> int:
        pending: list[_Prepared] = []
        pending_chunks = 0
        for entry, old_hash in todo:
            retry = entry.rel_path in self.vector_issues  # see the module docstring
            prepared = self._prepare(source, entry, old_hash, full, retry=retry)
            done += 1
            if prepared is not None:
                pending.append(prepared)
                pending_chunks += len(prepared.chunks)
            if pending_chunks >= WRITE_BATCH_CHUNKS:
                self._write(pending)
                pending, pending_chunks = [], 0
            if self.progress is not None:
                self.progress(done, total)
        if pending:
            self._write(pending)
        return done

    def _prepare(
        self, source: EntrySource, entry: MemoryFile, old_hash: str | None, full: bool, *, retry: bool = False
    ) -> _Prepared | None:
        """Read and chunk one entry; None when only its stat changed (recorded in place). ``retry``: the
        entry has chunks without a vector; unchanged, only those are filled in (:meth:`_fill_vectors`)."""
        mtime = entry.mtime_ns / 1e9
        date = file_date(entry.rel_path, mtime)
        if getattr(source, "append_only", False):  # transcripts: chunk only the new lines
            plan_append = source.plan_append  # type: ignore[attr-defined]
            return self._prepare_append(plan_append, entry, None if full else old_hash, date, retry=retry)
        try:
            content = source.load(entry)
        except NotMarkdownError as exc:
            self.file_issues[entry.rel_path] = str(exc)
            content = EntryContent("", UNREADABLE_HASH)
        except OSError:
            # Vanished or unreadable right now: forget it, so the next sync tries again.
            self._forget(entry.rel_path)
            return None
        else:
            if content.issue:
                self.file_issues[entry.rel_path] = content.issue
            else:
                self.file_issues.pop(entry.rel_path, None)
        if not full and old_hash == content.hash:
            with self.conn.atomic():
                self.conn.execute(
                    "UPDATE files SET mtime_ns = ?, size = ?, date = ?, audience = ? WHERE path = ?",
                    (entry.mtime_ns, entry.size, date, content.audience, entry.rel_path),
                )
                self.conn.execute(  # a transcript's header may name another key with the same text
                    "UPDATE chunks SET audience = ? WHERE path = ? AND audience != ?",
                    (content.audience, entry.rel_path, content.audience),
                )
            self.report.files_unchanged += 1
            if retry:
                self._fill_vectors(entry.rel_path)
            return None
        chunks = drop_blank(chunk_markdown(content.text, self.chunk_tokens, self.chunk_overlap))
        trails = heading_trails(content.text.split("\n"))
        named = named_date(
            entry.rel_path
        )  # the file's mtime says when it was saved, not what day it tells of
        dated = []
        for c in chunks:
            day = _chunk_date(c, content, date)
            spoken_of = day if content.line_dates else named
            dated.append((replace(c, context=chunk_context(trails[c.start_line - 1], spoken_of)), day))
        remapped = remap_lines([c for c, _ in dated], content.line_map)
        dated = [(c, d) for c, (_, d) in zip(remapped, dated, strict=True)]
        if self.embedder is not None:
            limit = self.embedder.max_input_tokens
            dated = [(piece, d) for c, d in dated for piece in split_for_embedding([c], limit)]
        return _Prepared(entry, content.hash, date, dated, content.audience)

    def _prepare_append(
        self,
        plan_append: Callable[..., Any],
        entry: MemoryFile,
        old_hash: str | None,
        date: str,
        *,
        retry: bool = False,
    ) -> _Prepared | None:
        """A transcript pass (``transcript_append``): only lines after the last chunk's start are read.

        A ``retry`` entry that grew is re-read in full, so its older chunks without a vector are asked
        for again too (and :meth:`_note_vectors` sees every chunk of the file)."""
        try:
            plan = plan_append(entry, old_hash, self.chunk_tokens, self.chunk_overlap, date)
            if retry and not plan.unchanged and plan.from_line is not None:
                plan = plan_append(entry, None, self.chunk_tokens, self.chunk_overlap, date)
        except OSError:
            self._forget(entry.rel_path)
            return None
        if plan.unchanged:
            with self.conn.atomic():
                self.conn.execute(
                    "UPDATE files SET mtime_ns = ?, size = ? WHERE path = ?",
                    (entry.mtime_ns, entry.size, entry.rel_path),
                )
            self.report.files_unchanged += 1
            if retry:
                self._fill_vectors(entry.rel_path)
            return None
        dated = plan.chunks
        if self.embedder is not None:
            limit = self.embedder.max_input_tokens
            dated = [(piece, d) for c, d in dated for piece in split_for_embedding([c], limit)]
        return _Prepared(entry, plan.hash, date, dated, plan.audience, from_line=plan.from_line)

    def _forget(self, path: str) -> None:
        with self.conn.atomic():
            self._drop_path(path)

    def _drop_path(self, path: str) -> None:
        """Remove every trace of ``path``: its rows, its ``files`` row and its recorded issues (inside
        the caller's transaction)."""
        self._delete_path(path)
        self.conn.execute("DELETE FROM files WHERE path = ?", (path,))
        self.file_issues.pop(path, None)
        self.vector_issues.pop(path, None)

    def _fill_vectors(self, path: str) -> None:
        """Give ``path``'s chunks stored without a vector one, in place (its content is unchanged).

        Only those chunks' texts are looked up or embedded; the filled rows get their ``embedding``
        and ``chunks_vec`` row, nothing else of the file is touched. Chunks still rejected stay as
        they are, and the file stays listed; once none is left it leaves ``vector_issues``."""
        rows = self.conn.execute(
            "SELECT id, hash, text FROM chunks WHERE path = ? AND embedding IS NULL", (path,)
        ).fetchall()
        if not rows:
            self.vector_issues.pop(path, None)
            return
        vectors, rejected = self._vectors_for([(h, t) for _, h, t in rows])
        filled = [(cid, vectors[h]) for cid, h, _ in rows if h in vectors]
        if filled:
            with self.conn.atomic():
                if self.vectors and self.width is not None:
                    ensure_vec_table(self.conn, self.width)
                self.conn.executemany(
                    "UPDATE chunks SET embedding = ? WHERE id = ?", [(blob, cid) for cid, blob in filled]
                )
                if self.vectors:
                    self.conn.executemany("INSERT INTO chunks_vec(id, embedding) VALUES (?, ?)", filled)
            self.report.vectors_filled += len(filled)
        bad = [h for _, h, _ in rows if h in rejected]
        if not bad:
            self.vector_issues.pop(path, None)
        elif filled:
            (total,) = self.conn.execute("SELECT COUNT(*) FROM chunks WHERE path = ?", (path,)).fetchone()
            self.vector_issues[path] = _vector_issue(path, len(bad), int(total), rejected[bad[0]])

    # -- embedding -------------------------------------------------------------------------------

    def _vectors_for(self, chunks: list[tuple[str, str]]) -> tuple[dict[str, bytes], dict[str, str]]:
        """For every chunk (hash, text): hash -> float32 blob (cache, existing chunks, embedder), and
        hash -> why it has none (the embedder gave no usable vector; see the module docstring)."""
        embedder = self.embedder
        if embedder is None:
            return {}, {}
        texts: dict[str, str] = {}
        for digest, text in chunks:
            texts.setdefault(digest, text)
        if self.width is not None and embedder.dims is not None and embedder.dims != self.width:
            raise VectorWidthChanged(self.width, embedder.dims, embedder.model)
        found = self._lookup(embedder, list(texts), self.width or embedder.dims)
        if found and self.width is None:
            # Trigger: a new index (a rebuild's scratch file) and an embedder that has not said its
            # width yet. Why: the seeded cache may hold vectors of an earlier width. Outcome: the most
            # common width found is the index's; other rows are embedded again (a different answer
            # then raises VectorWidthChanged, and the rebuild is retried knowing the width).
            widths = Counter(len(blob) for blob in found.values())
            self.width = widths.most_common(1)[0][0] // 4
            found = {h: b for h, b in found.items() if len(b) == self.width * 4}
        self.report.cache_hits += sum(1 for digest, _ in chunks if digest in found)
        missing = [(h, t) for h, t in texts.items() if h not in found]
        fresh: list[tuple[str, bytes, int]] = []
        rejected: dict[str, str] = {}
        for start in range(0, len(missing), EMBED_BATCH):
            batch = missing[start : start + EMBED_BATCH]
            rows, problems = self._embed(embedder, [t for _, t in batch])
            for i, (digest, _) in enumerate(batch):
                if i in problems:
                    rejected[digest] = problems[i]
                else:
                    found[digest] = to_blob(rows[i])
                    fresh.append((digest, found[digest], rows.shape[1]))
        self.report.embedded += len(missing)
        if fresh and self.cache_enabled:
            now = int(time.time() * 1000)
            with self.conn.atomic():
                self.conn.executemany(
                    INSERT_CACHE,
                    [
                        (embedder.provider, embedder.model, embedder.provider_key, h, b, d, now)
                        for h, b, d in fresh
                    ],
                )
        return found, rejected

    def _embed(self, embedder: Embedder, texts: list[str]) -> tuple[np.ndarray, dict[int, str]]:
        """One ``embed_documents`` call: the rows and {index: problem} for inputs with no usable vector.

        Raises ``EmbeddingError`` when the call fails, its answer has the wrong shape, none of several
        inputs got a usable vector (the provider is broken, not one input), or the good rows are not as
        wide as the index (:class:`VectorWidthChanged`)."""
        import numpy as np

        from sessionmem.memory.embed.embedder import row_problems
        from sessionmem.memory.embed.remote import UnusableVectorsError

        problems: dict[int, str] = {}
        try:
            matrix = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
        except UnusableVectorsError as exc:
            matrix, problems = np.asarray(exc.vectors, dtype=np.float32), dict(exc.problems)
        except SessionMemError:
            raise
        except Exception as exc:
            raise EmbeddingError(
                f"embedding {len(texts)} chunks with {embedder.model} failed: {exc}"
            ) from exc
        if matrix.ndim != 2 or matrix.shape[0] != len(texts):
            raise EmbeddingError(
                f"{embedder.model} returned vectors of shape {matrix.shape} for {len(texts)} texts"
            )
        problems, _ = row_problems(matrix, embedder.model, problems)
        if problems and len(problems) == len(texts) > 1:
            first = problems[min(problems)]
            raise EmbeddingError(
                f"{embedder.model} returned no usable vector for any of {len(texts)} texts ({first})"
            )
        if len(problems) < len(texts):
            if self.width is None:
                self.width = int(matrix.shape[1])
            elif matrix.shape[1] != self.width:
                raise VectorWidthChanged(self.width, int(matrix.shape[1]), embedder.model)
        return matrix, problems

    def _lookup(self, embedder: Embedder, hashes: list[str], width: int | None) -> dict[str, bytes]:
        """Vectors already known for ``hashes`` (cache, then existing chunks), of ``width`` when given."""
        found: dict[str, bytes] = {}
        size = -1 if width is None else width * 4  # -1: any width
        for start in range(0, len(hashes), 400):
            part = hashes[start : start + 400]
            among, params = self.conn.one_of("hash", part)
            rows = self.conn.execute(
                f"SELECT hash, embedding FROM embedding_cache WHERE provider = ? AND model = ? "
                f"AND provider_key = ? AND {among} AND (? < 0 OR length(embedding) = ?)",
                (embedder.provider, embedder.model, embedder.provider_key, *params, size, size),
            )
            found.update((h, bytes(b)) for h, b in rows)
            rest = [h for h in part if h not in found]
            if rest:
                among, params = self.conn.one_of("hash", rest)
                rows = self.conn.execute(
                    f"SELECT hash, embedding FROM chunks WHERE model = ? AND embedding IS NOT NULL "
                    f"AND {among} AND (? < 0 OR length(embedding) = ?)",
                    (embedder.model, *params, size, size),
                )
                found.update((h, bytes(b)) for h, b in rows)
        return found

    # -- writing ---------------------------------------------------------------------------------

    def _write(self, pending: list[_Prepared]) -> None:
        vectors, rejected = self._vectors_for([(c.hash, c.text) for p in pending for c, _ in p.chunks])
        model = self.model
        now = int(time.time() * 1000)
        with self.conn.atomic():
            if vectors and self.vectors and self.width is not None:
                ensure_vec_table(self.conn, self.width)
            for prepared in pending:
                entry = prepared.entry
                ids = [
                    chunk_id(entry.source, entry.rel_path, c.start_line, c.end_line, c.hash, model)
                    for c, _ in prepared.chunks
                ]
                kept = self._delete_path(entry.rel_path, from_line=prepared.from_line, keep=set(ids))
                seen: set[str] = set(kept)
                rows: list[tuple[Any, ...]] = []
                texts: list[str] = []
                for cid, (chunk, date) in zip(ids, prepared.chunks, strict=True):
                    if cid in seen:
                        continue  # identical chunk twice in one file: keep one (OpenClaw's ON CONFLICT)
                    seen.add(cid)
                    rows.append(
                        (cid, entry.rel_path, entry.source, chunk.start_line, chunk.end_line, chunk.hash,
                         model, chunk.text, vectors.get(chunk.hash), date, now, prepared.audience)
                    )  # fmt: skip
                    texts.append(fts_text(indexed_text(chunk.context, chunk.text)))
                self.conn.insert_chunks(rows, texts if self.fts else None)
                with_vectors = [(row[0], row[8]) for row in rows if row[8] is not None]
                if with_vectors and self.vectors:
                    self.conn.executemany("INSERT INTO chunks_vec(id, embedding) VALUES (?, ?)", with_vectors)
                self.report.chunks_written += len(seen) - len(kept)
                self._note_vectors(entry.rel_path, prepared, rejected)
                self.conn.execute(
                    _UPSERT_FILE,
                    (
                        entry.rel_path,
                        entry.source,
                        prepared.content_hash,
                        entry.mtime_ns,
                        entry.size,
                        prepared.date,
                        prepared.audience,
                    ),
                )
                self.report.files_indexed += 1

    def _note_vectors(self, path: str, prepared: _Prepared, rejected: dict[str, str]) -> None:
        """Record (or clear) that ``path`` has chunks without a vector, so status shows it and the
        next sync retries them. (A retried file that changed is re-read in full: its chunks are all here.)"""
        bad = [chunk for chunk, _ in prepared.chunks if chunk.hash in rejected]
        if not bad:
            self.vector_issues.pop(path, None)
            return
        self.report.without_vectors += len(bad)
        self.vector_issues[path] = _vector_issue(path, len(bad), len(prepared.chunks), rejected[bad[0].hash])

    def _delete_path(
        self, path: str, *, from_line: int | None = None, keep: set[str] | None = None
    ) -> set[str]:
        """Remove a path's chunks from chunks, chunks_fts and chunks_vec (inside the caller's transaction).

        Append-only passes give ``from_line`` (only chunks starting there or later go) and ``keep``
        (ids to leave in place, untouched: the same chunk again). Returns the ids kept."""
        if from_line is None:
            rows = self.conn.execute("SELECT rowid, id FROM chunks WHERE path = ?", (path,)).fetchall()
        else:
            rows = self.conn.execute(
                "SELECT rowid, id FROM chunks WHERE path = ? AND start_line >= ?", (path, from_line)
            ).fetchall()
        kept = {r[1] for r in rows if keep is not None and r[1] in keep} if from_line is not None else set()
        rows = [r for r in rows if r[1] not in kept]
        if not rows:
            return kept
        if self.vectors and self.conn.vec_dims() is not None:
            self.conn.executemany("DELETE FROM chunks_vec WHERE id = ?", [(r[1],) for r in rows])
        self.conn.delete_chunks([r[0] for r in rows])
        return kept


def _vector_issue(path: str, bad: int, total: int, reason: str) -> str:
    return (
        f"{path}: {bad} of {total} chunks indexed without a vector ({reason}); keyword search finds "
        "them, the next sync asks for their vectors again"
    )


def _chunk_date(chunk: Chunk, content: EntryContent, default: str) -> str | None:
    """The chunk's first content line's date when the source dates lines, else the file's date."""
    dates = content.line_dates
    if dates and 0 < chunk.start_line <= len(dates):
        return dates[chunk.start_line - 1] or default
    return default
