"""Search latency at 1k, 10k and 100k chunks: keyword (FTS5), each vector path, and hybrid.

Each size runs in its own child process (so its peak RSS is its own): a synthetic workspace is
written, indexed through ``MemoryIndex.sync`` with a hash embedder (384-d pseudo-random vectors),
then the same queries are timed on every path. Query vectors are computed before timing, so the
latencies exclude query embedding. See bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from sessionmem.memory.search.query_terms import STOP_WORDS_EN

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    HashEmbedder,
    footer,
    header,
    parser,
    peak_rss_mb,
    stats,
    table,
    timed_each,
    verdict,
    write_chunky_workspace,
)

SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (1_000, 5_000)
SMOKE_SIZES = (300,)
K = 24  # neighbours asked of each vector path alone
HYBRID_K = 120  # candidates the default request asks each side for (searcher.candidate_count)
HYBRID_P95_TARGET_MS = 25.0  # up to 100k chunks (README)
HYBRID_P95_TARGET_1M_MS = 60.0  # from 1M chunks (issue 18, with keyword p95 <= 40 ms)


def hybrid_target(chunks: int) -> float:
    """The hybrid search's p95 target at ``chunks``: 25 ms to 100k chunks, 60 ms at 1M."""
    return HYBRID_P95_TARGET_1M_MS if chunks >= 1_000_000 else HYBRID_P95_TARGET_MS


QUESTIONS = (
    "when did we talk about the {a} and the {b}?",
    "what was decided about {a} {b}",
    "why did the {a} need a {b}",
    "remind me what we said about {a} for {b}",
)


def settings() -> Any:
    from sessionmem.config import ChunkingConfig, MemorySearchConfig

    return MemorySearchConfig(chunking=ChunkingConfig(tokens=128, overlap=0))


def make_queries(conn: Any, n: int, embedder: HashEmbedder, seed: int = 3) -> list[str]:
    """``n`` queries built from random chunks: half keyword pairs, half natural questions.

    Each query's vector is its source chunk's vector plus noise (cosine ~0.7), registered with the
    embedder so that timing a search never embeds.
    """
    rng = random.Random(seed)
    (max_rowid,) = conn.execute("SELECT max(rowid) FROM chunks").fetchone()
    queries: list[str] = []
    nprng = np.random.default_rng(seed)
    while len(queries) < n:
        row = conn.execute(
            "SELECT text, embedding FROM chunks WHERE rowid = ?", (rng.randint(1, max_rowid),)
        ).fetchone()
        if row is None:
            continue
        words = [w for w in re.findall(r"[a-z]{3,}", row[0].lower()) if w not in STOP_WORDS_EN]
        if len(words) < 2:
            continue
        a, b = rng.sample(words, 2)
        text = f"{a} {b}" if len(queries) % 2 == 0 else rng.choice(QUESTIONS).format(a=a, b=b)
        vec = (
            np.frombuffer(row[1], dtype="<f4") + nprng.standard_normal(embedder.dims).astype(np.float32) / 20
        )
        embedder.precompute(text, vec / np.linalg.norm(vec))
        queries.append(text)
    return queries


def run_one(
    size: int,
    n_queries: int,
    brute_queries: int,
    root: Path,
    reuse: bool,
    store: str | None = None,
    sql_paths: bool = True,
    after_write: int = 0,
) -> dict[str, Any]:
    """Build (or with ``reuse``, reopen) the index of ``size`` chunks under ``root`` and time the paths.
    A workspace already under ``root`` (``--keep``) is not written again: its sync finds nothing to do.

    ``reuse`` is the second child of a size, run with one BLAS thread: it times only the matrix scan
    and the hybrid search on the index the first child built, for the side-by-side comparison.
    ``store`` (a postgresql:// DSN): the index in PostgreSQL, schema ``bench_search_<size>`` (dropped by
    the parent); there the paths are the matrix and keyword search (no sqlite-vec, and brute force
    would read every vector over the connection per query). Without ``sql_paths`` neither sqlite-vec
    nor brute force is timed (each reads every vector per query: 1.5 GB at 1M chunks). ``after_write``
    (PostgreSQL): that many hybrid searches right after another host wrote a note, with the change log
    and without.
    """
    from sessionmem.memory.embed.embedder import EmbedderSelection
    from sessionmem.memory.index import MemoryIndex
    from sessionmem.memory.search.records import SearchRequest
    from sessionmem.memory.search.searcher import Searcher
    from sessionmem.memory.search.vectors import VectorRouter
    from sessionmem.memory.store import sqlite_keywords
    from sessionmem.memory.store.database import connect

    out: dict[str, Any] = {"size": size}
    ws = root / "workspace"
    out["kept"] = (ws / "memory").is_dir()
    if not reuse and not out["kept"]:
        t0 = time.perf_counter()
        out["files"] = write_chunky_workspace(ws, size)
        out["write_s"] = time.perf_counter() - t0
    out["files"] = len(list((ws / "memory").iterdir()))

    embedder = HashEmbedder()
    cfg = settings()
    if store:
        cfg = cfg.model_copy(update={"store": cfg.store.model_copy(update={"path": pg_dsn(store, size)})})
    index = MemoryIndex.open(
        "bench", ws, cfg, state_dir=root / "state", selection=EmbedderSelection(embedder, "bench")
    )
    try:
        t0 = time.perf_counter()
        report = index.sync()
        out["index_s"] = time.perf_counter() - t0
        out["written"] = report.chunks_written
        if store:
            from sessionmem.memory.store.index_postgres import PgStore

            conn: Any = PgStore.connect(index.path, cfg.store.fts.tokenizer)  # type: ignore[arg-type]
            support = conn.vector
            (size_bytes,) = conn.execute(
                "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n"
                " ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r'"
            ).fetchone()
            out["db_mb"] = int(size_bytes) / 2**20
            out["vector_driver"] = f"PostgreSQL {conn.conn.info.server_version}, no pgvector"
        else:
            out["db_mb"] = index.path.stat().st_size / 2**20
            conn, support = connect(index.path, load_vector=True)
            out["vector_driver"] = f"{support.driver}, sqlite-vec {support.version}"
        (out["chunks"],) = conn.execute("SELECT count(*) FROM chunks").fetchone()
        queries = make_queries(conn, n_queries, embedder)
        vectors = [embedder.embed_query(q) for q in queries]

        router = VectorRouter(conn, support)
        t0 = time.perf_counter()
        router.warm(embedder.model)
        out["matrix_load_ms"] = (time.perf_counter() - t0) * 1000
        out["matrix_mb"] = router.matrix.nbytes / 2**20
        src = ("memory",)
        model = embedder.model

        def path_timer(path: Any) -> Any:
            return lambda v: path.knn(v, K, model=model, sources=src)

        paths: dict[str, tuple[Any, list[Any]]] = {"matrix": (router.matrix, vectors)}
        if not reuse and not store and sql_paths:
            paths["sqlite-vec"] = (router.sqlite_vec, vectors)
            paths["brute-force"] = (router.brute_force, vectors[:brute_queries])
        # The paths must agree on the nearest chunk (a benchmark of wrong answers is worthless).
        for v in vectors[:5]:
            tops = {name: p.knn(v, 1, model=model, sources=src)[0][0] for name, (p, _) in paths.items()}
            assert len(set(tops.values())) == 1, tops
        for name, (path, vecs) in paths.items():
            path.knn(vecs[0], K, model=model, sources=src)  # warm caches
            out[f"vec_{name}"] = timed_each(path_timer(path), vecs)
        # A large matrix scores only the rows its sign bits choose (sign_codes.py): how many of the
        # exact top k it finds, at the vector side's k and at the hybrid search's candidate count.
        matrix = router.matrix
        out["vec_matrix_exact"] = timed_each(lambda v: matrix.scan(v, K, sources=src, exact=True), vectors)
        for k in (K, HYBRID_K):
            found = [
                len(
                    {h[0] for h in matrix.scan(v, k, sources=src)}
                    & {h[0] for h in matrix.scan(v, k, sources=src, exact=True)}
                )
                / k
                for v in vectors
            ]
            out[f"matrix_recall_{k}"] = sum(found) / len(found)

        # SQLite keeps a large index's common words in memory (the keyword matrix, keyword_postings):
        # keyword and hybrid search are timed without it first (FTS5 alone, as before), then with it.
        held_from = sqlite_keywords.MATRIX_MIN_ROWS
        if not reuse:
            fts = Searcher(conn, None, cfg, support)
            sqlite_keywords.MATRIX_MIN_ROWS = sys.maxsize
            fts.search(SearchRequest(queries[0]))
            found = [0]
            answers: dict[str, list[tuple[str, int]]] = {}  # query -> its results, FTS5 alone
            same = [0]

            def fts_search(q: Any) -> None:
                results = fts.search(SearchRequest(q)).results
                found[0] += bool(results)
                answer = [(r.path, r.start_line) for r in results]
                same[0] += answers.setdefault(q, answer) == answer

            out["fts"] = timed_each(fts_search, queries)
            out["fts_found"] = found[0]
            sqlite_keywords.MATRIX_MIN_ROWS = held_from
            if not store:
                t0 = time.perf_counter()
                fts.warm_keywords()
                out["kw_matrix_load_ms"] = (time.perf_counter() - t0) * 1000
                found[0] = same[0] = 0
                out["fts_kwmatrix"] = timed_each(fts_search, queries)
                out["fts_kwmatrix_found"] = found[0]
                out["fts_kwmatrix_same"] = same[0]  # results as FTS5 alone gave them

        # The first search starts loading the matrix (in the background for a large index, while
        # sqlite-vec answers); time the matrix path only once it serves, and check it still did after.
        out["matrix_ready_ms"] = wait_for_matrix(index, queries[0]) * 1000
        hits = [0]

        def hybrid(q: Any) -> None:
            hits[0] += bool(index.search(SearchRequest(q)).results)

        if not reuse and not store:
            sqlite_keywords.MATRIX_MIN_ROWS = sys.maxsize
            out["hybrid_fts5"] = timed_each(hybrid, queries)
            sqlite_keywords.MATRIX_MIN_ROWS = held_from
            hits[0] = 0
        index.warm_keywords()  # a large index's keyword matrix, before it is timed
        out["hybrid_matrix"] = timed_each(hybrid, queries)
        out["hybrid_found"] = hits[0]
        assert served_by(index, queries[-1]) == {"matrix"}, served_by(index, queries[-1])
        if not reuse:
            # A group's view (DESIGN 14): half the chunks become the owner's, and every query filters
            # them out inside the keyword SQL and the matrix mask, before ranking.
            from sessionmem.privacy import reader_visibility

            group = reader_visibility("agent:bench:discord:group:1")
            conn.execute("UPDATE chunks SET audience = 'owner' WHERE rowid % 2 = 0")
            wait_for_matrix(index, queries[0])
            index.warm_keywords()  # the keyword matrix reloads after the write
            seen = [0]

            def group_hybrid(q: Any) -> None:
                results = index.search(SearchRequest(q, visibility=group)).results
                seen[0] += bool(results)

            out["hybrid_group"] = timed_each(group_hybrid, queries)
            out["group_found"] = seen[0]
            conn.execute("UPDATE chunks SET audience = 'shared'")
        if store and after_write and not reuse:
            out.update(time_after_write(ws, cfg, root, embedder, queries, after_write))
        if not reuse:
            out["writing_sync"] = time_writing_syncs(index, ws, 3 if n_queries < 50 else 10)
        if not reuse and not store and sql_paths:
            stale = Searcher(conn, embedder, cfg, support, preload_matrix=False)
            assert stale.vector_path.name == "sqlite-vec", stale.vector_path
            stale.search(SearchRequest(queries[0]))
            out["hybrid_sqlite_vec"] = timed_each(lambda q: stale.search(SearchRequest(str(q))), queries)
        conn.close()
    finally:
        index.close()
    out["peak_rss_mb"] = peak_rss_mb()
    return out


def time_writing_syncs(index: Any, ws: Path, reps: int) -> list[float]:
    """``reps`` syncs, each after a line appended to one note: what a flush writing today's log costs the
    index (the note's chunk again, and the calibration's check of the vector count). The note is
    removed afterwards, so a kept workspace stays as it was written."""
    note = ws / "memory" / "bench-writing-sync.md"
    times: list[float] = []
    try:
        for i in range(reps):
            with note.open("a", encoding="utf-8") as f:
                f.write(f"- write {i}: the ledger cutover moved to thursday\n")
            start = time.perf_counter()
            index.sync()
            times.append((time.perf_counter() - start) * 1000)
    finally:
        note.unlink(missing_ok=True)
        index.sync()
    return times


def time_after_write(
    ws: Path, cfg: Any, root: Path, embedder: HashEmbedder, queries: list[str], reps: int
) -> dict[str, Any]:
    """Host B searches right after host A wrote one note, ``reps`` times: two more ``MemoryIndex`` on
    the index (watching no files and syncing on no search, so B's time is its search alone). First with
    the change log trimmed past B before each search (what every write cost before the log: B loads
    every row), then as it is (B reads the rows written since its matrix loaded)."""
    from sessionmem.memory.embed.embedder import EmbedderSelection
    from sessionmem.memory.index import MemoryIndex
    from sessionmem.memory.search.records import SearchRequest
    from sessionmem.memory.store.index_postgres import PgStore

    quiet = cfg.model_copy(update={"sync": cfg.sync.model_copy(update={"watch": False, "on_search": False})})

    def host(name: str) -> Any:
        selection = EmbedderSelection(embedder, "bench")
        return MemoryIndex.open("bench", ws, quiet, state_dir=root / name, selection=selection, watch=False)

    out: dict[str, Any] = {}
    notes: list[Path] = []
    with host("host-a") as host_a, host("host-b") as host_b:
        sql = PgStore.connect(host_b.path, cfg.store.fts.tokenizer)
        try:
            host_b.search(SearchRequest(queries[0]))  # B's matrix loads once
            steady: list[float] = []  # the same search again, nothing written since: the paired baseline
            for kind, full in (("after_write_full", True), ("after_write_changes", False)):
                times: list[float] = []
                read: list[int] = []
                for i in range(reps):
                    note = ws / "memory" / f"after-write-{kind}-{i}.md"
                    notes.append(note)
                    note.write_text(f"- host A wrote note {i} of the {kind} run\n")
                    host_a.sync()
                    if full:
                        with sql.atomic():  # the log no longer reaches back to what B holds
                            sql.execute(
                                "UPDATE meta SET value = (SELECT value::bigint + 1 FROM meta"
                                " WHERE key = 'write_generation')::text WHERE key = 'changes_from'"
                            )
                    before = host_b.vector_path().rows_read
                    start = time.perf_counter()
                    host_b.search(SearchRequest(queries[i % len(queries)]))
                    times.append((time.perf_counter() - start) * 1000)
                    read.append(host_b.vector_path().rows_read - before)
                    if not full:
                        start = time.perf_counter()
                        host_b.search(SearchRequest(queries[i % len(queries)]))
                        steady.append((time.perf_counter() - start) * 1000)
                assert served_by(host_b, queries[0]) == {"matrix"}, served_by(host_b, queries[0])
                out[kind] = {"ms": times, "rows_read": read}
            out["after_write_none"] = {"ms": steady, "rows_read": [0] * len(steady)}
        finally:
            sql.close()
            for note in notes:  # a kept workspace (--keep) stays as it was written
                note.unlink(missing_ok=True)
    return out


def served_by(index: Any, query: str) -> set[str]:
    """The vector paths that served ``query``'s results (from ``explain``)."""
    from sessionmem.memory.search.records import SearchRequest

    response = index.search(SearchRequest(query, explain=True))
    return {
        r.explanation.vector_path for r in response.results if r.explanation and r.explanation.vector_path
    }


def wait_for_matrix(index: Any, query: str, timeout: float = 900.0) -> float:
    """Search until the in-memory matrix serves; seconds from the first search to then."""
    start = time.perf_counter()
    while "matrix" not in served_by(index, query):
        if time.perf_counter() - start > timeout:
            raise SystemExit(f"the in-memory matrix did not serve within {timeout:.0f} s")
        time.sleep(0.02)
    return time.perf_counter() - start


def pg_dsn(store: str, size: int) -> str:
    """``store`` with the schema of the ``size`` run."""
    return f"{store}{'&' if '?' in store else '?'}schema=bench_search_{size}"


def drop_schema(store: str, size: int) -> None:
    import psycopg
    from psycopg import sql

    from sessionmem.dsn import pg_target

    target = pg_target(pg_dsn(store, size), "bench")
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(target.schema)))


def child(
    size: int,
    n_queries: int,
    root: Path,
    *,
    quick: bool,
    one_thread: bool,
    store: str | None = None,
    sql_paths: bool = True,
    after_write: int = 0,
) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--one", str(size), "--queries", str(n_queries), "--dir", str(root)]
    if not sql_paths:
        cmd.append("--matrix-only")
    if store:
        cmd += ["--store", store, "--after-write", str(after_write)]
    env = dict(os.environ)
    if one_thread:
        cmd.append("--reuse")
        env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = "1"
    if quick:
        cmd.append("--quick")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"size {size} failed")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def print_after_write(results: list[dict[str, Any]]) -> None:
    print(
        "\n### Host B's next hybrid search after host A wrote one note (two MemoryIndex, one schema)\n\n"
        "Host A writes a note and syncs; host B's next hybrid search is timed (p50 / p95, ms). Every row: "
        "the change log trimmed past B before each search, so B loads every vector (what every write "
        "cost before the log). Changed rows: B reads the rows written since its matrix loaded. No write "
        "since: right after each of those, the same search again, as a baseline under the same load.\n"
    )
    rows = []
    for r in results:
        for key, label in (
            ("after_write_full", "every row (before)"),
            ("after_write_changes", "changed rows"),
            ("after_write_none", "no write since (the same search again)"),
        ):
            if key in r:
                s, read = stats(r[key]["ms"]), stats(r[key]["rows_read"])
                h95 = s.p95
                rows.append(
                    [
                        f"{r['chunks']:,}",
                        label,
                        f"{s.p50:.2f} / {s.p95:.2f} (n={s.n})",
                        f"{read.p50:,.0f}",
                        f"{verdict(h95, hybrid_target(r['chunks']))} <= {hybrid_target(r['chunks']):.0f}",
                    ]
                )
    headers = ["chunks", "matrix reads", "search p50 / p95 (ms)", "rows read (median)", "p95 target"]
    print(table(headers, rows))


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--sizes", help="comma-separated chunk counts (default 1000,10000,100000)")
    p.add_argument("--queries", type=int, default=200, help="queries per path (default 200)")
    p.add_argument("--one", type=int, help=argparse.SUPPRESS)
    p.add_argument("--dir", help=argparse.SUPPRESS)
    p.add_argument("--reuse", action="store_true", help=argparse.SUPPRESS)
    p.add_argument(
        "--matrix-only",
        action="store_true",
        help="time no sqlite-vec or brute-force path (each reads every vector per query: minutes at 1M)",
    )
    p.add_argument(
        "--keep",
        help="a folder for the indexes (one per size, s<size>/), kept afterwards: a later run with the same "
        "folder reuses them instead of building again (a 1M index takes ~6 minutes to build)",
    )
    p.add_argument(
        "--store",
        help="a postgresql:// DSN: the index in PostgreSQL (a schema per size, dropped afterwards); "
        "times keyword search, the matrix and hybrid search",
    )
    p.add_argument(
        "--after-write",
        type=int,
        default=30,
        metavar="N",
        help="with --store: N hybrid searches by one host right after another host wrote a note, "
        "reading the changed rows and (as before the change log) every row (default 30; 0: skip)",
    )
    args = p.parse_args()
    after_write = min(args.after_write, 3) if args.smoke else args.after_write
    n_queries = 10 if args.smoke else 40 if args.quick else args.queries
    if args.one:
        brute = n_queries if args.one <= 10_000 else max(20, n_queries // 4)
        result = run_one(
            args.one, n_queries, brute, Path(args.dir), args.reuse, args.store, not args.matrix_only,
            after_write,
        )  # fmt: skip
        print(json.dumps(result))
        return
    sizes = (
        tuple(int(s) for s in args.sizes.split(","))
        if args.sizes
        else (SMOKE_SIZES if args.smoke else QUICK_SIZES if args.quick else SIZES)
    )
    header("Memory search latency (bench_search.py)", args)
    print(
        "Synthetic workspace: Zipf vocabulary of 20,000 words (English function words at the head); "
        "100 chunks per file, each a 490-510-character bullet (chunking.tokens=128, overlap 0); "
        "384-d pseudo-random vectors from a hash embedder; "
        f"{n_queries} queries (half keyword pairs, half natural questions) drawn from random chunks; "
        f"k={K} neighbours per vector-only query (a hybrid search asks each side for {HYBRID_K}). Query "
        "vectors are precomputed: latencies exclude query embedding. Each size runs in a fresh process.\n"
    )
    results, single = [], []
    for size in sizes:
        with contextlib.ExitStack() as stack:
            if args.keep:
                tmp = Path(args.keep) / f"s{size}"
                tmp.mkdir(parents=True, exist_ok=True)
            else:
                tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-search-")))
            try:
                results.append(
                    child(
                        size,
                        n_queries,
                        tmp,
                        quick=args.quick,
                        one_thread=False,
                        store=args.store,
                        sql_paths=not args.matrix_only,
                        after_write=after_write,
                    )
                )
                if not args.store:
                    single.append(child(size, n_queries, tmp, quick=args.quick, one_thread=True))
            finally:
                if args.store and not args.keep:
                    drop_schema(args.store, size)
    if args.store:
        print(f"Index store: PostgreSQL, {results[-1]['vector_driver']}.\n")

    print("### Building the index through MemoryIndex.sync\n")
    print(
        table(
            [
                "chunks",
                "files",
                "index build (s)",
                "chunks/s",
                "DB size (MB)",
                "matrix load (ms)",
                "first search to matrix serving (ms)",
                "matrix (MB)",
                "keyword matrix load (ms)",
            ],
            [
                [
                    f"{r['chunks']:,}",
                    f"{r['files']:,}",
                    f"{r['index_s']:.1f}" + (" (kept index: sync only)" if r["kept"] else ""),
                    f"{r['chunks'] / r['index_s']:,.0f}" if not r["kept"] else "-",
                    f"{r['db_mb']:.0f}",
                    f"{r['matrix_load_ms']:.0f}",
                    f"{r['matrix_ready_ms']:.0f}",
                    f"{r['matrix_mb']:.0f}",
                    f"{r['kw_matrix_load_ms']:.0f}" if "kw_matrix_load_ms" in r else "-",
                ]
                for r in results
            ],
        )
    )
    print("\n### Query latency, ms (p50 / p95)\n")
    names = [
        ("fts", "keyword (FTS-only search), FTS5 alone (before)"),
        ("fts_kwmatrix", "keyword (FTS-only search), common words from the keyword matrix"),
        ("vec_matrix", "vector: in-memory matrix"),
        ("vec_matrix_exact", "vector: in-memory matrix, every row scored (the reference)"),
        ("vec_sqlite-vec", "vector: sqlite-vec KNN"),
        ("vec_brute-force", "vector: brute force"),
        ("hybrid_fts5", "hybrid search (matrix path), keywords by FTS5 alone (before)"),
        ("hybrid_matrix", "hybrid search (matrix path and keyword matrix, the default)"),
        ("hybrid_sqlite_vec", "hybrid search (sqlite-vec path, matrix stale)"),
        ("hybrid_group", "hybrid search, a group's view (half the chunks private, filtered in the query)"),
        ("writing_sync", "a sync after a line appended to a note (its chunk again, vectors counted)"),
    ]
    rows = []
    for key, label in names:
        if key not in results[-1]:
            continue  # not a path of this store
        cells = [label]
        for r in results:
            s = stats(r[key])
            cells.append(f"{s.p50:.2f} / {s.p95:.2f} (n={s.n})")
        rows.append(cells)
    print(table(["path"] + [f"{r['chunks']:,} chunks" for r in results], rows))
    print("\n### Memory and ratios\n")
    rows = []
    for r in results:
        m = stats(r["vec_matrix"]).p50
        ratios = [
            f"{stats(r[k]).p50 / m:.1f}x" if k in r else "-" for k in ("vec_sqlite-vec", "vec_brute-force")
        ]
        h95 = stats(r["hybrid_matrix"]).p95
        rows.append(
            [
                f"{r['chunks']:,}",
                f"{r['peak_rss_mb']:.0f}",
                *ratios,
                f"{r['fts_found']}/{len(r['fts'])}"
                + (
                    f" ({r['fts_kwmatrix_found']} with the keyword matrix, {r['fts_kwmatrix_same']} of them"
                    " the same results as FTS5 alone)"
                    if "fts_kwmatrix" in r
                    else ""
                ),
                f"{r['hybrid_found']}/{len(r['hybrid_matrix'])}",
                f"{h95:.2f} ({verdict(h95, hybrid_target(r['chunks']))} <= {hybrid_target(r['chunks']):.0f})",
                f"{r['matrix_recall_' + str(K)]:.3f} / {r['matrix_recall_' + str(HYBRID_K)]:.3f}",
            ]
        )
    print(
        table(
            [
                "chunks",
                "peak RSS (MB)",
                "sqlite-vec / matrix (p50)",
                "brute force / matrix (p50)",
                "FTS queries with results",
                "hybrid queries with results",
                "hybrid p95 ms (target)",
                f"matrix: share of the exact top {K} / top {HYBRID_K} found",
            ],
            rows,
        )
    )
    print(f"\nVector driver: {results[-1]['vector_driver']}.")
    if any("after_write_changes" in r for r in results):
        print_after_write(results)
    if not single:
        footer()
        return
    print(
        "\n### BLAS threads: numpy's default vs one thread (same index, same queries, run right after)\n\n"
        "The matrix scan uses numpy's own einsum loop rather than BLAS, so that multi-threaded OpenBLAS "
        "workers left spinning after a product cannot slow the next FTS5 query on 2 cores; if the two "
        "columns agree, nothing in search depends on BLAS threading.\n"
    )
    rows = []
    for r, o in zip(results, single, strict=True):
        for key, label in (("vec_matrix", "matrix scan"), ("hybrid_matrix", "hybrid search")):
            dflt, one = stats(r[key]), stats(o[key])
            rows.append(
                [
                    f"{r['chunks']:,}",
                    label,
                    f"{dflt.p50:.2f} / {dflt.p95:.2f}",
                    f"{one.p50:.2f} / {one.p95:.2f}",
                ]
            )
    print(
        table(
            ["chunks", "what", "default threads p50 / p95 (ms)", "OPENBLAS_NUM_THREADS=1 p50 / p95 (ms)"],
            rows,
        )
    )
    footer()


if __name__ == "__main__":
    main()
