"""The vector calibration an index measures and keeps (``calibration.py``, DESIGN decision 15): when
it is measured, what it measures, and that it follows the model and the corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sessionmem.config import MemorySearchConfig
from sessionmem.errors import EmbeddingError
from sessionmem.memory.embed.embedder import EmbedderSelection
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search import calibration
from sessionmem.memory.search.calibration import Calibration, null_statistics
from tests.memory.stores import SQLITE, StoreUnderTest, open_store
from tests.memory.support import HashEmbedder

WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo")


class CountingEmbedder(HashEmbedder):
    """The tests' bag-of-words embedder, counting the query embeddings asked for."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.queries: list[str] = []

    def embed_query(self, text: str) -> np.ndarray:
        self.queries.append(text)
        return super().embed_query(text)


def write_notes(workspace: Path, count: int, start: int = 0) -> None:
    for i in range(start, start + count):
        words = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(5))
        (workspace / "memory" / f"note-{i:03d}.md").write_text(f"- note {i}: {words}\n", encoding="utf-8")


def open_index(
    workspace: Path, state: Path, embedder: HashEmbedder, store: StoreUnderTest = SQLITE
) -> MemoryIndex:
    selection = EmbedderSelection(embedder, "test")
    return MemoryIndex.open(
        "main",
        workspace,
        store.settings(MemorySearchConfig()),
        state_dir=state,
        selection=selection,
        watch=False,
    )


def test_null_statistics_are_the_median_and_robust_spread() -> None:
    rng = np.random.default_rng(3)
    probes = rng.standard_normal((32, 64)).astype(np.float32)
    chunks = rng.standard_normal((500, 64)).astype(np.float32)
    probes /= np.linalg.norm(probes, axis=1, keepdims=True)
    chunks /= np.linalg.norm(chunks, axis=1, keepdims=True)
    centre, spread = null_statistics(probes, chunks)
    assert abs(centre) < 0.01 and spread == pytest.approx(1 / 8, rel=0.1)  # random 64-d: sd 1/sqrt(64)
    # one probe on the corpus's topic (every chunk near it) does not move them
    chunks[:, :] = chunks * 0.2 + probes[0] * 0.98
    chunks /= np.linalg.norm(chunks, axis=1, keepdims=True)
    centre_on_topic, _ = null_statistics(probes, chunks)
    assert centre_on_topic < 0.2


def test_scores_grow_with_distance_from_unrelated_text_and_never_tie_at_the_top() -> None:
    cal = Calibration("k", "m", 384, centre=0.02, spread=0.06, vectors=100, probes=32)
    assert cal.score(0.02) == 0.0 and cal.score(-0.3) == 0.0
    assert cal.score(0.02 + 4.5 * 0.06) == pytest.approx(0.35, abs=0.005)  # the default minScore
    assert 0 < cal.score(0.5) < cal.score(0.8) < cal.score(0.95) < 1.0


def test_an_index_calibrates_once_and_again_when_its_corpus_grows_by_a_fifth(
    workspace: Path, state: Path, index_store: StoreUnderTest
) -> None:
    write_notes(workspace, 40)
    embedder = CountingEmbedder()
    with open_index(workspace, state, embedder, index_store) as index:
        index.sync()
        first = index.status().calibration
        assert first is not None and first["vectors"] == 40 and first["probes"] == len(calibration.PROBES)
        assert len(embedder.queries) == len(calibration.PROBES)  # one query embedding per probe
        index.sync()  # nothing changed: nothing measured
        write_notes(workspace, 5, start=40)  # +12%: the calibration still fits
        index.sync()
        assert index.status().calibration == first
        write_notes(workspace, 10, start=45)  # +37% since it was measured
        index.sync()
        again = index.status().calibration
        assert again is not None and again["vectors"] == 55
        assert len(embedder.queries) == len(calibration.PROBES)  # the probes' vectors were kept


def test_another_model_gets_its_own_calibration(
    workspace: Path, state: Path, index_store: StoreUnderTest
) -> None:
    write_notes(workspace, 20)
    with open_index(workspace, state, HashEmbedder(dims=64, model="bow-64"), index_store) as index:
        index.sync()
        small = index.status().calibration
    with open_index(workspace, state, HashEmbedder(dims=256, model="bow-256"), index_store) as index:
        index.sync()
        large = index.status().calibration
    assert small is not None and large is not None
    assert (small["model"], small["dims"]) == ("bow-64", 64) and (large["model"], large["dims"]) == (
        "bow-256",
        256,
    )


def test_a_provider_failing_on_the_probes_leaves_raw_cosines_and_says_so(
    workspace: Path, state: Path, index_store: StoreUnderTest
) -> None:
    class NoQueries(HashEmbedder):
        def embed_query(self, text: str) -> np.ndarray:
            raise EmbeddingError("query endpoint down")

    write_notes(workspace, 10)
    with open_index(workspace, state, NoQueries(), index_store) as index:
        index.sync()
        status = index.status()
    assert status.calibration is None
    assert any("not calibrated" in issue and "query endpoint down" in issue for issue in status.issues)


def test_a_small_index_leans_on_the_reference_notes_measured_once_and_less_as_it_grows(
    workspace: Path, state: Path
) -> None:
    write_notes(workspace, 10)
    embedder = CountingEmbedder()
    with open_index(workspace, state, embedder) as index:
        index.sync()
        small = index.status().calibration
        write_notes(workspace, 40, start=10)  # 50 vectors: recalibrated, the reference kept
        index.sync()
        grown = index.status().calibration
    assert embedder.reference_calls == 1  # embedded once, as documents, for this index and model
    assert small is not None and grown is not None and grown["vectors"] == 50
    ref = (small["reference_centre"], small["reference_spread"])
    assert (grown["reference_centre"], grown["reference_spread"]) == ref
    assert small["reference_notes"] == len(calibration.REFERENCE_NOTES)
    # the blend lies between the reference and the index's own, nearer the reference when small
    assert calibration.blend((0.5, 0.1), 4, (0.0, 0.05))[0] == pytest.approx(0.5 * 4 / (4 + 48))
    assert calibration.blend((0.5, 0.1), 480, (0.0, 0.05))[0] == pytest.approx(0.5 * 480 / 528)
    assert calibration.blend((0.5, 0.1), 480, None) == (0.5, 0.1)


class Recording:
    """A store that keeps the text of every statement run through it."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.statements: list[str] = []

    def execute(self, sql: str, params: Any = ()) -> Any:
        self.statements.append(sql)
        return self.store.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def test_a_writing_sync_counts_the_vectors_from_an_index_not_by_reading_every_chunk(
    workspace: Path, state: Path
) -> None:
    """Each writing sync counts the index's vectors to see whether its calibration still fits: read
    from ``idx_chunks_vector_lengths`` (100k chunks: 12 ms), not by reading every row of ``chunks`` (220
    ms), whether the count finds it fits or measures again; and that index never takes the place of
    ``idx_chunks_hash`` in the lookup of vectors to reuse by their text (0.5 ms -> 250 ms)."""
    write_notes(workspace, 40)
    embedder = CountingEmbedder()
    with open_index(workspace, state, embedder) as index:
        index.sync()
        store = open_store(index)
    try:
        for stored_calibration in (True, False):  # fits: only the count; gone: the count and the sample
            if not stored_calibration:
                store.execute("DELETE FROM meta WHERE key = ?", (calibration.CALIBRATION_KEY,))
            recording = Recording(store)
            assert calibration.refresh(recording, embedder, embedder.dims, changed=True) is None
            reads = [sql for sql in recording.statements if "FROM chunks" in sql]
            assert len(reads) == (1 if stored_calibration else 2)
            for sql in reads:
                plan = " | ".join(
                    row[3] for row in store.execute(f"EXPLAIN QUERY PLAN {sql}", (0,) * sql.count("?"))
                )
                assert (
                    "USING INDEX idx_chunks_vector_lengths" in plan
                    or "USING COVERING INDEX idx_chunks_vector_lengths" in plan
                ), plan
        assert calibration.load(store) is not None and calibration.load(store).vectors == 40
        reuse = (
            "SELECT hash, embedding FROM chunks WHERE model = ? AND embedding IS NOT NULL "
            "AND hash IN (?, ?) AND (? < 0 OR length(embedding) = ?)"
        )  # the shape of sync_pass's lookup of vectors by text
        plan = " | ".join(
            row[3] for row in store.execute(f"EXPLAIN QUERY PLAN {reuse}", ("m", "a", "b", 1, 1))
        )
        assert "idx_chunks_hash" in plan, plan
    finally:
        store.close()
