"""Indexing: 300 notes FTS-only, a no-op sync of 10,000 unchanged files, local-model throughput.

All through ``MemoryIndex.sync`` in this process (process start-up is bench_cli.py's subject).
The local-model part uses the real GGUF model (``--model PATH``, default
``../shared/models/all-MiniLM-L6-v2.Q8_0.gguf`` beside the repository) and reports the whole sync's
throughput beside the embedder's own on the same chunk texts, so the bottleneck is visible, for three
thread settings taken in turn, round after round: every core (llama.cpp's choice, the old default), one
thread, and the default (chosen per call, memory/embed/threads.py). ``--busy-cores N`` starts N
processes that spin (a competing load) for that part. See bench/README.md.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import find_model, footer, header, parser, stats, table, verdict, write_notes

FTS_300_TARGET_S = 1.0
NOOP_10K_TARGET_S = 1.0
LOCAL_TARGET_CPS = 10.0  # 2x the peers' 4-5 chunks/s


def open_index(ws: Path, state: Path, embedder: Any) -> Any:
    from sessionmem.config import MemorySearchConfig
    from sessionmem.memory.embed.embedder import EmbedderSelection
    from sessionmem.memory.index import MemoryIndex

    selection = EmbedderSelection(embedder, "local" if embedder is not None else "none")
    return MemoryIndex.open("bench", ws, MemorySearchConfig(), state_dir=state, selection=selection)


def fts_300(tmp: Path, notes: int, reps: int) -> dict[str, Any]:
    """A fresh FTS-only index of ``notes`` notes, ``reps`` times (a new state folder each time)."""
    ws = tmp / "fts-ws"
    write_notes(ws, notes)
    times, chunks = [], 0
    for rep in range(reps):
        with open_index(ws, tmp / f"fts-state-{rep}", None) as index:
            start = time.perf_counter()
            report = index.sync()
            times.append(time.perf_counter() - start)
            chunks = report.chunks_written
    return {"files": notes + 1, "chunks": chunks, "s": times}


def noop_10k(tmp: Path, files: int, reps: int) -> dict[str, Any]:
    """Index ``files`` small notes once, then time syncs that find nothing changed."""
    ws = tmp / "noop-ws"
    mem = ws / "memory"
    mem.mkdir(parents=True)
    for i in range(files):
        (mem / f"2025-01-01-n{i:05d}.md").write_text(f"# note {i}\n\n- item {i} about the ledger migration\n")
    with open_index(ws, tmp / "noop-state", None) as index:
        start = time.perf_counter()
        first = index.sync()
        first_s = time.perf_counter() - start
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            report = index.sync()
            times.append(time.perf_counter() - start)
            assert report.files_indexed == 0 and report.files_unchanged == files, report
    return {"files": files, "first_s": first_s, "first_indexed": first.files_indexed, "s": times}


def busy_cores(count: int) -> list[subprocess.Popen[bytes]]:
    """``count`` processes that each keep one core busy (the competing load); the caller ends them."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def local_model(tmp: Path, model: Path, notes: int, n_threads: int | None, run: str) -> dict[str, Any]:
    """Sync ``notes`` notes with the local GGUF model (a fresh index), then embed the same chunk
    texts with the embedder alone; ``n_threads`` None is the product's default (llama.cpp chooses)."""
    from sessionmem.memory.embed.local_gguf import LocalEmbedder
    from sessionmem.memory.store.database import connect

    ws = tmp / "local-ws"
    if not ws.exists():
        write_notes(ws, notes, seed=21)
    embedder = LocalEmbedder(str(model), n_threads=n_threads)
    start = time.perf_counter()
    embedder.embed_query("warm up: load the model")
    out: dict[str, Any] = {"load_s": time.perf_counter() - start, "load_avg": os.getloadavg()[0]}
    llm = embedder._load()
    with open_index(ws, tmp / f"local-state-{run}", embedder) as index:
        start = time.perf_counter()
        report = index.sync()
        out["sync_s"] = time.perf_counter() - start
        out["chunks"] = report.chunks_written
        out["embedded"] = report.embedded
        conn, _ = connect(index.path, load_vector=False)
        texts = [r[0] for r in conn.execute("SELECT text FROM chunks ORDER BY rowid").fetchall()]
        conn.close()
    out["tokens"] = sum(len(llm.tokenize(t.encode("utf-8"), add_bos=True, special=False)) for t in texts)
    start = time.perf_counter()
    embedder.embed_documents(texts)  # the embedder has no cache: this is the same work again
    out["embed_s"] = time.perf_counter() - start
    out["texts"] = len(texts)
    chooser = embedder.thread_chooser
    calls = chooser.calls if chooser is not None else {embedder.threads: 0}
    out["threads"] = (
        " ".join(f"{n}:{c}" for n, c in sorted(calls.items(), reverse=True)) if chooser else n_threads
    )
    return out


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument(
        "--model", help="GGUF embedding model (default ../shared/models/all-MiniLM-L6-v2.Q8_0.gguf)"
    )
    p.add_argument(
        "--notes", type=int, default=300, help="notes for the FTS and local-model runs (default 300)"
    )
    p.add_argument("--noop-files", type=int, default=10_000, help="files for the no-op sync (default 10000)")
    p.add_argument(
        "--busy-cores", type=int, default=0, help="processes spinning on a core during the local-model part"
    )
    p.add_argument("--rounds", type=int, default=3, help="rounds of the three thread settings (default 3)")
    p.add_argument("--local-notes", type=int, help="notes for the local-model part (default --notes)")
    args = p.parse_args()
    quick = args.quick
    header("Indexing (bench_index.py)", args)
    with tempfile.TemporaryDirectory(prefix="bench-index-") as tmp_name:
        tmp = Path(tmp_name)
        fts = fts_300(tmp, 20 if args.smoke else 50 if quick else args.notes, 3 if quick else 10)
        noop = noop_10k(tmp, 200 if args.smoke else 1000 if quick else args.noop_files, 3 if quick else 10)
        model = find_model(args.model)
        local: dict[str, list[dict[str, Any]]] = {}
        skip_reason = None
        if model is None:
            skip_reason = f"model file not found ({args.model or 'the default path'}); pass --model PATH"
        else:
            try:
                import llama_cpp  # noqa: F401
            except ImportError:
                skip_reason = "llama-cpp-python is not installed (pip install -e '.[local]')"
        if skip_reason is None and model is not None:
            from sessionmem.memory.embed.threads import usable_cores

            cores = usable_cores()
            settings = {f"every core (n_threads={cores}, the old default)": cores, "n_threads=1": 1}
            settings["default (unset: chosen per call)"] = None
            if args.smoke:  # one setting, a few notes: the smoke run checks the script, not the figures
                settings = {"default (unset: chosen per call)": None}
            notes = 5 if args.smoke else 20 if quick else args.local_notes or args.notes
            busy = busy_cores(args.busy_cores)
            try:
                for rnd in range(1 if quick else args.rounds):  # alternating, so drifting load hits all
                    for name, threads in settings.items():
                        run = local_model(tmp, model, notes, threads, f"{rnd}-{threads}")
                        local.setdefault(name, []).append(run)
            finally:
                for proc in busy:
                    proc.kill()
                    proc.wait()

    print(
        "Notes: `common.write_notes` (a heading and 12 bullets of 14 words, ~1.3 KB each, one chunk per "
        "note at"
    )
    print(
        "the default chunking of 400 tokens / 80 overlap), plus MEMORY.md. Times are `MemoryIndex.sync()` "
        "wall time.\n"
    )
    f, n = stats(fts["s"]), stats(noop["s"])
    print(
        table(
            ["operation", "files", "p50 (s)", "p95 (s)", "runs", "target"],
            [
                [
                    "first index, FTS-only (fresh state each run)",
                    fts["files"],
                    f"{f.p50:.3f}",
                    f"{f.p95:.3f}",
                    f.n,
                    f"<= {FTS_300_TARGET_S} s: {verdict(f.p95, FTS_300_TARGET_S)}",
                ],
                [
                    "no-op sync, nothing changed (FTS-only)",
                    f"{noop['files']:,}",
                    f"{n.p50:.3f}",
                    f"{n.p95:.3f}",
                    n.n,
                    f"<= {NOOP_10K_TARGET_S} s: {verdict(n.p95, NOOP_10K_TARGET_S)}",
                ],
            ],
        )
    )
    print(
        f"\n({fts['chunks']} chunks per FTS-only index. The {noop['files']:,}-file workspace's first "
        "index took "
        f"{noop['first_s']:.2f} s.)\n"
    )
    if not local:
        print(f"Local model: SKIPPED - {skip_reason}.")
        footer()
        return
    first = next(iter(local.values()))[0]
    avg_tokens = first["tokens"] / max(1, first["texts"])
    print(
        f"Local model `{model.name if model else ''}` (llama-cpp-python; loaded before timing), "
        f"{first['chunks']} chunks of {avg_tokens:.0f} model tokens on average, {os.cpu_count()} cores, "
        f"{args.busy_cores} busy core(s) of competing load. Three thread settings in turn, "
        f"{len(next(iter(local.values())))} round(s); each run: a fresh embedder and index, the whole "
        "sync, then `embed_documents` alone on the same chunk texts (the default has learned by then). "
        "Load: the 1-minute load average at the run's start (the competing load counts in it).\n"
    )
    rows = []
    for name, runs in local.items():
        for i, r in enumerate(runs):
            rows.append(
                [
                    name if i == 0 else "",
                    f"{r['chunks'] / r['sync_s']:.1f}",
                    f"{r['texts'] / r['embed_s']:.1f}",
                    f"{r['load_avg']:.2f}",
                    r["threads"],
                ]
            )
    print(table(["setting", "sync chunks/s", "embed chunks/s", "load", "calls per thread count"], rows))
    print()
    rows = []
    for name, runs in local.items():
        sync_cps = statistics.median(r["chunks"] / r["sync_s"] for r in runs)
        embed_cps = statistics.median(r["texts"] / r["embed_s"] for r in runs)
        loads = [r["load_avg"] for r in runs]
        rows.append(
            [
                name,
                f"{sync_cps:.1f}",
                f"{embed_cps:.1f}",
                f"{min(loads):.1f}-{max(loads):.1f}",
                f"{verdict(sync_cps, LOCAL_TARGET_CPS, lower_is_better=False)} >= {LOCAL_TARGET_CPS:.0f}",
            ]
        )
    print(
        table(
            ["setting (median of rounds)", "sync chunks/s", "embed chunks/s", "load", "target (sync)"], rows
        )
    )
    print(
        "\nThe sync's time beyond embedding is reading, chunking and the SQLite writes. "
        "Peers on this machine (DESIGN.md): 4-5 chunks/s."
    )
    footer()


if __name__ == "__main__":
    main()
