"""Keyword ranking from postings held in memory vs SQLite's FTS5 search, on a kept bench_search index.

Where SQLite's keyword time goes at 1M chunks: FTS5's ``bm25()`` is called once per matching row
(about 1-1.6 us each), so a query pairing two words each held by 5-12% of the rows (150-170k rows)
takes 180-280 ms however its top k is chosen; iterating the same rows without ``bm25()`` takes
10-14 ms. This script measures the alternative: each query word's postings (row ids and counts, read
from ``fts5vocab`` before timing) and every row's length held in numpy arrays, BM25 summed with
FTS5's formula and IDFs, the top k taken. Each query is timed both ways in turn, and the postings'
top k is checked against FTS5 ranking every matching row (the same rows, order, scores to 1e-9).

Only queries whose phrases are single tokens are ranked from postings (the bench's all are). The
postings of the whole index are not loaded: only the query words', timed apart (``read`` column).

    python bench/bench_search.py --sizes 1000000 --keep DIR --matrix-only   # builds DIR/s1000000
    python bench/bench_keyword_postings.py --index DIR/s1000000/state/memory/bench.sqlite

Without ``--index`` it builds one of ``--size`` chunks (default 20,000) as bench_search does, in a
temporary folder.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_search import HYBRID_K, make_queries
from common import HashEmbedder, footer, header, parser, stats, table, write_chunky_workspace

from sessionmem.memory.search.query_terms import fts_phrases
from sessionmem.memory.store.database import connect
from sessionmem.memory.store.fts_tokens import Tokenizer, phrase_text
from sessionmem.memory.store.fts_view import BM25_B, BM25_K1, bm25_idf, fts_totals, varints
from sessionmem.memory.store.seam import KeywordFilters
from sessionmem.memory.store.sqlite_keywords import KeywordIndex, match_expression, table_tokenizer

Postings = tuple[np.ndarray, np.ndarray]  # sorted row ids, the token's count in each


def lengths(conn: Any) -> np.ndarray:
    """Every row's length in tokens as FTS5 recorded it (``chunks_fts_docsize``), by rowid."""
    (top,) = conn.execute("SELECT max(id) FROM chunks_fts_docsize").fetchone()
    out = np.zeros(int(top) + 1, dtype=np.float64)
    for rowid, size in conn.execute("SELECT id, sz FROM chunks_fts_docsize"):
        out[rowid] = sum(varints(bytes(size)))
    return out


def postings(conn: Any, token: str) -> Postings:
    """The rows holding ``token`` and its count in each (one instance per row and position)."""
    (joined,) = conn.execute(
        "SELECT group_concat(doc, ' ') FROM temp.vocab WHERE term = ?", (token,)
    ).fetchone()
    if not joined:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    docs = np.array(joined.split(" "), dtype=np.int64)  # in row order, a row once per instance
    starts = np.flatnonzero(np.r_[True, docs[1:] != docs[:-1]])
    return docs[starts], np.diff(np.r_[starts, len(docs)]).astype(np.float64)


class PostingsRanker:
    """BM25 top k from postings: FTS5's formula, IDFs and lengths; ties by the lower rowid."""

    def __init__(self, rows: int, avg: float, length: np.ndarray) -> None:
        self.rows = rows
        self.norm = BM25_K1 * (1 - BM25_B + BM25_B * length / avg)
        self.scratch = np.zeros(len(length))

    def top(self, lists: list[Postings], k: int) -> list[tuple[int, float]]:
        for docs, counts in lists:
            idf = bm25_idf(self.rows, len(docs))
            self.scratch[docs] += idf * counts * (BM25_K1 + 1) / (counts + self.norm[docs])
        id_parts, score_parts = [], []
        for docs, _ in lists:  # each row once: a row taken is marked for the next lists
            scores = self.scratch[docs]
            fresh = scores != -np.inf
            id_parts.append(docs[fresh])
            score_parts.append(scores[fresh])
            self.scratch[docs] = -np.inf
        for docs, _ in lists:
            self.scratch[docs] = 0.0
        ids, scores = np.concatenate(id_parts), np.concatenate(score_parts)
        if len(scores) > k:
            kth = np.partition(scores, len(scores) - k)[len(scores) - k]
            kept = np.flatnonzero(scores >= kth)
            ids, scores = ids[kept], scores[kept]
        order = np.lexsort((ids, -scores))[:k]
        return [(int(ids[i]), -float(scores[i])) for i in order]


def reference(conn: Any, phrases: list[str], k: int) -> list[tuple[int, float]]:
    """Every matching row ranked by FTS5's bm25(), best first (ties: lower rowid)."""
    rows = conn.execute(
        "SELECT rowid, bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ?",
        (match_expression(phrases),),
    ).fetchall()
    return sorted(((int(r), float(s)) for r, s in rows), key=lambda x: (x[1], x[0]))[:k]


def build(root: Path, size: int) -> Path:
    """An index of ``size`` chunks as bench_search builds it (its workspace, settings and embedder)."""
    from bench_search import settings

    from sessionmem.memory.embed.embedder import EmbedderSelection
    from sessionmem.memory.index import MemoryIndex

    ws = root / "workspace"
    write_chunky_workspace(ws, size)
    selection = EmbedderSelection(HashEmbedder(), "bench")
    with MemoryIndex.open("bench", ws, settings(), state_dir=root / "state", selection=selection) as index:
        index.sync()
        return Path(index.path)


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--index", help="a bench_search index kept with --keep (its bench.sqlite)")
    p.add_argument(
        "--size", type=int, default=20_000, help="without --index: chunks to index (default 20000)"
    )
    p.add_argument("--queries", type=int, default=200, help="queries (default 200, bench_search's)")
    args = p.parse_args()
    n_queries = 10 if args.smoke else 40 if args.quick else args.queries
    header("Keyword ranking from postings in memory vs FTS5 (bench_keyword_postings.py)", args)
    with contextlib.ExitStack() as stack:
        if args.index:
            path = Path(args.index)
        else:
            size = 300 if args.smoke else 2000 if args.quick else args.size
            path = build(Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-kw-"))), size)
        run(path, n_queries)
    footer()


def run(path: Path, n_queries: int) -> None:
    conn, _ = connect(path, load_vector=False)
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.vocab USING fts5vocab(main, chunks_fts, 'instance')"
    )
    rows, avg = fts_totals(conn)
    queries = make_queries(conn, n_queries, HashEmbedder())
    tokenizer = Tokenizer(table_tokenizer(conn))
    start = time.perf_counter()
    ranker = PostingsRanker(rows, avg, lengths(conn))
    lengths_s = time.perf_counter() - start
    keywords = KeywordIndex(conn)
    held: dict[str, Postings] = {}
    read_ms: list[float] = []
    fts_ms: list[float] = []
    mem_ms: list[float] = []
    same = single = 0
    for query in queries:
        phrases = fts_phrases(query)
        tokens = tokenizer.tokens([phrase_text(p) for p in phrases])
        if not phrases or any(len(t) != 1 for t in tokens):
            continue
        single += 1
        for (token,) in tokens:
            if token not in held:
                start = time.perf_counter()
                held[token] = postings(conn, token)
                read_ms.append((time.perf_counter() - start) * 1000)
        for p in phrases:
            keywords.hits(p)  # counted before timing, as a warm index has them
        start = time.perf_counter()
        keywords.search(phrases, KeywordFilters(), HYBRID_K)
        fts_ms.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        found = ranker.top([held[t] for (t,) in tokens], HYBRID_K)
        mem_ms.append((time.perf_counter() - start) * 1000)
        expected = reference(conn, phrases, HYBRID_K)
        same += [r for r, _ in found] == [r for r, _ in expected] and all(
            abs(a - b) <= 1e-9 for (_, a), (_, b) in zip(found, expected, strict=True)
        )
    held_mb = sum(d.nbytes + c.nbytes for d, c in held.values()) / 2**20
    print(
        f"Index: {rows:,} chunks, {avg:.1f} tokens each on average. Row lengths read in {lengths_s:.1f} s "
        f"({ranker.norm.nbytes / 2**20:.0f} MB). Postings of the {len(held)} query words: {held_mb:.0f} MB "
        f"(int64 ids, float64 counts), read in {sum(read_ms) / 1000:.1f} s.\n"
    )
    fts, mem, read = stats(fts_ms), stats(mem_ms), stats(read_ms)
    print(
        table(
            ["queries", "SQLite keyword search (FTS5) p50 / p95 ms", "postings in memory p50 / p95 ms",
             "postings top k = FTS5's full ranking", "reading one word's postings p50 / p95 ms"],
            [[f"{single}/{len(queries)}", f"{fts.p50:.2f} / {fts.p95:.2f}", f"{mem.p50:.2f} / {mem.p95:.2f}",
              f"{same}/{single}", f"{read.p50:.2f} / {read.p95:.2f}"]],
        )
    )  # fmt: skip
    conn.close()


if __name__ == "__main__":
    main()
