"""Shared pieces of the benchmarks: the machine, timing statistics, synthetic workspaces, a hash embedder.

Everything here is deterministic given a seed, so two runs on one machine measure the same work.
Figures are wall times (``time.perf_counter``) reported as the median (p50) and the 95th percentile.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = REPO_ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2.Q8_0.gguf"

WORDS = tuple(
    [
        "ledger",
        "invoice",
        "billing",
        "cutover",
        "migration",
        "postgres",
        "redis",
        "cache",
        "queue",
        "deploy",
        "staging",
        "release",
        "rollback",
        "incident",
        "pager",
        "oncall",
        "budget",
        "forecast",
        "quarter",
        "roadmap",
        "design",
        "review",
        "meeting",
        "offsite",
        "dinner",
        "vegetarian",
        "lisbon",
        "tokyo",
        "seoul",
        "shanghai",
        "flight",
        "hotel",
        "visa",
        "passport",
        "contract",
        "vendor",
        "pitch",
        "customer",
        "churn",
        "retention",
        "pricing",
        "discount",
        "refund",
        "tax",
        "vat",
        "rounding",
        "currency",
        "euro",
        "dollar",
        "yen",
        "kubernetes",
        "cluster",
        "node",
        "pod",
        "latency",
        "throughput",
        "index",
        "search",
        "embedding",
        "vector",
        "memory",
        "session",
        "compaction",
        "flush",
        "summary",
        "transcript",
        "token",
        "window",
        "model",
        "prompt",
        "tool",
        "call",
        "result",
        "error",
        "retry",
        "backoff",
        "timeout",
        "deadline",
        "milestone",
        "sprint",
        "ticket",
        "backlog",
        "priority",
        "owner",
        "decision",
        "constraint",
    ]
)

# The head of an English word-frequency list: in real notes these fill a third of the text, and the
# query side drops them as stop words, so content words sit in the long tail as they do in practice.
FUNCTION_WORDS = tuple(
    [
        "the",
        "of",
        "and",
        "to",
        "a",
        "in",
        "is",
        "that",
        "for",
        "it",
        "on",
        "was",
        "with",
        "as",
        "we",
        "be",
        "at",
        "by",
        "this",
        "have",
        "from",
        "or",
        "are",
        "not",
        "but",
        "they",
        "an",
        "which",
        "you",
        "were",
        "has",
        "all",
        "there",
        "been",
        "one",
        "their",
        "will",
        "would",
        "so",
        "if",
        "about",
        "up",
        "out",
        "them",
        "then",
        "what",
        "when",
        "can",
        "more",
        "also",
        "into",
        "some",
        "could",
        "than",
        "its",
        "our",
        "only",
        "other",
        "new",
        "just",
        "over",
        "after",
        "first",
    ]
)

_SYLLABLES = tuple(
    [
        "ka",
        "ri",
        "to",
        "mo",
        "na",
        "se",
        "lu",
        "vi",
        "pe",
        "da",
        "zo",
        "ne",
        "shi",
        "ra",
        "go",
        "mi",
        "ta",
        "be",
        "ko",
        "fu",
        "ha",
        "ye",
        "ro",
        "su",
        "ti",
        "wa",
        "no",
        "ke",
        "zu",
        "pa",
    ]
)


# ---------------------------------------------------------------------------- the machine


def machine() -> str:
    """CPU model, cores, memory, Python and OS: printed above every table."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{cpu}; {os.cpu_count()} cores; {mem_gib:.0f} GiB; "
        f"Python {platform.python_version()}; {platform.system()} {platform.release()}"
    )


def core_speed() -> str:
    """Two fixed loops timed on one core (best of 5): a figure from another machine is read beside them.

    Trigger: one commit's search measured 11 ms p50 on one 2-core machine and 34 ms on another of the
    same name (AMD EPYC), both quiet. Why: "AMD EPYC" or "Intel Xeon" says little of a shared virtual
    core's speed, and the load average nothing of a neighbour's. Outcome: the header says how long
    this core takes for a Python loop and a SQLite scan, so figures from two runs are compared as
    measured, not as named; the footer says it again, since a shared core's speed drifts (seen here:
    15 to 28 us for the loop within a minute on a quiet machine).
    """
    import sqlite3
    import timeit

    python_us = min(timeit.repeat("sum(range(1000))", number=500, repeat=5)) / 500 * 1e6
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (x INTEGER)")
    db.executemany("INSERT INTO t VALUES (?)", ((i,) for i in range(10_000)))
    scan = "SELECT sum(x) FROM t WHERE x % 7 = 3"
    sqlite_us = min(timeit.repeat(lambda: db.execute(scan).fetchone(), number=5, repeat=5)) / 5 * 1e6
    db.close()
    return f"`sum(range(1000))` {python_us:.1f} us, a SQLite scan of 10,000 rows {sqlite_us:.0f} us"


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def header(title: str, args: argparse.Namespace | None = None) -> None:
    """The block every script prints first: what ran, where, on which commit."""
    print(f"## {title}\n")
    print(f"- machine: {machine()}")
    print(f"- core speed at start: {core_speed()} (one core, best of 5)")
    print(f"- commit: {git_commit()}; run at {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
    print(f"- command: python bench/{Path(sys.argv[0]).name} {' '.join(sys.argv[1:])}".rstrip())
    print(f"- load average at start: {load_average()} (other processes share these cores; see README)")
    if args is not None and getattr(args, "smoke", False):
        print("- SMOKE run (tiny sizes, checks that the script runs): figures mean nothing")
    elif args is not None and getattr(args, "quick", False):
        print("- QUICK smoke run: sizes and repetitions reduced; figures are not the reported ones")
    print()


def load_average() -> str:
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg()) + " (1 / 5 / 15 min)"
    except OSError:
        return "unknown"


def footer() -> None:
    """Printed last: the load while the script ran (a loaded machine inflates p95 first)."""
    print(f"\n_Load average at the end: {load_average()}; core speed {core_speed()}._\n")


class BenchParser(argparse.ArgumentParser):
    """Every script's options: ``--quick`` (small sizes, about a minute) and ``--smoke`` (tiny sizes, a
    few seconds, comparisons with other tools left out: what tests/test_bench_smoke.py runs, so a
    renamed or removed name fails CI). ``--smoke`` implies ``--quick``; the env var
    ``SESSIONMEM_BENCH_SMOKE=1`` does the same as ``--smoke``."""

    def parse_args(self, *args: object, **kwargs: object) -> argparse.Namespace:  # type: ignore[override]
        parsed = super().parse_args(*args, **kwargs)  # type: ignore[call-overload]
        if os.environ.get(SMOKE_ENV, "") not in ("", "0"):
            parsed.smoke = True
        if parsed.smoke:
            parsed.quick = True
        return parsed


SMOKE_ENV = "SESSIONMEM_BENCH_SMOKE"


def parser(description: str) -> BenchParser:
    p = BenchParser(description=description)
    p.add_argument("--quick", action="store_true", help="smoke run: small sizes, few repetitions")
    p.add_argument(
        "--smoke", action="store_true", help="tiny sizes, seconds, no comparisons with other tools (CI)"
    )
    return p


# ---------------------------------------------------------------------------- models


class WrappedModel:
    """A model that delegates to ``inner``; subclasses time or slow down its ``complete``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def provider(self) -> str:
        return str(self.inner.provider)

    async def complete(self, request: Any) -> Any:
        return await self.inner.complete(request)


# ---------------------------------------------------------------------------- measuring


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    """Wall times in milliseconds of ``repeat`` calls."""
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def timed_each(fn: Callable[[object], object], items: Iterable[object]) -> list[float]:
    """Wall time in milliseconds of ``fn(item)`` for each item."""
    out = []
    for item in items:
        start = time.perf_counter()
        fn(item)
        out.append((time.perf_counter() - start) * 1000)
    return out


@dataclass(frozen=True)
class Stats:
    p50: float
    p95: float
    n: int

    def cells(self, digits: int = 2) -> list[str]:
        return [f"{self.p50:.{digits}f}", f"{self.p95:.{digits}f}"]


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of already sorted values."""
    if not sorted_values:
        return float("nan")
    rank = max(1, int(np.ceil(q / 100 * len(sorted_values))))
    return float(sorted_values[rank - 1])


def stats(samples: Iterable[float]) -> Stats:
    values = sorted(samples)
    return Stats(statistics.median(values), percentile(values, 95), len(values))


def summary(samples_ms: Iterable[float]) -> str:
    s = stats(samples_ms)
    return f"p50 {s.p50:8.2f} ms  p95 {s.p95:8.2f} ms  (n={s.n})"


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def verdict(value: float, target: float, *, lower_is_better: bool = True) -> str:
    ok = value <= target if lower_is_better else value >= target
    return "meets" if ok else "MISSES"


# ---------------------------------------------------------------------------- synthetic text


def sentence(rng: random.Random, n: int = 14) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def write_notes(root: Path, count: int, *, lines_per_note: int = 12, seed: int = 7) -> list[Path]:
    """A workspace of ``count`` dated notes under ``root/memory`` plus a MEMORY.md."""
    rng = random.Random(seed)
    (root / "memory").mkdir(parents=True, exist_ok=True)
    (root / "MEMORY.md").write_text(
        "# Memory\n\n" + "\n".join(f"- {sentence(rng)}" for _ in range(20)) + "\n"
    )
    paths = []
    for i in range(count):
        day = f"2025-{1 + i % 12:02d}-{1 + i % 28:02d}"
        path = root / "memory" / f"{day}-note-{i:05d}.md"
        body = "\n".join(f"- {sentence(rng)}" for _ in range(lines_per_note))
        path.write_text(f"# Note {i} ({day})\n\n{body}\n")
        paths.append(path)
    return paths


class ZipfVocabulary:
    """``size`` words drawn with Zipf weights (s = 1.05): English function words first (the head of
    the distribution), then the WORDS list, then made-up words.

    Real notes follow Zipf's law: a few words are everywhere and most are rare. A corpus drawn
    uniformly from a small list would make every keyword match most chunks, which no real
    workspace does and which would make keyword search look slower than it is.
    """

    def __init__(self, size: int = 20_000, seed: int = 11) -> None:
        rng = random.Random(seed)
        words = list(dict.fromkeys([*FUNCTION_WORDS, *WORDS]))
        seen = set(words)
        while len(words) < size:
            w = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))
            if w not in seen:
                seen.add(w)
                words.append(w)
        self.words = words
        weights = [1.0 / (rank**1.05) for rank in range(1, size + 1)]
        self._cum = list(itertools.accumulate(weights))

    def sample(self, rng: random.Random, k: int) -> list[str]:
        return rng.choices(self.words, cum_weights=self._cum, k=k)


def write_chunky_workspace(root: Path, n_chunks: int, *, chunks_per_file: int = 100, seed: int = 5) -> int:
    """A workspace that indexes into exactly ``n_chunks`` chunks with ``chunking.tokens = 128``.

    The chunker packs whole lines into chunks of at most 512 characters. Each file is a heading plus
    bullets of 490-510 characters of Zipf-drawn words, so no two lines share a chunk (512 characters):
    every bullet is one chunk, and so is the heading. Returns the number of files written.
    """
    rng = random.Random(seed)
    vocab = ZipfVocabulary()
    mem = root / "memory"
    mem.mkdir(parents=True, exist_ok=True)
    n_files = max(1, (n_chunks + chunks_per_file - 1) // chunks_per_file)
    left = n_chunks
    for i in range(n_files):
        day = f"{2022 + i % 4}-{1 + i % 12:02d}-{1 + i % 28:02d}"
        lines = [f"# Notes {i} ({day})"]
        for _ in range(min(chunks_per_file, left) - 1):
            text = "- "
            while len(text) < 508:
                text += " ".join(vocab.sample(rng, 8)) + " "
            text = text[:508].rsplit(" ", 1)[0].rstrip()
            while len(text) < 490:  # long enough that the heading cannot join it
                text += " ok"
            lines.append(text + ".")
        left -= len(lines)
        (mem / f"{day}-log-{i:05d}.md").write_text("\n".join(lines) + "\n")
    return n_files


# ---------------------------------------------------------------------------- a cheap embedder


class HashEmbedder:
    """An ``Embedder`` whose vectors are pseudo-random, seeded by the text's SHA-256 (384 dims).

    Lets the index and search run their vector paths at any scale without a model. Query vectors
    can be registered beforehand (``precompute``) so a timed search does no embedding work at all.
    """

    provider = "bench"
    model = "hash-384"
    provider_key = hashlib.sha256(b"bench-hash-384").hexdigest()
    max_input_tokens = 8192

    def __init__(self, dims: int = 384) -> None:
        self._dims = dims
        self._queries: dict[str, np.ndarray] = {}
        self.calls = 0

    @property
    def dims(self) -> int:
        return self._dims

    def vector(self, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(self._dims).astype(np.float32)
        return v / np.linalg.norm(v)

    def precompute(self, text: str, vector: np.ndarray) -> None:
        self._queries[text] = np.asarray(vector, dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        found = self._queries.get(text)
        return found if found is not None else self.vector(text)

    def embed_documents(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        self.calls += 1
        out = np.stack([self.vector(t) for t in texts]) if texts else np.zeros((0, self._dims), np.float32)
        if progress is not None:
            progress(len(texts))
        return out


def find_model(given: str | None) -> Path | None:
    """The GGUF model: ``--model`` if given, else ``../shared/models/...`` beside the repository."""
    path = Path(given).expanduser() if given else DEFAULT_MODEL
    return path if path.is_file() else None
