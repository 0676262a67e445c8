"""The router never makes a query wait for a matrix load that costs more than sqlite-vec's answer.

Above ``SYNC_RELOAD_ROWS`` the first query is served by sqlite-vec; the matrix loads in the background
once a second query asks (or the hold passes), and then serves the same top results.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sessionmem.memory.embed.embedder import EmbedderSelection
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.records import SearchRequest, SearchResponse
from sessionmem.memory.search.vectors import SYNC_RELOAD_ROWS, VectorRouter
from sessionmem.memory.store.database import connect
from tests.memory.support import HashEmbedder, make_config

LINES_PER_FILE = 100
CHUNKS = 1_000  # a small index by any measure, but a load costs ~3 ms here against ~0.6 for sqlite-vec


def write_workspace(root: Path, n_lines: int) -> list[str]:
    """``n_lines`` bullets of distinct random words, each long enough to be a chunk of its own."""
    rng = random.Random(4)
    vocab = [f"w{i}x" for i in range(3000)]
    lines: list[str] = []
    mem = root / "memory"
    mem.mkdir(parents=True)
    for f in range(0, n_lines, LINES_PER_FILE):
        body = ["- " + " ".join(rng.sample(vocab, 30)) for _ in range(min(LINES_PER_FILE, n_lines - f))]
        lines += body
        (mem / f"2026-01-{1 + f // LINES_PER_FILE:02d}.md").write_text("\n".join(body) + "\n")
    return lines


@dataclass
class Big:
    root: Path
    path: Path  # the index file
    lines: list[str]
    settings: Any
    embedder: HashEmbedder

    def open(self) -> MemoryIndex:
        """The index as the CLI opens it: unwatched."""
        selection = EmbedderSelection(self.embedder, "test")
        return MemoryIndex.open(
            "main",
            self.root / "ws",
            self.settings,
            state_dir=self.root / "state",
            selection=selection,
            watch=False,
        )


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Big:
    """An index of more chunks than the router loads synchronously."""
    root = tmp_path_factory.mktemp("big")
    lines = write_workspace(root / "ws", CHUNKS)
    settings = make_config(tokens=60, overlap=0, sources=("memory",)).for_agent("main").memory_search
    made = Big(root, Path(), lines, settings, HashEmbedder(dims=256))
    with made.open() as index:
        report = index.sync()
        assert report.chunks_written == CHUNKS
        made.path = index.path
    return made


def served_by(response: SearchResponse) -> set[str]:
    return {
        r.explanation.vector_path for r in response.results if r.explanation and r.explanation.vector_path
    }


def wait_until(check: Any, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return False


def test_first_search_of_a_large_index_is_served_by_sqlite_vec_then_by_the_matrix(big: Big) -> None:
    with big.open() as index:
        request = SearchRequest(big.lines[CHUNKS - 7], explain=True)
        first = index.search(request)
        assert served_by(first) == {"sqlite-vec"}, (
            f"{CHUNKS} chunks, loaded synchronously up to {SYNC_RELOAD_ROWS}"
        )
        where = index.vector_path()
        assert where.name == "sqlite-vec" and "loading in the background" in where.reason
        second = index.search(request)  # asks again: the load starts reading now
        assert served_by(second) <= {"sqlite-vec", "matrix"}
        assert wait_until(lambda: index.vector_path().name == "matrix")
        later = index.search(request)
        assert served_by(later) == {"matrix"}
        # the same results (order among exact score ties may differ by float rounding between paths)
        assert (later.results[0].path, later.results[0].start_line) == (
            first.results[0].path,
            first.results[0].start_line,
        )
        assert {(r.path, r.start_line) for r in later.results} == {
            (r.path, r.start_line) for r in first.results
        }
        assert [r.score for r in later.results] == pytest.approx([r.score for r in first.results], abs=1e-5)


def router_on(path: Path, **kwargs: Any) -> tuple[Any, VectorRouter]:
    """A router on its own connection to the index file, as the searcher has."""
    conn, support = connect(path)
    assert support.loaded, support.reason
    return conn, VectorRouter(conn, support, **kwargs)


def test_the_load_holds_back_until_a_second_query_asks(
    big: Big,
) -> None:
    path, lines, embedder = big.path, big.lines, big.embedder
    conn, router = router_on(path, load_hold_s=60.0)
    try:
        q = embedder.embed_query(lines[3])
        first = router.prepare(embedder.model)
        assert first.name == "sqlite-vec" and "from the next query on" in first.reason
        hits_sql = router.serve(first, q, 5, model=embedder.model, sources=("memory",))
        time.sleep(0.2)
        assert router.matrix.rows == 0  # a one-shot process would exit here having read nothing
        assert router.current_path(embedder.model).name == "sqlite-vec"
        assert router.prepare(embedder.model).name == "sqlite-vec"  # the second query wakes the load
        assert wait_until(lambda: router.current_path(embedder.model).name == "matrix")
        third = router.prepare(embedder.model)
        assert third.name == "matrix"
        hits_matrix = router.serve(third, q, 5, model=embedder.model, sources=("memory",))
        assert hits_matrix[0][0] == hits_sql[0][0]  # the line itself; below it, order among ties may differ
        assert [sc for _, sc in hits_matrix] == pytest.approx([sc for _, sc in hits_sql], abs=1e-5)
    finally:
        router.wait_for_reload(30)
        conn.close()


def test_a_long_running_process_gets_the_matrix_after_the_hold_without_another_query(
    big: Big,
) -> None:
    path, embedder = big.path, big.embedder
    conn, router = router_on(path, load_hold_s=0.05)
    try:
        assert router.prepare(embedder.model).name == "sqlite-vec"
        assert wait_until(lambda: router.current_path(embedder.model).name == "matrix")
    finally:
        router.wait_for_reload(30)
        conn.close()


def test_a_load_invalidated_while_held_back_reads_nothing(
    big: Big,
) -> None:
    path, embedder = big.path, big.embedder
    conn, router = router_on(path, load_hold_s=60.0)
    try:
        assert router.prepare(embedder.model).name == "sqlite-vec"
        router.invalidate()  # the index wrote: a matrix loaded now would be stale before it served
        assert router.wait_for_reload(30)
        assert router.matrix.rows == 0
        path_now = router.current_path(embedder.model)
        assert path_now.name == "sqlite-vec" and "loading" not in path_now.reason
        assert router.prepare(embedder.model).name == "sqlite-vec"  # a new load, held again
        assert router.wait_for_reload(30) and router.current_path(embedder.model).name == "matrix"
    finally:
        router.wait_for_reload(30)
        conn.close()


def test_an_index_at_the_threshold_loads_before_the_first_query(
    big: Big,
) -> None:
    path, embedder = big.path, big.embedder
    conn, support = connect(path)
    try:
        (rows,) = conn.execute("SELECT count(*) FROM chunks").fetchone()
        router = VectorRouter(conn, support, sync_reload_rows=int(rows))
        assert router.prepare(embedder.model).name == "matrix"
        q = np.ones(embedder.dims or 1, dtype=np.float32)
        assert router.knn(q, 3, model=embedder.model, sources=("memory",))
    finally:
        conn.close()
