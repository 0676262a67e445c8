"""The sign-bit first pass of the matrix path on MiniLM vectors: what it finds, and what it saves.

Vectors: LoCoMo's daily-log lines (``../shared/recall/locomo-dev``, every non-empty line but the
titles) and its questions, embedded with the MiniLM GGUF (``../shared/models``); the index is the
lines among vectors drawn from the mean and covariance of all of them (normalised), up to each size,
and the queries are the questions. For each size: the candidates the path scores exactly for the
hybrid search's vector pool (k = 120), the share of each question's exact top 120 among them, and the
questions whose exact top 6 lost a row; the same at half and twice the candidates, to show the margin.
Then, at ``--time-sizes``, one ``MatrixVectors`` scan per question, every row scored (exact) and the
sign-bit path alternating, p50 / p95 of each. Query embedding excluded. See bench/README.md.

    python bench/bench_sign_codes.py                     # sizes 50k, 100k, 200k, 300k; times at 50k, 100k
"""

from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO_ROOT, find_model, footer, header, parser, stats, table

DEFAULT_DATA = REPO_ROOT.parent / "shared" / "recall" / "locomo-dev"
SIZES = (50_000, 100_000, 200_000, 300_000)
TIME_SIZES = (50_000, 100_000)
SMOKE_SIZES = (3_000,)
POOL = 120  # the hybrid search's vector candidates (searcher.candidate_count of the default request)
TOP = 6  # the default results


def locomo_texts(data: Path, limit: int | None) -> tuple[list[str], list[str]]:
    """The daily logs' lines (titles and empty lines left out) and the questions."""
    import json

    lines: list[str] = []
    questions: list[str] = []
    for conv in sorted(p for p in data.iterdir() if p.is_dir()):
        for log in sorted((conv / "memory").glob("*.md")):
            lines += [s for s in log.read_text().splitlines() if s.strip() and not s.startswith("# ")]
        with open(conv / "qa.jsonl") as f:
            questions += [json.loads(row)["question"] for row in f]
    if limit is not None:
        return lines[:limit], questions[: limit // 4]
    return lines, questions


def embedded(model: Path, texts: list[str], cache: Path | None) -> np.ndarray:
    """``texts`` embedded by the GGUF model (normalised rows), read from ``cache`` when it holds them."""
    import hashlib

    key = hashlib.sha256("\n".join([str(model), *texts]).encode()).hexdigest()[:16]
    path = cache / f"minilm-{key}.npy" if cache is not None else None
    if path is not None and path.is_file():
        return np.asarray(np.load(path), dtype=np.float32)
    from sessionmem.memory.embed.local_gguf import LocalEmbedder

    vecs = np.asarray(LocalEmbedder(str(model)).embed_documents(texts), dtype=np.float32)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, vecs)
    return vecs


def index_of(lines: np.ndarray, real: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` rows: ``lines`` among rows drawn from the mean and covariance of ``real`` (all
    normalised), shuffled."""
    mean = real.mean(axis=0)
    values, basis = np.linalg.eigh(np.cov(real, rowvar=False))
    scale = basis * np.sqrt(np.clip(values, 0, None))
    drawn = mean + rng.standard_normal((max(0, size - len(lines)), real.shape[1])) @ scale.T
    rows = np.concatenate([lines, drawn.astype(np.float32)])[:size]
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return np.ascontiguousarray(rows[rng.permutation(len(rows))], dtype=np.float32)


def exact_top(matrix: np.ndarray, queries: np.ndarray, k: int) -> list[np.ndarray]:
    """Each query's exact top ``k`` rows, best first."""
    out = []
    for start in range(0, len(queries), 64):
        scores = matrix @ queries[start : start + 64].T
        for col in scores.T:
            idx = np.argpartition(-col, k - 1)[:k]
            out.append(idx[np.argsort(-col[idx], kind="stable")])
    return out


def recall_rows(matrix: np.ndarray, queries: np.ndarray) -> list[list[object]]:
    from sessionmem.memory.search.sign_codes import SignCodes, candidate_count

    codes = SignCodes(matrix)
    tops = exact_top(matrix, queries, POOL)
    count = candidate_count(len(matrix), POOL)
    rows: list[list[object]] = []
    for factor in (0.5, 1.0, 2.0):
        n = min(len(matrix), int(count * factor))
        pool, top_lost, worst = [], 0, 1.0
        for q, top in zip(queries, tops, strict=True):
            chosen = codes.candidates(q, n)
            held = np.isin(top, chosen)
            pool.append(float(held.mean()))
            worst = min(worst, float(held.mean()))
            top_lost += not bool(held[:TOP].all())
        rows.append(
            [
                f"{len(matrix):,}",
                f"{n:,}{' (the path)' if factor == 1.0 else ''}",
                f"{n / len(matrix):.1%}",
                f"{np.mean(pool):.4f}",
                f"{worst:.3f}",
                f"{top_lost} of {len(queries)}",
            ]
        )
    return rows


def scan_times(matrix: np.ndarray, queries: np.ndarray) -> dict[str, list[float]]:
    """One ``MatrixVectors.scan`` per query, exact and sign bits alternating (the same state)."""
    from sessionmem.memory.search.vectors import MatrixVectors

    conn = sqlite3.connect(":memory:")
    vectors = MatrixVectors(conn, coarse_min_rows=0)
    n = len(matrix)
    ids = [f"c{i:07d}" for i in range(n)]
    vectors.install("m", vectors.write_token(), (ids, ["memory"] * n, [""] * n, ["owner"] * n, matrix))
    out: dict[str, list[float]] = {"exact": [], "sign bits": []}
    src = ("memory",)
    same = 0
    for q in queries:
        vectors.scan(q, POOL, sources=src)  # one warm-up of the caches per query, for both alike
        t0 = time.perf_counter()
        exact = vectors.scan(q, POOL, sources=src, exact=True)
        t1 = time.perf_counter()
        coarse = vectors.scan(q, POOL, sources=src)
        t2 = time.perf_counter()
        out["exact"].append((t1 - t0) * 1000)
        out["sign bits"].append((t2 - t1) * 1000)
        same += exact[:TOP] == coarse[:TOP]
    out["same_top"] = [float(same)]
    conn.close()
    return out


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--data", default=str(DEFAULT_DATA), help="LoCoMo workspaces (default ../shared/recall/)")
    p.add_argument(
        "--model", help="GGUF embedding model (default ../shared/models/all-MiniLM-L6-v2.Q8_0.gguf)"
    )
    p.add_argument("--sizes", help="comma-separated index sizes for recall (default 50k,100k,200k,300k)")
    p.add_argument("--time-sizes", help="comma-separated sizes timed (default 50000,100000)")
    p.add_argument("--cache", help="keep the MiniLM vectors here (the next run reads them)")
    args = p.parse_args()
    sizes = (
        SMOKE_SIZES if args.smoke else tuple(int(s) for s in args.sizes.split(",")) if args.sizes else SIZES
    )
    timed = (
        SMOKE_SIZES
        if args.smoke
        else tuple(int(s) for s in args.time_sizes.split(","))
        if args.time_sizes
        else TIME_SIZES
    )
    header("The sign-bit first pass on MiniLM vectors (bench_sign_codes.py)", args)
    data, model = Path(args.data), find_model(args.model)
    if model is None or not data.is_dir():
        print("- the MiniLM GGUF or the LoCoMo data was not found: nothing measured")
        footer()
        return
    lines, questions = locomo_texts(data, 40 if args.smoke else None)
    t0 = time.perf_counter()
    cache = Path(args.cache) if args.cache else None
    real_lines, real_questions = embedded(model, lines, cache), embedded(model, questions, cache)
    print(
        f"- {len(lines):,} daily-log lines and {len(questions):,} questions embedded with {model.name} "
        f"({time.perf_counter() - t0:.0f} s); the other rows drawn from their mean and covariance"
    )
    print(f"- vector pool k = {POOL} (the hybrid search's), top {TOP}\n")
    real = np.concatenate([real_lines, real_questions])
    results: dict[int, Any] = {}
    rows: list[list[object]] = []
    for size in sorted(set(sizes) | set(timed)):
        matrix = index_of(real_lines, real, size, np.random.default_rng(size))
        if size in sizes:
            rows += recall_rows(matrix, real_questions)
        if size in timed:
            results[size] = scan_times(matrix, real_questions)
    print(
        table(
            ["rows", "candidates scored", "share", f"top {POOL} held", "worst question", f"top {TOP} lost"],
            rows,
        )
    )
    print()
    timing = []
    for size, out in results.items():
        exact, coarse = stats(out["exact"]), stats(out["sign bits"])
        timing.append(
            [
                f"{size:,}",
                f"{exact.p50:.2f} / {exact.p95:.2f}",
                f"{coarse.p50:.2f} / {coarse.p95:.2f}",
                f"{exact.p50 / coarse.p50:.1f}x",
                f"{int(out['same_top'][0])} of {len(real_questions)}",
            ]
        )
    print(
        table(
            [
                "rows",
                "every row scored, p50 / p95 ms",
                "sign bits, p50 / p95 ms",
                "ratio (p50)",
                "same top 6",
            ],
            timing,
        )
    )
    footer()


if __name__ == "__main__":
    main()
