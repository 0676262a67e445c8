"""Delta-indexing 50 new messages into a 10,000-message session transcript vs re-indexing it whole.

Two levels, side by side in one run:

1. through the index (``MemoryIndex`` with ``sources: [memory, sessions]``; hash embedder): the sync
   after 50 appended messages (a whole sync, and the targeted ``sync(session_files=[...])`` the delta
   scheduler runs), against a forced full rebuild and the first index of the same file; with the chunk
   rows each wrote and the chunks each sent to the embedder (the cost that dominates with a real model);
2. the pure parts in ``sessionmem.memory.sync.session_text``: flattening and chunking only the appended
   lines vs the whole file, and the delta tracker's check (a stat and a newline count).

See bench/README.md.
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import WORDS, HashEmbedder, footer, header, parser, stats, table, timed

MESSAGES = 10_000
DELTA = 50


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def append_messages(transcript: Any, rng: random.Random, count: int) -> None:
    from sessionmem.messages import Message

    for i in range(count):
        text = words(rng, rng.randint(8, 40))
        transcript.append_message(Message.user(text) if i % 2 == 0 else Message.assistant(text))


def settings() -> Any:
    from sessionmem.config import MemorySearchConfig

    return MemorySearchConfig(sources=("memory", "sessions"))


def index_level(root: Path, messages: int, rounds: int, rebuilds: int) -> dict[str, Any]:
    from sessionmem.memory.embed.embedder import EmbedderSelection
    from sessionmem.memory.index import MemoryIndex
    from sessionmem.session.stores.transcript_folder import Transcript

    ws = root / "workspace"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- The bench keeps one note here.\n")
    state = root / "state"
    sessions = state / "agents" / "bench" / "sessions"
    sessions.mkdir(parents=True)
    transcript = Transcript.open(sessions / "bench-session.jsonl", "bench-session", ws)
    rng = random.Random(9)
    append_messages(transcript, rng, messages)
    embedder = HashEmbedder()
    out: dict[str, Any] = {"file_mb": transcript.size_bytes() / 2**20}
    index = MemoryIndex.open(
        "bench", ws, settings(), state_dir=state, selection=EmbedderSelection(embedder, "bench")
    )
    try:
        start = time.perf_counter()
        first = index.sync()
        out["first_s"] = time.perf_counter() - start
        out["first_embedded"] = first.embedded
        out["chunks"] = index.status().chunks_by_source.get("sessions", 0)
        for kind in ("delta", "targeted"):
            times, embedded, written = [], [], []
            for _ in range(rounds):
                append_messages(transcript, rng, DELTA)
                start = time.perf_counter()
                report = index.sync() if kind == "delta" else index.sync(session_files=[transcript.path])
                times.append(time.perf_counter() - start)
                embedded.append(report.embedded)
                written.append(report.chunks_written)
            out.update({f"{kind}_s": times, f"{kind}_embedded": embedded, f"{kind}_written": written})
        force_s, force_embedded = [], []
        for _ in range(rebuilds):
            start = time.perf_counter()
            report = index.sync(force=True)
            force_s.append(time.perf_counter() - start)
            force_embedded.append(report.embedded)
        out.update(force_s=force_s, force_embedded=force_embedded)
        out["chunks_after"] = index.status().chunks_by_source.get("sessions", 0)
    finally:
        index.close()
    out["path"] = transcript.path
    return out


def pure_level(path: Path, reps: int) -> dict[str, list[float]]:
    """Flatten + chunk the whole file vs only its last ``DELTA`` message lines."""
    from sessionmem.memory.sync.chunking import chunk_markdown
    from sessionmem.memory.sync.session_text import SessionDeltaTracker, build_session_entry, flatten_lines

    data = path.read_bytes()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    first_new = len(lines) - DELTA + 1
    tail = lines[-DELTA:]
    size = len(data)
    before = size - sum(len(line) + 1 for line in tail)

    def whole() -> None:
        entry = build_session_entry(path)
        chunk_markdown(entry.content, 400, 80)

    def delta() -> None:
        with path.open("rb") as handle:
            handle.seek(before)
            raw = handle.read().split(b"\n")
        texts, _, _ = flatten_lines(raw, first_line=first_new)
        chunk_markdown("\n".join(texts), 400, 80)

    def tracker() -> None:
        t = SessionDeltaTracker()
        t.reset(path, before)
        assert t.observe_file(path)  # 50 new lines reach the 50-message threshold

    return {"whole": timed(whole, reps), "delta": timed(delta, reps * 5), "tracker": timed(tracker, reps * 5)}


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument(
        "--messages", type=int, default=MESSAGES, help="messages in the transcript (default 10000)"
    )
    args = p.parse_args()
    messages = 200 if args.smoke else 1_000 if args.quick else args.messages
    rounds, rebuilds, reps = (2, 1, 3) if args.quick else (10, 3, 20)
    header("Session transcript delta indexing (bench_delta.py)", args)
    with tempfile.TemporaryDirectory(prefix="bench-delta-") as tmp_name:
        idx = index_level(Path(tmp_name), messages, rounds, rebuilds)
        pure = pure_level(idx["path"], reps)

    print(
        f"A transcript of {messages:,} user/assistant messages (8-40 words each; {idx['file_mb']:.1f} MB of "
        f"JSONL) in the agent's sessions folder, indexed as source `sessions` ({idx['chunks']:,} chunks "
        "of the "
        f"default 400 tokens / 80 overlap); then {rounds} rounds of appending {DELTA} messages and a whole "
        f"`sync()`, and {rounds} rounds of appending {DELTA} messages and a targeted "
        "`sync(session_files=[transcript])` (what the delta scheduler runs). Hash embedder (no model cost): "
        "`embedded` is what a real model would have to embed.\n"
    )
    d, t, f = stats(idx["delta_s"]), stats(idx["targeted_s"]), stats(idx["force_s"])

    def span(values: list[int]) -> str:
        return f"{min(values):,}-{max(values):,}" if min(values) != max(values) else f"{values[0]:,}"

    print("### Through MemoryIndex.sync\n")
    rows = [
        [
            f"first index of the {messages:,}-message transcript",
            f"{idx['first_s'] * 1000:.0f}",
            "",
            1,
            f"{idx['chunks']:,}",
            f"{idx['first_embedded']:,}",
        ],
        [
            f"whole `sync()` after {DELTA} appended messages",
            f"{d.p50 * 1000:.1f}",
            f"{d.p95 * 1000:.1f}",
            d.n,
            span(idx["delta_written"]),
            span(idx["delta_embedded"]),
        ],
        [
            f"targeted `sync(session_files=...)` after {DELTA} appended messages",
            f"{t.p50 * 1000:.1f}",
            f"{t.p95 * 1000:.1f}",
            t.n,
            span(idx["targeted_written"]),
            span(idx["targeted_embedded"]),
        ],
        [
            "forced full re-index (`sync(force=True)`, embedding cache seeded)",
            f"{f.p50 * 1000:.0f}",
            f"{f.p95 * 1000:.0f}",
            f.n,
            f"{idx['chunks_after']:,}",
            span(idx["force_embedded"]),
        ],
    ]
    headers = ["operation", "p50 (ms)", "p95 (ms)", "runs", "chunk rows written", "chunks embedded"]
    print(table(headers, rows))
    print(
        f"\nSame run: a delta sync takes {d.p50 / f.p50:.3f}x the wall time of a forced re-index "
        f"({f.p50 / d.p50:.0f}x less) and embeds {max(idx['delta_embedded'])} chunks where a re-index "
        "without "
        f"the cache embeds all {idx['chunks_after']:,}.\n"
    )
    print("### The pure parts (session_files), for reference\n")
    w, dl, tr = stats(pure["whole"]), stats(pure["delta"]), stats(pure["tracker"])
    print(
        table(
            ["work", "p50 (ms)", "p95 (ms)", "runs"],
            [
                [
                    f"flatten + chunk the whole file ({messages + 2 * rounds * DELTA:,} messages)",
                    f"{w.p50:.2f}",
                    f"{w.p95:.2f}",
                    w.n,
                ],
                [f"flatten + chunk only the last {DELTA} messages", f"{dl.p50:.3f}", f"{dl.p95:.3f}", dl.n],
                [
                    "delta tracker: stat + count newlines of the appended bytes",
                    f"{tr.p50:.3f}",
                    f"{tr.p95:.3f}",
                    tr.n,
                ],
            ],
        )
    )
    print(f"\nRatio whole / delta (p50, same run): {w.p50 / dl.p50:.0f}x.")
    footer()


if __name__ == "__main__":
    main()
