"""An embedding provider that answers with unusable vectors loses nothing: a NaN, all-zero or
wrong-width vector keeps only its chunk keyword-only (and says so in ``status``) until a later sync
gets a good one, and a provider whose width changed between two processes gets the index rebuilt at
the new width instead of mixing widths. Real loopback HTTP server (litellm over HTTP), real SQLite
with sqlite-vec, the real ``MemoryIndex``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sessionmem.config import MemorySearchConfig
from sessionmem.errors import EmbeddingError
from sessionmem.memory.embed.embedder import EmbedderSelection
from sessionmem.memory.embed.remote import RemoteEmbedder, RetryPolicy, UnusableVectorsError
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.records import SearchRequest, SearchResult
from sessionmem.memory.store.database import connect
from tests.support.openai_server import OpenAIServer, embedding_inputs, embedding_reply, hashed_vector

FAST_RETRY = RetryPolicy(base_delay_s=0.01, max_delay_s=0.02)
NOTES = {
    "pets.md": "Our dog Rex loves long walks in the park.\n",
    "work.md": "The quarterly budget review is scheduled for March.\n",
    "garden.md": "The greenhouse tomatoes need watering every morning.\n",
}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def settings(server: OpenAIServer) -> MemorySearchConfig:
    return MemorySearchConfig.model_validate(
        {"provider": "openai", "remote": {"baseUrl": server.base_url}, "query": {"minScore": 0.0}}
    )


def open_index(server: OpenAIServer, workspace: Path, state: Path) -> MemoryIndex:
    """A fresh process's view: a new embedder (its width unknown until it is first called)."""
    embedder = RemoteEmbedder("openai-compatible", "text-embedding-3-small", base_url=server.base_url)
    embedder.retry = FAST_RETRY
    return MemoryIndex.open(
        "main",
        workspace,
        settings(server),
        state_dir=state,
        selection=EmbedderSelection(embedder, "openai"),
        watch=False,
    )


def spoil(server: OpenAIServer, marker: str, kind: str) -> None:
    """Answer every text containing ``marker`` with a bad vector (``kind``), the others normally."""

    def handler(body: dict[str, Any]) -> Any:
        vectors = []
        for text in embedding_inputs(body):
            vector = hashed_vector(text, server.embeddings.dims)
            if marker in text:
                if kind == "zero":
                    vector = [0.0] * len(vector)
                elif kind == "nan":
                    vector[0] = math.nan
                else:  # "wrong_width"
                    vector = vector[: len(vector) // 2]
            vectors.append(vector)
        return embedding_reply(vectors)

    server.embeddings.handler = handler


def top(index: MemoryIndex, query: str) -> SearchResult:
    response = index.search(SearchRequest(query, min_score=0.0, explain=True))
    assert response.results, f"nothing found for {query!r}"
    return response.results[0]


def vector_score(result: SearchResult) -> float | None:
    assert result.explanation is not None
    return result.explanation.vector_score


def stored(index: MemoryIndex, sql: str) -> list[tuple[Any, ...]]:
    conn, _ = connect(index.path, load_vector=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("kind", ["zero", "nan", "wrong_width"])
def test_a_bad_vector_keeps_its_chunk_keyword_only_until_a_later_sync_embeds_it(
    openai_server: OpenAIServer, workspace: Path, state: Path, kind: str
) -> None:
    for name, text in NOTES.items():
        write(workspace / "memory" / name, text)
    spoil(openai_server, "greenhouse", kind)
    with open_index(openai_server, workspace, state) as index:
        report = index.sync()  # raised EmbeddingError for the whole batch before

        assert report.files_indexed == 3
        pets = top(index, "dog walks in the park")
        assert pets.path == "memory/pets.md" and vector_score(pets) is not None
        work = top(index, "quarterly budget review")
        assert work.path == "memory/work.md" and vector_score(work) is not None
        garden = top(index, "greenhouse tomatoes")
        assert garden.path == "memory/garden.md"
        assert vector_score(garden) is None  # found by keyword only
        status = index.status()
        assert status.files == 3 and status.vector_dims == 384
        [issue] = [i for i in status.issues if "memory/garden.md" in i]
        assert "keyword" in issue
        assert any("memory/garden.md" in i for i in report.issues)
        widths = stored(index, "SELECT path, length(embedding) / 4 FROM chunks ORDER BY path")
        assert widths == [("memory/garden.md", None), ("memory/pets.md", 384), ("memory/work.md", 384)]
        assert stored(index, "SELECT count(*) FROM embedding_cache") == [(2,)]  # the bad vector: not cached

        # Still misbehaving and nothing changed: the chunk is asked for again, nothing is rewritten.
        rowids = stored(index, "SELECT rowid, id FROM chunks ORDER BY rowid")
        again = index.sync()
        assert again.embedded == 1 and again.files_indexed == 0 and not again.wrote
        assert stored(index, "SELECT rowid, id FROM chunks ORDER BY rowid") == rowids

        # Still misbehaving: syncs keep working, and a new note is indexed with its vector.
        write(workspace / "memory" / "cats.md", "The cat Felix sleeps on the warm windowsill.\n")
        assert index.sync().files_indexed == 1  # the new note only
        cats = top(index, "cat sleeps on the windowsill")
        assert cats.path == "memory/cats.md" and vector_score(cats) is not None
        assert any("memory/garden.md" in i for i in index.status().issues)

        openai_server.embeddings.handler = None  # the provider recovers
        requests = len(openai_server.embeddings.requests)
        healed = index.sync()

        assert healed.embedded == 1  # only the chunk that had no vector was sent again
        assert healed.files_indexed == 0 and healed.vectors_filled == 1 and healed.wrote
        assert stored(index, "SELECT rowid, id FROM chunks ORDER BY rowid")[:3] == rowids  # filled in place
        assert len(openai_server.embeddings.requests) == requests + 1
        garden = top(index, "greenhouse tomatoes")
        assert garden.path == "memory/garden.md" and vector_score(garden) is not None
        status = index.status()
        assert not [i for i in status.issues if "garden" in i]
        assert not status.dirty
        assert stored(index, "SELECT count(*) FROM chunks WHERE embedding IS NULL") == [(0,)]
        requests = len(openai_server.embeddings.requests)
        assert index.sync().embedded == 0 and len(openai_server.embeddings.requests) == requests


def test_the_embedder_hands_back_the_good_rows_with_the_bad_ones_named(openai_server: OpenAIServer) -> None:
    openai_server.embeddings.corrupt = "zero"  # the last vector of each answer is all zeros
    embedder = RemoteEmbedder("openai-compatible", "m", base_url=openai_server.base_url)
    with pytest.raises(UnusableVectorsError, match="all-zero vector") as failure:
        embedder.embed_documents(["alpha", "beta", "gamma"])

    assert failure.value.problems.keys() == {2}
    vectors = failure.value.vectors
    assert vectors.shape == (3, 384) and np.isnan(vectors[2]).all()
    np.testing.assert_allclose(vectors[:2], [hashed_vector("alpha"), hashed_vector("beta")], atol=1e-6)
    assert len(openai_server.embeddings.requests) == 1  # not retried: asking again at once won't fix it


def test_a_provider_whose_every_vector_is_bad_fails_the_sync_and_keeps_the_index(
    openai_server: OpenAIServer, workspace: Path, state: Path
) -> None:
    write(workspace / "memory" / "pets.md", NOTES["pets.md"])
    with open_index(openai_server, workspace, state) as index:
        index.sync()
        write(workspace / "memory" / "work.md", NOTES["work.md"])
        write(workspace / "memory" / "garden.md", NOTES["garden.md"])
        spoil(openai_server, "", "zero")  # every text: the provider is broken, not one input

        with pytest.raises(EmbeddingError, match="no usable vector for any of 2 texts"):
            index.sync()

        status = index.status()
        assert status.files == 1 and status.dirty
        assert any("no usable vector" in issue for issue in status.issues)
        openai_server.embeddings.handler = None  # (queries are embedded too)
        pets = top(index, "dog walks in the park")
        assert pets.path == "memory/pets.md" and vector_score(pets) is not None


def test_a_width_change_between_processes_rebuilds_the_index_at_the_new_width(
    openai_server: OpenAIServer, workspace: Path, state: Path
) -> None:
    write(workspace / "memory" / "pets.md", NOTES["pets.md"])
    write(workspace / "memory" / "work.md", NOTES["work.md"])
    with open_index(openai_server, workspace, state) as index:
        index.sync()
        assert index.status().vector_dims == 384

    openai_server.embeddings.dims = 256  # the endpoint now serves another model under the same name
    write(workspace / "memory" / "garden.md", NOTES["garden.md"])
    with open_index(openai_server, workspace, state) as index:
        report = index.sync()

        assert report.full
        assert any("384" in i and "256" in i for i in report.issues)
        widths = stored(index, "SELECT DISTINCT length(embedding) / 4 FROM chunks")
        assert widths == [(256,)]  # every chunk, old and new, at the new width; none without
        status = index.status()
        assert status.vector_dims == 256 and status.files == 3 and not status.dirty
        if status.vector_loaded:
            assert stored(index, "SELECT count(*) FROM chunks_vec") == [(3,)]
        pets = top(index, "dog walks in the park")
        assert pets.path == "memory/pets.md" and vector_score(pets) is not None
        garden = top(index, "greenhouse tomatoes")
        assert garden.path == "memory/garden.md" and vector_score(garden) is not None
        assert index.sync().embedded == 0


def test_a_width_change_with_no_file_changed_rebuilds_once_the_width_is_known(
    openai_server: OpenAIServer, workspace: Path, state: Path
) -> None:
    write(workspace / "memory" / "pets.md", NOTES["pets.md"])
    with open_index(openai_server, workspace, state) as index:
        index.sync()

    openai_server.embeddings.dims = 256
    with open_index(openai_server, workspace, state) as index:
        index.sync()  # nothing to embed: the new width is not known yet, nothing is touched
        assert stored(index, "SELECT DISTINCT length(embedding) / 4 FROM chunks") == [(384,)]
        top(index, "dog walks")  # the query's vector tells the width
        report = index.sync()

        assert report.full
        assert stored(index, "SELECT DISTINCT length(embedding) / 4 FROM chunks") == [(256,)]
        pets = top(index, "dog walks in the park")
        assert pets.path == "memory/pets.md" and vector_score(pets) is not None
