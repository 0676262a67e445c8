"""A large matrix scores only the rows its sign bits choose: the answers stay those of the exact scan.

The vectors here are shaped like a sentence model's: a common direction every vector shares (MiniLM's
mean vector has norm ~0.6), topics, and notes scattered around their topic; a question is a note
reworded (its vector moved). ``coarse_min_rows`` is lowered so that a few thousand rows take the
path a 100k-row index takes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sessionmem.memory.search.sign_codes import SignCodes
from sessionmem.memory.search.vectors import MatrixVectors
from sessionmem.memory.store import schema
from sessionmem.memory.store.database import connect
from tests.memory.test_search import add_chunk

DIMS = 384
N = 4000
TOPICS = 40
MODEL = "test-model"


def sentence_like(rng: np.random.Generator, n: int) -> np.ndarray:
    common = rng.normal(size=DIMS)
    common *= 0.9 / np.linalg.norm(common)
    topics = rng.normal(size=(TOPICS, DIMS)) / np.sqrt(DIMS)
    vecs = common + topics[rng.integers(0, TOPICS, n)] + rng.normal(size=(n, DIMS)) * 0.8 / np.sqrt(DIMS)
    return (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)


def reworded(rng: np.random.Generator, vec: np.ndarray) -> np.ndarray:
    q = vec + rng.normal(size=DIMS).astype(np.float32) * 0.8 / np.sqrt(DIMS)
    return (q / np.linalg.norm(q)).astype(np.float32)


@pytest.fixture(scope="module")
def vecs() -> np.ndarray:
    return sentence_like(np.random.default_rng(3), N)


@pytest.fixture
def index(tmp_path: Path, vecs: np.ndarray) -> Any:
    conn, _ = connect(tmp_path / "index.sqlite", load_vector=False)
    conn.executescript(schema.TABLES)
    conn.executescript(schema.FTS_TABLE.format(tokenizer="unicode61"))
    conn.execute("BEGIN")
    for i, vec in enumerate(vecs):
        source = "sessions" if i % 100 == 0 else "memory"
        day = f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}"
        add_chunk(conn, f"memory/n{i}.md", f"note {i}", source=source, model=MODEL, embedding=vec, day=day)
    conn.execute("COMMIT")
    return conn


def test_sign_bits_put_the_nearest_rows_among_the_first_two_percent(vecs: np.ndarray) -> None:
    """The coarse pass alone: of each question's 5 nearest notes (exact cosine), the 2% of rows
    whose signs differ least hold nearly all (chance would be 2%)."""
    rng = np.random.default_rng(5)
    codes = SignCodes(vecs)
    found = []
    for i in rng.choice(N, 50, replace=False):
        q = reworded(rng, vecs[i])
        nearest = set(np.argsort(-(vecs @ q))[:5].tolist())
        found.append(len(nearest & set(codes.candidates(q, N // 50).tolist())) / 5)
    assert float(np.mean(found)) >= 0.95, found


def test_a_large_matrix_answers_as_the_exact_scan(index: Any, vecs: np.ndarray) -> None:
    matrix = MatrixVectors(index, coarse_min_rows=1000)
    rng = np.random.default_rng(9)
    found = []
    for i in rng.choice(N, 40, replace=False):
        q = reworded(rng, vecs[i])
        hits = matrix.knn(q, 24, model=MODEL, sources=("memory", "sessions"))
        exact = matrix.scan(q, 24, sources=("memory", "sessions"), exact=True)
        assert hits[0] == exact[0]  # the nearest note, with its exact cosine
        cosine = dict(exact)
        assert all(score == pytest.approx(cosine[cid], abs=1e-6) for cid, score in hits if cid in cosine)
        found.append(len(set(cosine) & {cid for cid, _ in hits}) / 24)
    assert float(np.mean(found)) >= 0.95, found


def test_filters_are_applied_before_the_candidates_are_chosen(index: Any, vecs: np.ndarray) -> None:
    """A rare source (1% of the notes) and a date range: every answer passes the filter, and when the
    filter leaves fewer rows than the candidates, they are all scored (the exact answer)."""
    matrix = MatrixVectors(index, coarse_min_rows=1000)
    rng = np.random.default_rng(13)
    for i in rng.choice(N, 10, replace=False):
        q = reworded(rng, vecs[i])
        rare = matrix.knn(q, 6, model=MODEL, sources=("sessions",))
        assert rare == matrix.scan(q, 6, sources=("sessions",), exact=True)
        dated = matrix.knn(q, 6, model=MODEL, sources=("memory",), dates=("2026-03-01", "2026-05-31"))
        exact = matrix.scan(q, 6, sources=("memory",), dates=("2026-03-01", "2026-05-31"), exact=True)
        assert dated[0] == exact[0]
        rows = {f"memory/n{r}.md" for r in range(N) if 3 <= 1 + r % 12 <= 5 and r % 100}
        paths = dict(index.execute("SELECT id, path FROM chunks").fetchall())
        assert {paths[cid] for cid, _ in dated} <= rows
