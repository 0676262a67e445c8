"""Forgetting one person in a large SQLite index: the whole ``forget`` and its index part.

The index holds N chunks of shared notes (384-dimensional vectors from a hash embedder, so the vector
table and the embedding cache are full) and one person's folder of 100 chunks; ``forget`` removes the
person: their rows and cached vectors, then the scrub that leaves no deleted byte readable (FTS5
``optimize``, ``VACUUM``, the WAL truncated: sessionmem/memory/store/index_sqlite.py). ``VACUUM`` rewrites the
whole file, so the cost grows with the index, not with the person. Each repetition writes the person's
folder again, syncs, and forgets them.

    python bench/bench_forget.py            # 10,000 and 50,000 chunks
    python bench/bench_forget.py --quick    # 2,000 chunks

See bench/README.md.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import HashEmbedder, footer, header, parser, stats, table, write_chunky_workspace

SIZES = (10_000, 50_000)
PERSON = "agent:bench:telegram:direct:42"
PERSON_CHUNKS = 100


def open_index(ws: Path, state: Path, sessions: Path) -> Any:
    from sessionmem.config import MemorySearchConfig
    from sessionmem.memory.embed.embedder import EmbedderSelection
    from sessionmem.memory.index import MemoryIndex

    settings = MemorySearchConfig.model_validate({"chunking": {"tokens": 128, "overlap": 0}})
    selection = EmbedderSelection(HashEmbedder(), "bench")
    return MemoryIndex.open(
        "bench", ws, settings, state_dir=state, selection=selection, watch=False, sessions_dir=sessions
    )


def person_folder(ws: Path, scratch: Path) -> None:
    """The person's notes: a folder of PERSON_CHUNKS chunks, written the way the shared ones are."""
    from sessionmem.privacy import chat_folder

    shutil.rmtree(scratch, ignore_errors=True)
    write_chunky_workspace(scratch, PERSON_CHUNKS, chunks_per_file=PERSON_CHUNKS, seed=99)
    folder = ws / chat_folder(PERSON)
    folder.mkdir(parents=True, exist_ok=True)
    for note in (scratch / "memory").glob("*.md"):
        note.replace(folder / f"person-{note.name}")


def run(size: int, reps: int, tmp: Path) -> dict[str, Any]:
    from sessionmem.session.lifecycle.forget import forget_sync
    from sessionmem.session.stores.sessions_json import SessionStore

    ws, state = tmp / f"ws-{size}", tmp / f"state-{size}"
    write_chunky_workspace(ws, size)
    store = SessionStore(state / "sessions" / "sessions.json", agent_id="bench")
    forget_s, index_s, mb = [], [], 0.0
    with open_index(ws, state, store.sessions_dir) as index:
        index.sync()
        erase, spent = index.erase, []

        def timed_erase(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return erase(*args, **kwargs)
            finally:
                spent.append(time.perf_counter() - start)

        index.erase = timed_erase  # the index's part of forget, timed
        for _ in range(reps):
            person_folder(ws, tmp / "person")
            index.sync()
            mb = index.path.stat().st_size / 2**20
            start = time.perf_counter()
            report = forget_sync(PERSON, store=store, workspace=ws, agent_id="bench", memory_index=index)
            forget_s.append(time.perf_counter() - start)
            index_s.append(spent.pop())
            assert report.index is not None and report.index.chunks >= PERSON_CHUNKS, report
    return {"chunks": size + PERSON_CHUNKS, "mb": mb, "forget": forget_s, "index": index_s}


def main() -> None:
    args = parser(__doc__ or "").parse_args()
    header("bench_forget: forgetting one person in a large SQLite index", args)
    sizes, reps = ((300,), 1) if args.smoke else ((2_000,), 2) if args.quick else (SIZES, 3)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-forget-") as tmp:
        for size in sizes:
            got = run(size, reps, Path(tmp))
            whole, index = stats(got["forget"]), stats(got["index"])
            rows.append(
                [
                    f"{got['chunks']:,}",
                    f"{got['mb']:.0f} MB",
                    f"{whole.p50:.2f} / {max(got['forget']):.2f} s",
                    f"{index.p50:.2f} / {max(got['index']):.2f} s",
                ]
            )
    print(table(["chunks in the index", "index file", "forget (p50 / max)", "of which the index"], rows))
    print(f"\n{reps} repetitions per size; the person had {PERSON_CHUNKS} chunks each time.")
    footer()


if __name__ == "__main__":
    main()
