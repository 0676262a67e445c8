"""Host B's hybrid search on a PostgreSQL index another host writes to: no write since, and right after one.

One synthetic index (``bench_search.py``'s workspace: 100k chunks of 384 d by default) in a schema of
the server (``--store``, default ``SESSIONMEM_TEST_PG_DSN`` or ``postgresql://postgres@127.0.0.1:5432/test``).
A child process opens two ``MemoryIndex`` on it, host A and host B (no file watching, no sync on search),
loads B's matrix once, then ``--queries`` times: A writes one note and syncs, B's next hybrid search is
timed ("after a write"), then B's search of another query, nothing written since ("no write"). Every
search is a query B has not run before (none of its words' counts are cached). Query embedding excluded.

``--against REV`` times the package of another commit (``git archive``) on the same index and queries in
the same run, alternating with this tree in ``--rounds`` rounds, so load changes fall on both alike.

    python bench/bench_pg_hosts_search.py                      # build (about 3 minutes) and time
    python bench/bench_pg_hosts_search.py --keep /tmp/pgs --against main   # before / after, kept index

Target: p95 <= 25 ms for both (the README's hybrid p95 at 100k chunks).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_search import HYBRID_P95_TARGET_MS, drop_schema, make_queries, pg_dsn, settings
from common import (
    REPO_ROOT,
    HashEmbedder,
    footer,
    git_commit,
    header,
    parser,
    stats,
    table,
    verdict,
    write_chunky_workspace,
)

DEFAULT_DSN = os.environ.get("SESSIONMEM_TEST_PG_DSN") or "postgresql://postgres@127.0.0.1:5432/test"


def open_host(ws: Path, cfg: Any, state: Path, embedder: HashEmbedder) -> Any:
    from sessionmem.memory.embed.embedder import EmbedderSelection
    from sessionmem.memory.index import MemoryIndex

    quiet = cfg.model_copy(update={"sync": cfg.sync.model_copy(update={"watch": False, "on_search": False})})
    return MemoryIndex.open(
        "bench", ws, quiet, state_dir=state, selection=EmbedderSelection(embedder, "bench"), watch=False
    )


def config(store: str, size: int) -> Any:
    cfg = settings()
    return cfg.model_copy(update={"store": cfg.store.model_copy(update={"path": pg_dsn(store, size)})})


def build(root: Path, store: str, size: int) -> dict[str, Any]:
    """The workspace (unless kept) and its index (a kept one: a sync that finds nothing to do)."""
    ws = root / "workspace"
    if not (ws / "memory").is_dir():
        write_chunky_workspace(ws, size)
    start = time.perf_counter()
    with open_host(ws, config(store, size), root / "builder", HashEmbedder()) as index:
        report = index.sync()
    return {"sync_s": time.perf_counter() - start, "written": report.chunks_written}


def time_searches(root: Path, store: str, size: int, n: int, offset: int) -> dict[str, Any]:
    """``n`` pairs (after a write, no write) by host B; queries ``offset``... of one fixed list."""
    from sessionmem.memory.search.records import SearchRequest
    from sessionmem.memory.store.index_postgres import PgStore

    ws = root / "workspace"
    cfg = config(store, size)
    embedder = HashEmbedder()
    reader = PgStore.connect(pg_dsn_target(store, size), cfg.store.fts.tokenizer)
    try:
        queries = make_queries(reader, offset + 2 * n + 1, embedder)
    finally:
        reader.close()
    mine = queries[offset + 1 : offset + 1 + 2 * n]
    out: dict[str, Any] = {"after_write": [], "no_write": [], "found": 0, "results": {}}
    notes: list[Path] = []
    pid = os.getpid()
    with (
        open_host(ws, cfg, root / f"host-a-{pid}", embedder) as host_a,
        open_host(ws, cfg, root / f"host-b-{pid}", embedder) as host_b,
    ):
        try:
            host_b.search(SearchRequest(queries[0]))  # B's matrix loads once
            host_b.warm_keywords()  # and its keyword matrix (a large index's), before the timing
            for i in range(n):
                note = ws / "memory" / f"bench-host-a-{offset + i}.md"  # the same in every version's run
                notes.append(note)
                note.write_text(f"- host A wrote note {offset + i}\n")
                host_a.sync()
                for kind, query in (("after_write", mine[2 * i]), ("no_write", mine[2 * i + 1])):
                    start = time.perf_counter()
                    found = host_b.search(SearchRequest(query)).results
                    out[kind].append((time.perf_counter() - start) * 1000)
                    out["found"] += bool(found)
                    out["results"][query] = [[r.path, r.start_line, round(r.score, 6)] for r in found]
        finally:
            for note in notes:
                note.unlink(missing_ok=True)
            host_a.sync()  # the index as it was built
    return out


def pg_dsn_target(store: str, size: int) -> Any:
    from sessionmem.dsn import pg_target

    return pg_target(pg_dsn(store, size), "bench")


def child(args: list[str], pythonpath: Path) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"child {args} failed")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def export(rev: str, into: Path) -> str:
    """The ``sessionmem`` package of ``rev`` under ``into``; its short hash."""
    short = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "rev-parse", "--short", rev], capture_output=True, text=True, check=True
    ).stdout.strip()
    archive = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", rev, "sessionmem"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return short


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--store", default=DEFAULT_DSN, help="a postgresql:// DSN (a schema of its own in it)")
    p.add_argument("--size", type=int, default=100_000, help="chunks (default 100000)")
    p.add_argument("--queries", type=int, default=60, help="pairs of searches per version (default 60)")
    p.add_argument("--rounds", type=int, default=3, help="alternations between versions (default 3)")
    p.add_argument("--against", metavar="REV", help="also time this commit's package, side by side")
    p.add_argument("--keep", help="a folder for the workspace, and keep the schema: a later run reuses both")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    size = 600 if args.smoke else 5_000 if args.quick else args.size
    n = 3 if args.smoke else 10 if args.quick else args.queries
    rounds = 1 if args.smoke else args.rounds
    if args.child:
        task = json.loads(args.child)
        root = Path(task["root"])
        if task["what"] == "build":
            print(json.dumps(build(root, args.store, size)))
        else:
            print(json.dumps(time_searches(root, args.store, size, task["n"], task["offset"])))
        return
    header("Host B's hybrid search on a PostgreSQL index host A writes to (bench_pg_hosts_search.py)", args)
    problem = unavailable(args.store)
    if problem is not None:
        print(f"SKIPPED: {problem}")
        footer()
        return
    with contextlib.ExitStack() as stack:
        if args.keep:
            root = Path(args.keep) / f"s{size}"
            root.mkdir(parents=True, exist_ok=True)
        else:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-pg-hosts-")))
            stack.callback(drop_schema, args.store, size)
        versions = [(f"this tree ({git_commit()})", REPO_ROOT)]
        if args.against:
            old = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-pg-against-")))
            versions.insert(0, (f"{args.against} ({export(args.against, old)})", old))
        built = child(["--child", json.dumps({"what": "build", "root": str(root)}), *sizes(args)], REPO_ROOT)
        print(
            f"{size:,} chunks in schema bench_search_{size}: sync {built['sync_s']:.1f} s"
            f" ({built['written']:,} chunks written; 0 when a kept index was reused). "
            f"{n} pairs of searches per version in {rounds} rounds; load at start {os.getloadavg()[0]:.2f}.\n"
        )
        results: dict[str, dict[str, list[float]]] = {label: {} for label, _ in versions}
        answers: dict[str, dict[str, Any]] = {}  # each version's results of each query
        per_round = [n // rounds + (1 if r < n % rounds else 0) for r in range(rounds)]
        offset = 0
        loads = []
        for count in per_round:
            for label, path in versions:
                task = {"what": "time", "root": str(root), "n": count, "offset": offset}
                got = child(["--child", json.dumps(task), *sizes(args)], path)
                for kind in ("after_write", "no_write"):
                    results[label].setdefault(kind, []).extend(got[kind])
                answers.setdefault(label, {}).update(got["results"])
                loads.append(os.getloadavg()[0])
            offset += 2 * count
    rows = []
    for label, _ in versions:
        for kind, name in (("no_write", "no write since"), ("after_write", "right after host A's write")):
            s = stats(results[label][kind])
            rows.append(
                [
                    label,
                    name,
                    f"{s.p50:.1f} / {s.p95:.1f} (n={s.n})",
                    f"{verdict(s.p95, HYBRID_P95_TARGET_MS)} <= {HYBRID_P95_TARGET_MS:.0f}",
                ]
            )
    print(table(["package", "host B's search", "p50 / p95 (ms)", "p95 target"], rows))
    print(f"\n1-minute load after each child: {', '.join(f'{x:.2f}' for x in loads)}.")
    if len(versions) > 1:
        first, *others = (answers[label] for label, _ in versions)
        differ = sum(1 for other in others for q, hits in other.items() if first.get(q) != hits)
        print(
            f"Results (path, line, score to 6 digits) of the {len(first)} queries: "
            + ("the same in every version." if not differ else f"{differ} differ between versions.")
        )
    footer()


def sizes(args: argparse.Namespace) -> list[str]:
    """The options a child needs to size its work as the parent does."""
    out = ["--store", args.store, "--size", str(args.size)]
    return out + (["--smoke"] if args.smoke else ["--quick"] if args.quick else [])


def unavailable(store: str) -> str | None:
    """Why the server cannot be used, or None."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install -e '.[postgres]')"
    try:
        psycopg.connect(store.split("?")[0], connect_timeout=3).close()
    except psycopg.Error as exc:
        return f"no PostgreSQL server at {store} ({exc})"
    return None


if __name__ == "__main__":
    main()
