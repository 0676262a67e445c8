"""The three vector paths agree, filter by model and source, and the router picks the valid one."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sessionmem.memory.search.vectors import (
    BruteForceVectors,
    MatrixVectors,
    SqliteVecVectors,
    VectorIndex,
    VectorRouter,
    choose_vector_path,
    read_matrix,
)
from sessionmem.memory.store import schema
from sessionmem.memory.store.database import VectorSupport, connect
from tests.memory.test_search import add_chunk

DIMS = 48
N = 1500
MODEL = "test-model"


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(7)
    vecs = rng.normal(size=(N, DIMS)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    sources = ["sessions" if i % 10 == 0 else "memory" for i in range(N)]
    return vecs, sources


@pytest.fixture
def filled(tmp_path: Path, data: tuple[np.ndarray, list[str]]) -> tuple[Any, VectorSupport, dict[str, int]]:
    vecs, sources = data
    conn, support = connect(tmp_path / "index.sqlite")
    assert support.loaded, support.reason
    conn.executescript(schema.TABLES)
    conn.executescript(schema.FTS_TABLE.format(tokenizer="unicode61"))
    conn.execute(schema.vec_table_sql(DIMS))
    row_of: dict[str, int] = {}
    conn.execute("BEGIN")
    for i, (vec, source) in enumerate(zip(vecs, sources, strict=True)):
        day = None if i % 7 == 0 else f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}"
        cid = add_chunk(
            conn, f"memory/n{i}.md", f"note {i}", source=source, model=MODEL, embedding=vec, day=day
        )
        row_of[cid] = i
    # another model's rows must never come back
    add_chunk(conn, "memory/other.md", "other", model="other-model", embedding=vecs[0])
    conn.execute("COMMIT")
    return conn, support, row_of


def exact(vecs: np.ndarray, q: np.ndarray, k: int, keep: np.ndarray | None = None) -> list[int]:
    scores = vecs @ (q / np.linalg.norm(q))
    if keep is not None:
        scores = np.where(keep, scores, -np.inf)
    return [int(i) for i in np.argsort(-scores)[:k]]


def test_three_paths_return_the_same_top_results(
    filled: tuple[Any, VectorSupport, dict[str, int]], data: tuple[np.ndarray, list[str]]
) -> None:
    conn, _, row_of = filled
    vecs, _ = data
    rng = np.random.default_rng(11)
    paths: list[VectorIndex] = [MatrixVectors(conn), SqliteVecVectors(conn), BruteForceVectors(conn)]
    for _ in range(5):
        q = rng.normal(size=DIMS).astype(np.float32)
        expected = exact(vecs, q, 10)
        results = [p.knn(q, 10, model=MODEL, sources=("memory", "sessions")) for p in paths]
        for hits in results:
            assert [row_of[cid] for cid, _ in hits] == expected
        for a, b in zip(results[0], results[1], strict=True):
            assert a[1] == pytest.approx(b[1], abs=1e-5)
        for a, c in zip(results[0], results[2], strict=True):
            assert a[1] == pytest.approx(c[1], abs=1e-5)
        assert results[0][0][1] == pytest.approx(float(vecs[expected[0]] @ (q / np.linalg.norm(q))), abs=1e-5)


def test_paths_filter_by_source_even_when_it_is_rare(
    filled: tuple[Any, VectorSupport, dict[str, int]], data: tuple[np.ndarray, list[str]]
) -> None:
    conn, _, row_of = filled
    vecs, sources = data
    keep = np.array([s == "sessions" for s in sources])
    q = vecs[3] + 0.1  # nearest neighbours are mostly "memory" rows
    expected = exact(vecs, q, 20, keep)
    for path in (MatrixVectors(conn), SqliteVecVectors(conn), BruteForceVectors(conn)):
        hits = path.knn(q, 20, model=MODEL, sources=("sessions",))
        assert [row_of[cid] for cid, _ in hits] == expected, path.name


def test_paths_agree_within_a_date_range(
    filled: tuple[Any, VectorSupport, dict[str, int]], data: tuple[np.ndarray, list[str]]
) -> None:
    conn, _, row_of = filled
    vecs, _ = data
    days = [None if i % 7 == 0 else f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}" for i in range(N)]
    keep = np.array([d is not None and "2026-03-01" <= d <= "2026-04-30" for d in days])
    q = vecs[5] + 0.05
    expected = exact(vecs, q, 15, keep)
    for path in (MatrixVectors(conn), SqliteVecVectors(conn), BruteForceVectors(conn)):
        hits = path.knn(
            q, 15, model=MODEL, sources=("memory", "sessions"), dates=("2026-03-01", "2026-04-30")
        )
        assert [row_of[cid] for cid, _ in hits] == expected, path.name


def test_unknown_model_finds_nothing(filled: tuple[Any, VectorSupport, dict[str, int]]) -> None:
    conn, _, _ = filled
    q = np.ones(DIMS, dtype=np.float32)
    for path in (MatrixVectors(conn), SqliteVecVectors(conn), BruteForceVectors(conn)):
        assert path.knn(q, 5, model="nope", sources=("memory",)) == []


def test_brute_force_works_without_sqlite_vec(tmp_path: Path) -> None:
    conn, support = connect(tmp_path / "plain.sqlite", load_vector=False)
    assert not support.loaded
    conn.executescript(schema.TABLES)
    conn.executescript(schema.FTS_TABLE.format(tokenizer="unicode61"))
    near = add_chunk(conn, "memory/a.md", "a", model=MODEL, embedding=[1.0, 0.1, 0.0])
    add_chunk(conn, "memory/b.md", "b", model=MODEL, embedding=[0.0, 1.0, 0.0])
    router = VectorRouter(conn, support, preload=False)
    assert router.current_path(MODEL).name == "brute-force"
    assert "unavailable" in router.current_path(MODEL).reason
    hits = router.knn(np.array([1.0, 0.0, 0.0], dtype=np.float32), 1, model=MODEL, sources=("memory",))
    assert hits[0][0] == near and hits[0][1] == pytest.approx(1 / np.sqrt(1.01), abs=1e-6)


def test_matrix_is_stale_after_any_write_and_reloads(
    filled: tuple[Any, VectorSupport, dict[str, int]],
) -> None:
    conn, _, _ = filled
    matrix = MatrixVectors(conn)
    q = np.zeros(DIMS, dtype=np.float32)
    q[0] = 1.0
    matrix.load(MODEL)
    assert matrix.is_valid(MODEL) and matrix.rows == N
    assert matrix.nbytes == N * DIMS * 4
    assert not matrix.is_valid("other-model")
    exact_hit = add_chunk(
        conn, "memory/new.md", "new", model=MODEL, embedding=q
    )  # a write on this connection
    assert not matrix.is_valid(MODEL)
    assert matrix.knn(q, 1, model=MODEL, sources=("memory",))[0][0] == exact_hit  # reloaded lazily
    assert matrix.is_valid(MODEL) and matrix.rows == N + 1
    matrix.invalidate()
    assert not matrix.is_valid(MODEL)


def test_router_serves_from_matrix_after_warming(filled: tuple[Any, VectorSupport, dict[str, int]]) -> None:
    conn, support, _ = filled
    router = VectorRouter(conn, support, preload=False)
    q = np.ones(DIMS, dtype=np.float32)
    router.knn(q, 3, model=MODEL, sources=("memory",))
    assert router.last_path is not None and router.last_path.name == "sqlite-vec"
    router.warm(MODEL)
    router.knn(q, 3, model=MODEL, sources=("memory",))
    assert router.last_path.name == "matrix"
    router.invalidate()
    assert router.current_path(MODEL).name == "sqlite-vec"


def test_choose_vector_path_prefers_fastest_valid() -> None:
    loaded = VectorSupport(True, "sqlean", "v0.1.9", "loaded")
    missing = VectorSupport(False, "sqlite3", None, "cannot load extensions")
    assert choose_vector_path(matrix_valid=True, vector_support=loaded, vec_table=True).name == "matrix"
    assert choose_vector_path(matrix_valid=True, vector_support=missing, vec_table=False).name == "matrix"
    assert choose_vector_path(matrix_valid=False, vector_support=loaded, vec_table=True).name == "sqlite-vec"
    no_ext = choose_vector_path(matrix_valid=False, vector_support=missing, vec_table=False)
    assert no_ext.name == "brute-force" and "cannot load extensions" in no_ext.reason
    no_table = choose_vector_path(matrix_valid=False, vector_support=loaded, vec_table=False)
    assert no_table.name == "brute-force" and "no vector table" in no_table.reason


class GatedRouter(VectorRouter):
    """Holds each background reload until the test opens the gate, so the race is the test's choice."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gate = threading.Event()

    def _reload_in_background(self, model: str, token: tuple[int, int], generation: int) -> None:
        self.gate.wait(30)
        self.gate.clear()
        super()._reload_in_background(model, token, generation)


def test_large_index_loads_the_matrix_in_the_background(
    filled: tuple[Any, VectorSupport, dict[str, int]],
) -> None:
    conn, support, row_of = filled
    router = GatedRouter(conn, support, sync_reload_rows=100)  # N rows is "large" here
    q = np.ones(DIMS, dtype=np.float32)
    first = router.prepare(MODEL)
    assert first.name == "sqlite-vec" and "loading in the background" in first.reason
    router.gate.set()
    assert router.wait_for_reload(timeout=30)
    hits_sql = router.serve(first, q, 5, model=MODEL, sources=("memory", "sessions"))
    second = router.prepare(MODEL)
    assert second.name == "matrix" and router.matrix.rows == N
    hits_matrix = router.serve(second, q, 5, model=MODEL, sources=("memory", "sessions"))
    assert [cid for cid, _ in hits_matrix] == [cid for cid, _ in hits_sql]
    assert [s for _, s in hits_matrix] == pytest.approx([s for _, s in hits_sql], abs=1e-5)
    # a write makes it stale again; the next query is served by SQL while the reload runs
    add_chunk(conn, "memory/late.md", "late", model=MODEL, embedding=q)
    assert router.prepare(MODEL).name == "sqlite-vec"
    router.gate.set()
    assert router.wait_for_reload(timeout=30)
    assert router.prepare(MODEL).name == "matrix" and router.matrix.rows == N + 1
    assert set(row_of) < {cid for cid, _ in router.knn(q, N + 1, model=MODEL, sources=("memory", "sessions"))}


def test_reload_started_before_an_invalidation_is_discarded(
    filled: tuple[Any, VectorSupport, dict[str, int]],
) -> None:
    conn, _, _ = filled
    matrix = MatrixVectors(conn)
    token, generation = matrix.write_token(), matrix.generation
    loaded = read_matrix(conn, MODEL)
    matrix.invalidate()
    assert not matrix.install(MODEL, token, loaded, generation=generation)
    assert not matrix.is_valid(MODEL)
    assert matrix.install(MODEL, token, loaded, generation=matrix.generation)
    assert matrix.is_valid(MODEL)
