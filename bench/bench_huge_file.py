"""One huge memory file: a fresh FTS-only sync of an 11 MB single-line note on each index store.

The file is ``tests/memory/test_index.py``'s ``huge.md`` (the numbers 0 to 1,599,999, space-separated):
about 7,300 chunks, and as many distinct tokens as words (1.6 million), the worst case for a store that
keeps a row per distinct token. The test checks what this file does (every part found); its time is
measured here. Each store: a fresh index (a new state folder; on PostgreSQL a new schema of the server
``SESSIONMEM_TEST_PG_DSN``, default ``postgresql://postgres@127.0.0.1:5432/test``, dropped afterwards),
``MemoryIndex.sync()`` wall time, ``--runs`` times.

    python bench/bench_huge_file.py              # SQLite and PostgreSQL, 3 runs each
    python bench/bench_huge_file.py --quick      # one run each, a 160,000-word file
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import footer, header, parser, stats, table

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"


@contextlib.contextmanager
def store_path(kind: str) -> Iterator[str | None]:
    """``memorySearch.store.path`` for ``kind`` (None: the SQLite default); a PostgreSQL schema is
    dropped on exit."""
    if kind == "sqlite":
        yield None
        return
    import psycopg
    from psycopg import sql

    dsn = os.environ.get("SESSIONMEM_TEST_PG_DSN") or DEFAULT_DSN
    schema = f"bench_huge_{uuid.uuid4().hex[:10]}"
    try:
        yield f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def sync_once(workspace: Path, state: Path, kind: str) -> tuple[float, int]:
    """A fresh index's first sync: (seconds, chunks written)."""
    from sessionmem.config import MemorySearchConfig
    from sessionmem.memory.embed.embedder import EmbedderSelection
    from sessionmem.memory.index import MemoryIndex

    with store_path(kind) as path:
        settings = MemorySearchConfig.model_validate({"store": {"path": path}} if path else {})
        selection = EmbedderSelection(None, "none", reason="keyword-only benchmark")
        with MemoryIndex.open(
            "main", workspace, settings, state_dir=state, selection=selection, watch=False
        ) as index:
            start = time.perf_counter()
            report = index.sync()
            return time.perf_counter() - start, report.chunks_written


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3, help="syncs per store (default 3)")
    p.add_argument(
        "--stores", default="sqlite,postgresql", help="comma-separated (default sqlite,postgresql)"
    )
    args = p.parse_args()
    words = 20_000 if args.smoke else 160_000 if args.quick else 1_600_000
    runs = 1 if args.quick else args.runs
    header("One huge memory file (bench_huge_file.py)", args)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-huge-") as tmp_name:
        tmp = Path(tmp_name)
        workspace = tmp / "ws"
        (workspace / "memory").mkdir(parents=True)
        text = " ".join(str(i) for i in range(words))
        (workspace / "memory" / "huge.md").write_text(text, encoding="utf-8")
        for kind in args.stores.split(","):
            times, chunks = [], 0
            for run in range(runs):
                seconds, chunks = sync_once(workspace, tmp / f"state-{kind}-{run}", kind)
                times.append(seconds)
            s = stats(times)
            rows.append(
                [
                    kind,
                    f"{len(text.encode()) / 1e6:.1f} MB",
                    f"{words:,}",
                    chunks,
                    f"{s.p50:.1f}",
                    f"{max(times):.1f}",
                    s.n,
                ]
            )
    print(table(["store", "file", "distinct tokens", "chunks", "p50 (s)", "max (s)", "runs"], rows))
    footer()


if __name__ == "__main__":
    main()
