"""Hostile queries: search time for 20 KB / 200 KB / 1 MB queries and 10,000 / 40,000 / 100,000-character
single words, and how long another thread of the process stalled meanwhile.

A workspace of 300 notes is indexed once (FTS-only SQLite by default, ``--store DSN`` for PostgreSQL);
then each query is searched in a child process of its own, through ``MemoryIndex.search`` (the path the
``memory_search`` tool, the CLI and the MCP server share), after one warm-up search, so a query that
never ends is stopped at ``--limit`` seconds and reported as such. A thread that wakes every millisecond
runs beside the search: its longest gap is how long the search held the interpreter lock (every other
session of a gateway process waits that long). The long queries are distinct made-up words (each one a
keyword), the long words one letter repeated. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import footer, header, parser, table, write_notes

QUERIES = {  # key: (what the table calls it, kind, size in characters)
    "query20k": ("20 KB query", "words", 20_000),
    "query200k": ("200 KB query", "words", 200_000),
    "query1m": ("1 MB query", "words", 1_000_000),
    "word10k": ("10,000-character word", "word", 10_000),
    "word40k": ("40,000-character word", "word", 40_000),
    "word100k": ("100,000-character word", "word", 100_000),
}
QUICK = ("query20k", "word10k")
NOTES = 300
DEFAULT_LIMIT_S = 900.0


def make_query(kind: str, size: int) -> str:
    """``size`` characters: distinct words after a real question, or one letter repeated."""
    if kind == "word":
        return "k" * size
    words = ["when", "is", "the", "billing", "cutover"]
    length = len(" ".join(words))
    while length < size:
        words.append(f"zq{len(words):06d}")
        length += len(words[-1]) + 1
    text = " ".join(words)[:size]
    return text[:-1] + "q" if text.endswith(" ") else text  # size characters once stripped


def settings(store: str | None) -> Any:
    from sessionmem.config import MemorySearchConfig

    config = MemorySearchConfig(provider="none")
    if store:
        config = config.model_copy(update={"store": config.store.model_copy(update={"path": store})})
    return config


SCHEMA = "bench_hostile"


def pg_dsn(store: str) -> str:
    """``store`` with this script's own schema (dropped at the end)."""
    return f"{store}{'&' if '?' in store else '?'}schema={SCHEMA}"


def drop_schema(store: str) -> None:
    import psycopg
    from psycopg import sql

    from sessionmem.dsn import pg_target

    target = pg_target(pg_dsn(store), "bench")
    conninfo = getattr(target, "conninfo", None) or target.dsn  # older releases named it dsn
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(target.schema)))


def open_index(workspace: Path, state: Path, store: str | None) -> Any:
    from sessionmem.memory.embed.embedder import EmbedderSelection
    from sessionmem.memory.index import MemoryIndex

    none = EmbedderSelection(None, "none", reason="bench: keyword search")
    return MemoryIndex.open("main", workspace, settings(store), state_dir=state, selection=none)


class Ticker:
    """A thread that sleeps 1 ms at a time; ``longest`` is its longest wait between two wake-ups."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        last = time.perf_counter()
        while not self._stop.is_set():
            time.sleep(0.001)
            now = time.perf_counter()
            self.longest = max(self.longest, now - last)
            last = now

    def __enter__(self) -> Ticker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run_case(args: argparse.Namespace) -> None:
    """Child process: one timed search; prints one JSON line."""
    _, kind, size = QUERIES[args.case]
    query = make_query(kind, size)
    from sessionmem.memory.search.records import SearchRequest

    with open_index(Path(args.workspace), Path(args.state), args.store) as index:
        index.search(SearchRequest("billing"))  # warm: the first search loads what every later one uses
        with Ticker() as ticker:
            start = time.perf_counter()
            response = index.search(SearchRequest(query))
            seconds = time.perf_counter() - start
    cut = getattr(response, "query_cut", None)  # not on code older than the bounds
    print(
        json.dumps(
            {
                "seconds": seconds,
                "stall": ticker.longest,
                "results": len(response.results),
                "cut": cut.note() if cut is not None else "",
            }
        )
    )


def code_under_test() -> str:
    """The commit of the sessionmem package imported (with ``PYTHONPATH`` it may not be this checkout's)."""
    import sessionmem

    folder = Path(sessionmem.__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "-C", str(folder), "status", "--porcelain", "--", "."], capture_output=True, text=True
        )
    except OSError:
        return str(folder)
    return f"{out.stdout.strip() or 'unknown'}{' (with uncommitted changes)' if dirty.stdout.strip() else ''}"


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument(
        "--store",
        help=f"a postgresql:// DSN: the index in PostgreSQL, schema {SCHEMA} (dropped after)",
    )
    p.add_argument("--limit", type=float, default=DEFAULT_LIMIT_S, help="seconds before a search is stopped")
    p.add_argument("--only", help=f"comma-separated subset of: {', '.join(QUERIES)}")
    p.add_argument("--case", help=argparse.SUPPRESS)
    p.add_argument("--workspace", help=argparse.SUPPRESS)
    p.add_argument("--state", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.case:
        run_case(args)
        return
    header("Hostile queries: search time and the stall of another thread", args)
    print(f"- sessionmem under test: commit {code_under_test()}")
    print(f"- index: {'PostgreSQL' if args.store else 'SQLite'}, {NOTES} notes, FTS-only")
    print(f"- each search stopped after {args.limit:g} s\n")
    names = QUICK if args.quick else tuple(QUERIES)
    if args.only:
        names = tuple(n.strip() for n in args.only.split(","))
        unknown = [n for n in names if n not in QUERIES]
        if unknown:
            raise SystemExit(f"unknown query: {', '.join(unknown)}; choose from {', '.join(QUERIES)}")
    if args.store:
        drop_schema(args.store)  # a run stopped midway left it
    try:
        rows = measure(args, names)
    finally:
        if args.store:
            drop_schema(args.store)
    print(table(["query", "search", "longest stall of another thread", "results", "what was cut"], rows))
    footer()


def measure(args: argparse.Namespace, names: tuple[str, ...]) -> list[list[Any]]:
    """Index the notes once, then search each query in a child process: one table row each."""
    store = pg_dsn(args.store) if args.store else None
    rows: list[list[Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        workspace, state = Path(tmp) / "workspace", Path(tmp) / "state"
        write_notes(workspace, NOTES)
        with open_index(workspace, state, store) as index:
            index.sync()
        for name in names:
            cmd = [sys.executable, __file__, "--case", name, "--workspace", str(workspace)]
            cmd += ["--state", str(state)]
            if store:
                cmd += ["--store", store]
            try:
                proc = subprocess.run(
                    cmd, capture_output=True, text=True, timeout=args.limit, env=dict(os.environ)
                )
            except subprocess.TimeoutExpired:
                rows.append([QUERIES[name][0], f"> {args.limit:g} s (stopped)", "", "", ""])
                continue
            if proc.returncode != 0:
                error = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "no output"
                rows.append([QUERIES[name][0], "failed", "", "", error[:120]])
                continue
            got = json.loads(proc.stdout.strip().splitlines()[-1])
            rows.append(
                [
                    QUERIES[name][0],
                    f"{got['seconds']:.3f} s",
                    f"{got['stall']:.3f} s",
                    got["results"],
                    got["cut"] or "-",
                ]
            )
    return rows


if __name__ == "__main__":
    main()
