"""A host's in-memory matrix keeps up with another host's writes by reading only what they changed.

Two ``MemoryIndex`` objects on one PostgreSQL schema, as two gateway hosts would have: host B searches,
host A writes, edits, renames and deletes notes; B's next hybrid search answers exactly what a freshly
opened index answers, and B read only the changed rows (``vector_path().rows_read``), not every row.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessionmem.config import MemorySearchConfig
from sessionmem.memory.embed.embedder import EmbedderSelection
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.records import SearchRequest
from tests.memory.stores import StoreUnderTest, open_store, rows, run, store_under_test
from tests.memory.support import HashEmbedder

NOTES = 60
QUERIES = ("marker topic7 details", "quokka habits", "zebra stripes and quokka", "renamed otter note")


@pytest.fixture
def pg() -> Iterator[StoreUnderTest]:
    with store_under_test("postgresql") as store:
        yield store


def config(store: StoreUnderTest) -> MemorySearchConfig:
    base = {"sync": {"watch": False, "onSearch": False}, "chunking": {"tokens": 40, "overlap": 0}}
    return store.settings(MemorySearchConfig.model_validate(base))


def open_host(workspace: Path, state: Path, store: StoreUnderTest) -> MemoryIndex:
    selection = EmbedderSelection(HashEmbedder(), "test")
    settings = config(store)
    return MemoryIndex.open("main", workspace, settings, state_dir=state, selection=selection, watch=False)


def answers(index: MemoryIndex) -> list[list[tuple[str, int, int, float]]]:
    out = []
    for query in QUERIES:
        response = index.search(SearchRequest(query, max_results=20, min_score=0.0))
        assert response.mode == "hybrid"
        out.append([(r.path, r.start_line, r.end_line, round(r.score, 6)) for r in response.results])
    return out


def fresh_answers(workspace: Path, state: Path, store: StoreUnderTest) -> Any:
    with open_host(workspace, state, store) as fresh:
        return answers(fresh)


def rows_read_following(b: MemoryIndex, workspace: Path, fresh_state: Path, store: StoreUnderTest) -> int:
    """Host B's next searches, checked equal to a freshly opened host's; the rows B read for them."""
    before = b.vector_path().rows_read
    assert answers(b) == fresh_answers(workspace, fresh_state, store)
    return b.vector_path().rows_read - before


def test_a_hosts_matrix_reads_only_the_rows_another_host_changed(
    workspace: Path, tmp_path: Path, pg: StoreUnderTest
) -> None:
    memory = workspace / "memory"
    for i in range(NOTES):
        (memory / f"n{i:02d}.md").write_text(f"- everynote marker, topic{i} details about quokka {i}.\n")
    with open_host(workspace, tmp_path / "a", pg) as a, open_host(workspace, tmp_path / "b", pg) as b:
        a.sync()
        answers(b)
        loaded = b.vector_path().rows_read
        assert loaded >= NOTES  # the first search loaded every row

        steps = [  # (a change of one note, the rows host B reads for it: the note's one chunk, or none)
            (lambda: (memory / "new.md").write_text("- zebra stripes, a new quokka note\n"), 1),
            (lambda: (memory / "n03.md").write_text("- topic7 details edited: zebra and quokka\n"), 1),
            (lambda: (memory / "n05.md").unlink(), 0),
            (lambda: (memory / "n06.md").rename(memory / "otter.md"), 1),
        ]
        for step, rows in steps:
            step()
            a.sync()
            assert rows_read_following(b, workspace, tmp_path / "fresh", pg) == rows

        for i in range(10, 20):  # several writes between two searches
            (memory / f"n{i:02d}.md").unlink()
            a.sync()
        (memory / "late.md").write_text("- renamed otter note, late\n")
        a.sync()
        # the deleted notes leave no row to read
        assert rows_read_following(b, workspace, tmp_path / "fresh", pg) == 1

        a.sync(force=True)  # a rebuild resets the log: B loads every row once, then follows again
        assert rows_read_following(b, workspace, tmp_path / "fresh", pg) >= NOTES - 12
        (memory / "after.md").write_text("- quokka habits after the rebuild\n")
        a.sync()
        assert rows_read_following(b, workspace, tmp_path / "fresh", pg) == 1
        assert_counts_kept(a)


def assert_counts_kept(index: MemoryIndex) -> None:
    """The counts the triggers keep (what a search reads after a write) are the tables' own."""
    kept = "SELECT source, audience, n FROM chunk_counts WHERE n > 0 ORDER BY 1, 2"
    counted = "SELECT source, audience, count(*) FROM chunks GROUP BY 1, 2 ORDER BY 1, 2"
    assert rows(index, kept) == rows(index, counted)
    fts = "SELECT count(*), coalesce(sum(fts_len), 0) FROM chunks_fts"
    assert rows(index, "SELECT rows, length FROM chunks_fts_totals") == rows(index, fts)


def test_a_write_outside_a_sync_and_a_trimmed_log_are_followed_too(
    workspace: Path, tmp_path: Path, pg: StoreUnderTest
) -> None:
    memory = workspace / "memory"
    for i in range(NOTES):
        (memory / f"n{i:02d}.md").write_text(f"- everynote marker, topic{i} details about quokka {i}.\n")
    with open_host(workspace, tmp_path / "a", pg) as a, open_host(workspace, tmp_path / "b", pg) as b:
        a.sync()
        answers(b)
        # Another client changes rows with plain SQL (the audience of one note): logged by the triggers.
        run(a, "UPDATE chunks SET audience = 'owner' WHERE path = 'memory/n07.md'")
        assert rows_read_following(b, workspace, tmp_path / "fresh", pg) == 1
        # The log trimmed past what B holds: B loads every row, and is right.
        run(a, "UPDATE meta SET value = (SELECT value::bigint + 1 FROM meta WHERE key = 'write_generation')"
            " WHERE key = 'changes_from'")  # fmt: skip
        (memory / "new.md").write_text("- zebra stripes, a new quokka note\n")
        a.sync()
        assert rows_read_following(b, workspace, tmp_path / "fresh", pg) >= NOTES
        assert_counts_kept(a)


def test_an_index_made_before_the_log_gains_it_with_its_counts(
    workspace: Path, tmp_path: Path, pg: StoreUnderTest
) -> None:
    memory = workspace / "memory"
    for i in range(NOTES):
        (memory / f"n{i:02d}.md").write_text(f"- everynote marker, topic{i} details about quokka {i}.\n")
    with open_host(workspace, tmp_path / "a", pg) as a:
        a.sync()
        expected = answers(a)
        for statement in (
            "DROP TABLE chunk_changes",
            "DROP TABLE chunk_counts",
            "DROP TABLE chunks_fts_totals",
            "DROP FUNCTION sessionmem_log_chunks() CASCADE",
            "DROP FUNCTION sessionmem_count_fts() CASCADE",
            "DELETE FROM meta WHERE key = 'changes_from'",
        ):
            run(a, statement)
    with open_host(workspace, tmp_path / "a", pg) as a, open_host(workspace, tmp_path / "b", pg) as b:
        assert answers(b) == expected
        assert_counts_kept(a)
        (memory / "new.md").write_text("- zebra stripes, a new quokka note\n")
        a.sync()
        assert rows_read_following(b, workspace, tmp_path / "fresh", pg) == 1
        assert_counts_kept(a)


def test_changes_that_outgrow_the_room_or_delete_a_quarter_compact_to_what_a_load_holds() -> None:
    import numpy as np

    from sessionmem.memory.search.matrix_rows import MatrixState
    from sessionmem.memory.search.sign_codes import SignCodes
    from sessionmem.memory.store.seam import MatrixChanges

    rng = np.random.default_rng(3)

    def row(cid: str) -> tuple[str, str, bytes, str, str]:
        vec = rng.normal(size=8).astype("<f4")
        return (cid, "memory", vec.tobytes(), "2026-01-02", "owner")

    rows = {f"c{i}": row(f"c{i}") for i in range(40)}
    loaded = (
        list(rows), ["memory"] * 40, ["2026-01-02"] * 40, ["owner"] * 40,
        np.frombuffer(b"".join(r[2] for r in rows.values()), dtype="<f4").reshape(40, 8).copy(),
    )  # fmt: skip
    # a matrix of its own size (no room to grow), with the sign bits of a large one (sign_codes.py)
    state = MatrixState.loaded("m", 0, loaded, coarse=True)
    for token in range(1, 40):
        gone = [f"c{token - 1}"] if token % 3 else []
        fresh = [row(f"n{token}"), row(f"n{token}b")]
        for cid in gone:
            rows.pop(cid)
        rows.update({r[0]: r for r in fresh})
        changed = state.changed(token, MatrixChanges(gone + [r[0] for r in fresh], fresh))
        assert changed is not None
        state = changed
        live = [i for i in range(len(state.ids)) if state.live is None or state.live[i]]
        assert state.rows == len(live) == len(rows)
        assert {state.ids[i]: state.matrix[i].tobytes() for i in live} == {c: r[2] for c, r in rows.items()}
        assert state.codes is not None and state.codes.rows == len(state.ids)  # the new rows' bits too
        assert np.array_equal(state.codes.codes, SignCodes(state.matrix).codes)  # each row's own bits
    assert state.dead * 4 <= len(state.ids)  # compacted on the way


class RotatedHashEmbedder(HashEmbedder):
    """HashEmbedder's vectors turned by one fixed rotation: the same cosines, but signs on every dimension
    (a bag of words has none below zero), as a sentence model's vectors have."""

    def __init__(self) -> None:
        super().__init__(model="hash-rotated")
        import numpy as np

        self.rotation = np.linalg.qr(np.random.default_rng(7).normal(size=(64, 64)))[0].astype(np.float32)

    def embed_query(self, text: str) -> Any:
        return super().embed_query(text) @ self.rotation

    def embed_documents(self, texts: Any, progress: Any = None) -> Any:
        return super().embed_documents(texts, progress) @ self.rotation


def test_a_matrix_past_the_coarse_threshold_follows_writes_and_answers_as_a_fresh_load(
    workspace: Path, tmp_path: Path, pg: StoreUnderTest
) -> None:
    """The sign-bit path (sign_codes.py) on a matrix that follows another host's writes: new, edited and
    deleted notes; each question's nearest notes are those a matrix loaded afresh finds (it reads every
    row), and a new or edited note is found by its own words."""
    from sessionmem.memory.search.vectors import MatrixVectors

    memory = workspace / "memory"
    words = ("quokka", "zebra", "otter", "heron", "marmot", "badger", "lynx", "ibis")
    for i in range(300):  # more rows than the 160 candidates of a top 2: the sign bits choose
        picked = " ".join(words[(i * j) % len(words)] for j in (1, 3, 5))
        (memory / f"n{i:03d}.md").write_text(f"- note {i} about {picked}, topic{i % 37}.\n")
    embedder = RotatedHashEmbedder()
    written = {  # the notes host A writes, each after the last, and the deletions among them
        "new.md": "- quokka zebra otter, a new note about lynx\n",
        "n003.md": "- heron marmot lynx, edited with ibis\n",
        "n005.md": None,
        "n1xx": None,  # n100-n179: past a quarter of the rows, so the matrix is compacted
        "late.md": "- ibis badger heron, late note on otter\n",
    }
    questions = [f"{a} {b} topic{t}" for a, b, t in zip(words[:5], words[3:], range(5), strict=True)]
    questions += [text[2:-1] for text in written.values() if text]
    vectors = {q: embedder.embed_query(q) for q in questions}
    selection = EmbedderSelection(embedder, "test")
    with MemoryIndex.open(
        "main", workspace, config(pg), state_dir=tmp_path / "a", selection=selection, watch=False
    ) as a:
        a.sync()
        ((model,),) = rows(a, "SELECT DISTINCT model FROM chunks")
        follower = open_store(a)
        try:
            matrix = MatrixVectors(follower, coarse_min_rows=100)

            def nearest() -> dict[str, list[tuple[str, float]]]:
                """Each question's two nearest rows on the following matrix, checked against a fresh load."""
                fresh_store = open_store(a)
                try:
                    fresh = MatrixVectors(fresh_store, coarse_min_rows=100)
                    out = {}
                    for q, vec in vectors.items():
                        out[q] = matrix.knn(vec, 2, model=model, sources=("memory",))
                        assert out[q] == fresh.knn(vec, 2, model=model, sources=("memory",)), q
                        assert len(out[q]) == 2
                    return out
                finally:
                    fresh_store.close()

            nearest()
            loaded = matrix.rows_read
            for name, text in written.items():
                if name == "n1xx":
                    for i in range(100, 180):
                        (memory / f"n{i:03d}.md").unlink()
                elif text is None:
                    (memory / name).unlink()
                else:
                    (memory / name).write_text(text)
                a.sync()
                found = nearest()
                if text:
                    ((path,),) = rows(a, "SELECT path FROM chunks WHERE id = ?", found[text[2:-1]][0][0])
                    assert path == f"memory/{name}"  # the note just written, by its own words
            assert matrix.rows_read - loaded == 3  # the changed rows only, never a full load
        finally:
            follower.close()


def test_forgetting_leaves_no_id_of_the_forgotten_chunks_in_the_log(
    workspace: Path, tmp_path: Path, pg: StoreUnderTest
) -> None:
    memory = workspace / "memory"
    for i in range(NOTES):
        (memory / f"n{i:02d}.md").write_text(f"- everynote marker, topic{i} details about quokka {i}.\n")
    with open_host(workspace, tmp_path / "a", pg) as a, open_host(workspace, tmp_path / "b", pg) as b:
        a.sync()
        answers(b)
        (memory / "n07.md").write_text("- topic7 details edited: zebra and quokka\n")
        a.sync()  # the log now names n07's chunks
        with a.sync_lock():
            (memory / "n07.md").unlink()
            assert a.erase([], ["memory/n07.md"]).chunks == 1
        assert rows(a, "SELECT count(*) FROM chunk_changes") == [(0,)]  # no id of n07's chunks
        assert rows_read_following(b, workspace, tmp_path / "fresh", pg) >= NOTES - 1  # every row, once
