"""Runtime embedding fallback (reference §8): a provider that keeps failing during a sync is replaced
once by ``memorySearch.fallback`` and the index is rebuilt with it. Real loopback HTTP server as the
primary provider (litellm over HTTP), the real GGUF model as the fallback, real SQLite with sqlite-vec."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sessionmem.config import MemorySearchConfig
from sessionmem.errors import EmbeddingError
from sessionmem.memory.embed.embedder import EmbedderSelection
from sessionmem.memory.embed.remote import RemoteEmbedder, RetryPolicy
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.records import SearchRequest
from sessionmem.memory.store.database import connect
from tests.support.openai_server import OpenAIServer, http_error

FAST_RETRY = RetryPolicy(base_delay_s=0.01, max_delay_s=0.02)
BROKEN = "upstream embedding backend is down"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def primary(server: OpenAIServer) -> EmbedderSelection:
    """What ``select_embedder`` makes of ``provider: openai`` with a keyless ``remote.baseUrl``,
    with a short retry policy so the test does not wait for the real backoff."""
    embedder = RemoteEmbedder("openai-compatible", "text-embedding-3-small", base_url=server.base_url)
    embedder.retry = FAST_RETRY
    return EmbedderSelection(embedder, "openai")


def config(server: OpenAIServer, **values: Any) -> MemorySearchConfig:
    return MemorySearchConfig.model_validate(
        {"provider": "openai", "remote": {"baseUrl": server.base_url}, **values}
    )


def break_provider(server: OpenAIServer) -> None:
    """Enough 500s to use up every attempt of one batch."""
    server.embeddings.push(*[http_error(500, BROKEN) for _ in range(FAST_RETRY.attempts)])


def chunk_vectors(index: MemoryIndex) -> list[tuple[str, str, bytes]]:
    conn, _ = connect(index.path)
    try:
        return conn.execute("SELECT model, text, embedding FROM chunks ORDER BY path").fetchall()
    finally:
        conn.close()


@pytest.mark.local_model
def test_failing_provider_switches_once_to_the_local_fallback_and_rebuilds(
    openai_server: OpenAIServer, gguf_model: Path, workspace: Path, tmp_path: Path
) -> None:
    write(workspace / "memory" / "pets.md", "Our dog Rex loves long walks in the park.\n")
    settings = config(openai_server, fallback="local", local={"modelPath": str(gguf_model)})
    index = MemoryIndex.open(
        "main", workspace, settings, state_dir=tmp_path / "state", selection=primary(openai_server)
    )
    with index:
        assert index.sync().embedded == 1  # the remote provider works at first
        write(workspace / "memory" / "work.md", "The quarterly budget review is scheduled for March.\n")
        break_provider(openai_server)

        report = index.sync()

        # the first sync: one request for the note, one for the calibration probes, one for the reference
        # notes a small index's calibration leans on (sessionmem.memory.search.reference_notes); then the
        # retries
        assert len(openai_server.embeddings.requests) == 3 + FAST_RETRY.attempts
        assert report.full and report.embedded == 2  # every chunk again, with the fallback
        assert "switched to the fallback local" in report.issues[0]
        status = index.status()
        assert (status.provider_requested, status.provider, status.mode) == ("openai", "local", "hybrid")
        assert status.fallback_from == "openai-compatible"
        assert status.fallback_reason is not None and BROKEN in status.fallback_reason
        assert status.model == str(gguf_model) and status.vector_dims == 384
        assert not status.dirty and status.files == 2

        local = index.selection.embedder
        assert local is not None
        stored = chunk_vectors(index)
        assert {model for model, _, _ in stored} == {str(gguf_model)}
        for _, text, blob in stored:
            expected = local.embed_documents([text])[0]
            assert np.allclose(np.frombuffer(blob, dtype="<f4"), expected, atol=1e-5)

        response = index.search(SearchRequest("puppy exercise outdoors", min_score=0.0, explain=True))
        assert response.results[0].path == "memory/pets.md"
        assert response.results[0].explanation is not None
        assert response.results[0].explanation.vector_score is not None
        assert (response.provider, response.mode) == ("local", "hybrid")
        assert response.fallback is not None and response.fallback["from"] == "openai-compatible"
        assert len(openai_server.embeddings.requests) == 3 + FAST_RETRY.attempts  # the remote is done


def test_the_original_error_stands_when_the_fallback_cannot_be_created(
    openai_server: OpenAIServer, workspace: Path, tmp_path: Path
) -> None:
    write(workspace / "memory" / "a.md", "the billing cutover is on tuesday\n")
    missing = tmp_path / "no-such-model.gguf"
    settings = config(openai_server, fallback="local", local={"modelPath": str(missing)})
    selection = primary(openai_server)
    with MemoryIndex.open(
        "main", workspace, settings, state_dir=tmp_path / "state", selection=selection
    ) as index:
        break_provider(openai_server)
        with pytest.raises(EmbeddingError, match=BROKEN) as failure:
            index.sync()
        assert "Fallback" not in str(failure.value)
        status = index.status()
        assert (status.provider, status.fallback_from) == ("openai-compatible", None)
        assert any(BROKEN in issue for issue in status.issues)
        assert index.sync().embedded == 1  # the provider recovered: nothing was switched


def test_no_fallback_configured_keeps_the_error(
    openai_server: OpenAIServer, workspace: Path, tmp_path: Path
) -> None:
    write(workspace / "memory" / "a.md", "the billing cutover is on tuesday\n")
    settings = config(openai_server)
    selection = primary(openai_server)
    with MemoryIndex.open(
        "main", workspace, settings, state_dir=tmp_path / "state", selection=selection
    ) as index:
        break_provider(openai_server)
        with pytest.raises(EmbeddingError, match=BROKEN):
            index.sync()
        assert index.status().provider == "openai-compatible"
