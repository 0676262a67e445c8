"""The keyword matrix: the postings of a large SQLite index's common words held in numpy, ranked there.

Trigger: an FTS5 table of at least ``sqlite_keywords.MATRIX_MIN_ROWS`` rows (``KeywordIndex`` asks
for it on a search).
Why: FTS5's ``bm25()`` runs once per matching row, ~1.1-1.6 us each at 1M chunks: a query of two words
each held by 5-10% of the rows spends ~95% of its time there (``bench_keyword_postings.py``: 31.5 / 141.9
ms p50 / p95 at 1M; the same BM25 summed in numpy from postings in memory: 2.45 / 10.4 ms).
Outcome: every word held by at least ``HELD_SHARE`` of the rows keeps its postings (row ids and counts,
read from FTS5's ``fts5vocab`` instance table), with every row's length as FTS5 recorded it and the
columns the keyword filters read (model, source, date, audience). A query's one-token phrases whose word
is held are scored here with FTS5's formula and IDFs; FTS5 ranks the other phrases (rare words, phrases
of several tokens: few rows), whose ``bm25()`` over the whole table is exactly their share of the full
BM25; the two are summed per row, so the result is FTS5's ranking of every matching row: the same rows,
order (ties: the lower rowid) and scores to float noise.

A state is valid for the write token it was read at. In SQLite any write makes it stale
(``KeywordIndex.forget`` or another token): FTS5 answers as before while a background thread, on its own
connection, reads the index again (~35 s at 1M chunks). A smaller index never loads it.

A store that logs which chunks each write changed (PostgreSQL, ``pg_changes``) keeps its state current
instead: the search after another host's write reads the changed chunks' keyword rows (``KeywordChanges``)
and :meth:`PostingsState.changed` applies them: their old rows leave the held words' postings, their
rows now join them, and the totals, lengths and filter columns follow (``postgres_keywords`` reads the
first state, ``pg_changes`` the changes).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sessionmem.memory.store.fts_view import BM25_B, BM25_K1, bm25_idf, fts_totals, varints
from sessionmem.memory.store.seam import KeywordChanges, KeywordFilters

log = logging.getLogger(__name__)

HELD_SHARE = 0.01  # words held by at least this share of the rows keep their postings (805 at 1M: ~220 MB)
LOAD_HOLD_S = 1.0  # a load waits this long after the query asking for it, unless another query comes
_FILTER_BATCH = 8192

Postings = tuple[np.ndarray, np.ndarray]  # rowids ascending (int32 or int64), the word's count in each


@dataclass(frozen=True)
class PostingsState:
    """One load of the keyword matrix; replaced whole, never changed but for its mask cache."""

    token: object  # the searching connection's write token this state is current for
    rows: int  # FTS5's row count and average length (its averages record), as bm25() reads them
    avg: float
    norm: np.ndarray  # by rowid: k1 * (1 - b + b * length / avg), float64
    length: np.ndarray  # by rowid: the row's length in tokens, float64 (0: no row)
    words: dict[str, Postings]
    models: np.ndarray  # by rowid: codes into ``names`` (-1: no row)
    sources: np.ndarray
    audiences: np.ndarray
    dates: np.ndarray  # by rowid: "S10" (YYYY-MM-DD in ASCII), b"" when undated
    names: dict[str, int]  # every model, source and audience value -> its code
    rows_index: RowIndex | None = None  # for a store that applies changes (``changed``)
    masks: dict[tuple[Any, ...], np.ndarray | None] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    scratch: list[np.ndarray] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        held = sum(d.nbytes + c.nbytes for d, c in self.words.values())
        index = self.rows_index.nbytes if self.rows_index is not None else 0
        return int(held + index + self.norm.nbytes * 2 + self.models.nbytes * 3 + self.dates.nbytes)

    def holds(self, token: str) -> bool:
        return token in self.words

    def held_by(self, token: str) -> int:
        """How many rows hold a held word (its postings)."""
        return len(self.words[token][0])

    def mask(self, filters: KeywordFilters) -> np.ndarray | None:
        """Rows the filters keep, by rowid (None: no filter), cached per filter."""
        key = (filters.model, tuple(filters.sources), filters.dates, _tuple(filters.audiences))
        if key in self.masks:
            return self.masks[key]
        mask: np.ndarray | None = None
        if filters.model is not None:
            mask = self.models == self.names.get(filters.model, -2)
        if filters.sources:
            mask = _and(mask, np.isin(self.sources, self._codes(filters.sources)))
        if filters.audiences:  # empty or None: no filter (``KeywordFilters``)
            mask = _and(mask, np.isin(self.audiences, self._codes(filters.audiences)))
        if filters.dates is not None:
            after, before = filters.dates
            low, high = after.encode(), before.encode()
            dated = (self.dates != b"") & (self.dates >= low) & (self.dates <= high)
            mask = _and(mask, dated)
        self.masks[key] = mask
        return mask

    def _codes(self, values: Sequence[str]) -> list[int]:
        return [self.names[v] for v in values if v in self.names]

    def top(
        self, tokens: Sequence[str], others: Sequence[tuple[int, float]], filters: KeywordFilters, limit: int
    ) -> dict[int, float] | None:
        """{rowid: FTS5 bm25 rank} of the best ``limit`` rows: ``tokens`` (held words, one per phrase)
        scored from their postings, plus ``others`` ((rowid, rank) of every row FTS5 matched for the
        other phrases under ``filters``); None when a row is newer than this state."""
        n = len(self.norm)
        if others and max(r for r, _ in others) >= n:
            return None
        other_ids = np.fromiter((r for r, _ in others), dtype=np.int64, count=len(others))
        other_scores = np.fromiter((-s for _, s in others), dtype=np.float64, count=len(others))
        lists = [self.words[t][0] for t in tokens] + [other_ids]
        with self.lock:
            if not self.scratch:
                self.scratch.append(np.zeros(n))
            scratch = self.scratch[0]
            for token in tokens:
                docs, counts = self.words[token]
                idf = bm25_idf(self.rows, len(docs))
                scratch[docs] += idf * counts * (BM25_K1 + 1) / (counts + self.norm[docs])
            scratch[other_ids] += other_scores
            id_parts, score_parts = [], []
            for docs in lists:  # each row once: a row taken is marked for the next lists
                scores = scratch[docs]
                fresh = scores != -np.inf
                id_parts.append(docs[fresh])
                score_parts.append(scores[fresh])
                scratch[docs] = -np.inf
            for docs in lists:
                scratch[docs] = 0.0
        ids, scores = np.concatenate(id_parts).astype(np.int64), np.concatenate(score_parts)
        mask = self.mask(filters)
        if mask is not None and len(tokens):
            kept = mask[ids]  # FTS5 filtered the other phrases' rows already; the mask agrees on them
            ids, scores = ids[kept], scores[kept]
        if len(scores) > limit:
            kth = np.partition(scores, len(scores) - limit)[len(scores) - limit]
            kept_idx = np.flatnonzero(scores >= kth)
            ids, scores = ids[kept_idx], scores[kept_idx]
        order = np.lexsort((ids, -scores))[:limit]
        return {int(ids[i]): -float(scores[i]) for i in order}

    def changed(self, changes: KeywordChanges) -> PostingsState:
        """This state with ``changes`` applied, as of their token: the changed chunks' old rows leave the
        held words' postings (found through the row index), their rows now join them, and the totals, lengths
        and filter columns follow. Arrays are never written in place: this state stays whole for a
        search still using it, and the postings of the words no change touched are shared with it."""
        index = self.rows_index
        if index is None:
            raise ValueError("a state without a row index cannot apply changes")
        words = dict(self.words)
        for term, rowids in index.take(changes.ids).items():
            docs, counts = words[term]
            at = np.searchsorted(docs, np.array(sorted(rowids), dtype=np.int64))
            words[term] = (np.delete(docs, at), np.delete(counts, at))
        size = max([len(self.length), *(r.rowid + 1 for r in changes.rows)])
        length = _resized(self.length, size, 0.0)
        models, sources, audiences = (
            _resized(a, size, -1) for a in (self.models, self.sources, self.audiences)
        )
        dates = _resized(self.dates, size, b"")
        names = dict(self.names)
        added: dict[str, tuple[list[int], list[int]]] = {}
        for row in changes.rows:
            at_row = row.rowid
            index.put(row.id, at_row, [t for t in row.words if t in words])
            length[at_row] = row.length
            models[at_row] = names.setdefault(row.model, len(names))
            sources[at_row] = names.setdefault(row.source, len(names))
            audiences[at_row] = names.setdefault(row.audience, len(names))
            dates[at_row] = (row.date or "").encode()
            for term, n in row.words.items():
                if term in words:
                    held = added.setdefault(term, ([], []))
                    held[0].append(at_row)
                    held[1].append(n)
        for term, (rowids, ns) in added.items():
            words[term] = _joined(words[term], rowids, ns, size)
        avg = changes.total_length / changes.total_rows if changes.total_rows else 0.0
        return PostingsState(
            changes.token, changes.total_rows, avg, row_norms(length, avg), length, words,
            models, sources, audiences, dates, names, index,
        )  # fmt: skip


class RowIndex:
    """Where each chunk's row is and which held words each row holds: what applying a change needs to
    take a changed chunk's old row out of the postings (its keyword row is gone from the store by then).
    The rows of the load are kept as one array of word indexes sorted by rowid (``_starts``: where each
    row's words begin), rows written since in a dict. Shared by the states of one line and moved on by each
    change: only the newest state of a line applies changes."""

    def __init__(self, ids: dict[str, int], words: dict[str, Postings], size: int) -> None:
        self.ids = ids  # chunk id -> rowid
        self.terms = list(words)
        self._term_index = {t: i for i, t in enumerate(self.terms)}
        docs = [words[t][0] for t in self.terms]
        all_docs = np.concatenate(docs).astype(np.int64) if docs else np.zeros(0, dtype=np.int64)
        index_type = np.uint16 if len(docs) < 2**16 else np.int32  # half the bytes for most indexes
        which = np.repeat(np.arange(len(docs), dtype=index_type), [len(d) for d in docs])
        self._held = which[np.argsort(all_docs, kind="stable")]
        self._starts = np.zeros(size + 1, dtype=np.int64)
        np.cumsum(np.bincount(all_docs, minlength=size), out=self._starts[1:])
        self._written: dict[int, list[int]] = {}  # rowid -> word indexes, rows written since the load

    @property
    def nbytes(self) -> int:
        return int(self._held.nbytes + self._starts.nbytes)

    def take(self, chunk_ids: Sequence[str]) -> dict[str, list[int]]:
        """Forget the rows of ``chunk_ids``; {held word: the rowids among them holding it}."""
        out: dict[str, list[int]] = {}
        for cid in chunk_ids:
            rowid = self.ids.pop(cid, None)
            if rowid is None:
                continue
            held = self._written.pop(rowid, None)
            if held is None:
                held = (
                    self._held[self._starts[rowid] : self._starts[rowid + 1]].tolist()
                    if rowid < len(self._starts) - 1
                    else []
                )
            for i in held:
                out.setdefault(self.terms[i], []).append(rowid)
        return out

    def put(self, chunk_id: str, rowid: int, held: Sequence[str]) -> None:
        """Chunk ``chunk_id`` is row ``rowid`` now, holding the ``held`` words."""
        self.ids[chunk_id] = rowid
        self._written[rowid] = [self._term_index[t] for t in held]


def row_norms(length: np.ndarray, avg: float) -> np.ndarray:
    """BM25's length normalisation of each row, k1 * (1 - b + b * length / avg), as FTS5 computes it."""
    return BM25_K1 * (1 - BM25_B + BM25_B * length / avg) if avg else np.full(len(length), BM25_K1)


def _resized(values: np.ndarray, size: int, fill: Any) -> np.ndarray:
    """A copy of ``values`` ``size`` long, ``fill`` past its end."""
    out = np.full(size, fill, dtype=values.dtype)
    out[: len(values)] = values
    return out


def _joined(postings: Postings, rowids: list[int], counts: list[int], size: int) -> Postings:
    """``postings`` with the rows ``rowids`` (none held yet) and their counts, rowids ascending."""
    docs, held = postings
    row_type = np.int32 if size < 2**31 else np.int64
    count_type = np.uint16 if max(counts) < 2**16 and held.dtype == np.uint16 else np.uint32
    new_docs = np.asarray(rowids, dtype=row_type)
    all_docs = np.concatenate([docs.astype(row_type, copy=False), new_docs])
    all_counts = np.concatenate([held.astype(count_type, copy=False), np.asarray(counts, dtype=count_type)])
    if np.any(np.diff(new_docs) <= 0) or (len(docs) and new_docs[0] <= docs[-1]):
        order = np.argsort(all_docs, kind="stable")
        all_docs, all_counts = all_docs[order], all_counts[order]
    return all_docs, all_counts


def _tuple(values: Sequence[str] | None) -> tuple[str, ...] | None:
    return None if values is None else tuple(values)


def _and(mask: np.ndarray | None, other: np.ndarray) -> np.ndarray:
    return other if mask is None else mask & other


def read_postings(conn: Any, token: object, *, share: float | None = None) -> PostingsState:
    """Everything a ``PostingsState`` holds, read through ``conn`` (its own connection: one snapshot);
    the words held by ``share`` of the rows (None: ``HELD_SHARE``)."""
    conn.execute("BEGIN")  # one snapshot of the index for every read below
    try:
        return _read(conn, token, HELD_SHARE if share is None else share)
    finally:
        conn.execute("ROLLBACK")


def _read(conn: Any, token: object, share: float) -> PostingsState:
    rows, avg = fts_totals(conn)
    (top,) = conn.execute("SELECT max(id) FROM chunks_fts_docsize").fetchone()
    (top_chunk,) = conn.execute("SELECT max(rowid) FROM chunks").fetchone()
    size = max(int(top or 0), int(top_chunk or 0)) + 1
    length = np.zeros(size, dtype=np.float64)
    for rowid, sz in conn.execute("SELECT id, sz FROM chunks_fts_docsize"):
        length[rowid] = sum(varints(bytes(sz)))
    names: dict[str, int] = {}
    models = np.full(size, -1, dtype=np.int32)
    sources = np.full(size, -1, dtype=np.int32)
    audiences = np.full(size, -1, dtype=np.int32)
    dates = np.full(size, b"", dtype="S10")
    cursor = conn.execute("SELECT rowid, model, source, audience, date FROM chunks")
    while batch := cursor.fetchmany(_FILTER_BATCH):
        at = np.fromiter((r[0] for r in batch), dtype=np.int64, count=len(batch))
        models[at] = [names.setdefault(r[1], len(names)) for r in batch]
        sources[at] = [names.setdefault(r[2], len(names)) for r in batch]
        audiences[at] = [names.setdefault(r[3], len(names)) for r in batch]
        dates[at] = [(r[4] or "").encode() for r in batch]
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.kw_rows USING fts5vocab(main, chunks_fts, 'row')")
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.kw_instances USING fts5vocab(main, chunks_fts, 'instance')"
    )
    held = [str(t) for t, d in conn.execute("SELECT term, doc FROM temp.kw_rows") if d >= share * rows]
    words = {term: _postings(conn, term, size) for term in held}
    norm = row_norms(length, avg)
    return PostingsState(token, rows, avg, norm, length, words, models, sources, audiences, dates, names)


def _postings(conn: Any, term: str, size: int) -> Postings:
    (joined,) = conn.execute(
        "SELECT group_concat(doc, ' ') FROM temp.kw_instances WHERE term = ?", (term,)
    ).fetchone()
    docs = np.array(str(joined or "").split(), dtype=np.int64)  # row order, a row once per instance
    if not len(docs):
        return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.uint16)
    starts = np.flatnonzero(np.r_[True, docs[1:] != docs[:-1]])
    counts = np.diff(np.r_[starts, len(docs)])
    dtype = np.int32 if size < 2**31 else np.int64
    return docs[starts].astype(dtype), counts.astype(np.uint16 if counts.max() < 2**16 else np.uint32)


Reader = Callable[[Any, object], PostingsState]  # (a second connection, its write token) -> a full load
Updater = Callable[[PostingsState], "PostingsState | None"]  # a stale state made current, None: reload


class KeywordMatrix:
    """The current ``PostingsState`` of one searching connection, loaded in the background.

    ``current()``: the state when it is valid for the connection's write token, else None (FTS5
    answers) after starting a load. ``forget()`` after a write. ``read``: how a load reads the index
    (SQLite's FTS5 tables by default); ``update``: how a stale state is made current from the store's
    change log, in the search asking (a store without a log: None, a stale state is reloaded whole).
    """

    def __init__(
        self,
        token: Callable[[], object],
        opener: Callable[[], Any],
        *,
        read: Reader | None = None,
        update: Updater | None = None,
        load_hold_s: float = LOAD_HOLD_S,
    ) -> None:
        self._token = token
        self._open = opener
        self._read = read or read_postings
        self._update = update
        self._load_hold_s = load_hold_s
        self._state: PostingsState | None = None
        self._generation = 0
        self._go = threading.Event()
        self._load: threading.Thread | None = None
        self.error: str | None = None
        self.loads = 0  # completed loads, for tests and status
        self.updates = 0  # stale states made current from the change log
        self._updating = threading.Lock()  # one update at a time: it moves the state's row index on

    @property
    def loaded(self) -> bool:
        """Whether a state is held (current or not)."""
        return self._state is not None

    def forget(self) -> None:
        if self._update is not None:
            return  # the write token tells a stale state, which the change log then updates
        self._generation += 1
        self._state = None

    def current(self) -> PostingsState | None:
        state = self._state
        if state is None:
            self._start()
            return None
        token = self._token()
        if state.token == token:
            return state
        if self._update is not None:
            with self._updating:
                state = self._state
                if state is not None and state.token == token:  # another thread updated it meanwhile
                    return state
                try:
                    fresh = self._update(state) if state is not None else None
                except BaseException:
                    self._state = None  # half applied, perhaps: a load reads it whole
                    raise
                if fresh is not None:
                    self._state = fresh
                    self.updates += 1
                    return fresh if fresh.token == token else None
        self._state = None
        self._start()
        return None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until a running load finishes; True when none runs afterwards."""
        thread = self._load
        if thread is not None:
            self._go.set()
            thread.join(timeout)
        return self._load is None or not self._load.is_alive()

    def _start(self) -> None:
        if self._load is not None and self._load.is_alive():
            self._go.set()  # a second query since the load was asked for: read now
            return
        self._go = threading.Event()
        self._load = threading.Thread(
            target=self._read_in_background,
            args=(self._token(), self._generation),
            name="sessionmem-keyword-matrix-load",
            daemon=True,
        )
        self._load.start()

    def _read_in_background(self, token: object, generation: int) -> None:
        self._go.wait(self._load_hold_s)
        if generation != self._generation:
            return
        try:
            store = self._open()
            try:
                state = self._read(store, token)
            finally:
                store.close()
        except Exception as exc:  # FTS5 keeps answering; the next search tries again
            log.warning("memory keywords: background keyword matrix load failed: %s", exc)
            self.error = str(exc)
            return
        if generation == self._generation:
            self._state, self.error = state, None
            self.loads += 1
