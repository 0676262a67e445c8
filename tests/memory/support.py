"""Helpers shared by the memory index tests: a deterministic test embedder, the session-source
configuration, an index opener that closes what it opened, and transcript helpers."""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sessionmem.config import Config, merge
from sessionmem.memory.embed.embedder import EmbedderSelection
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.reference_notes import REFERENCE_NOTES
from sessionmem.memory.sync.session_text import flatten_line
from sessionmem.messages import Message
from sessionmem.session.stores.transcript_folder import Transcript
from tests.memory.stores import SQLITE, StoreUnderTest, rows

FTS_ONLY = EmbedderSelection(None, "none", reason="no provider in tests")


class HashEmbedder:
    """Deterministic bag-of-words vectors (hashed words), L2-normalised; records every call."""

    provider = "test"
    max_input_tokens = 2048

    def __init__(
        self, dims: int = 64, model: str = "hash-bow", fail: bool = False, delay: float = 0.0
    ) -> None:
        self.model = model
        self.provider_key = hashlib.sha256(f"test:{model}:{dims}".encode()).hexdigest()
        self._dims = dims
        self.fail = fail
        self.delay = delay
        self.calls: list[list[str]] = []
        self.reference_calls = 0  # batches of the calibration's reference notes (``reference_notes.py``)
        self.texts: list[str] = []  # every text asked for, in order (a test may clear it)
        # While ``hold`` is set to an unset Event, batches wait for it (up to 10 s): a caller that
        # returns while they wait did not wait for the embedding; ``held_too_long`` says one gave up.
        self.hold: threading.Event | None = None
        self.held_too_long = False

    @property
    def dims(self) -> int | None:
        return self._dims

    def _vector(self, text: str) -> np.ndarray:
        vec = np.zeros(self._dims, dtype=np.float32)
        for word in re.findall(r"\w+", text.lower()):
            vec[int(hashlib.md5(word.encode()).hexdigest(), 16) % self._dims] += 1.0
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm else vec

    def embed_query(self, text: str) -> np.ndarray:
        return self._vector(text)

    def embed_documents(self, texts: Sequence[str], progress: Any = None) -> np.ndarray:
        if tuple(texts) == REFERENCE_NOTES:  # the calibration's, once per index: not the index's batches
            self.reference_calls += 1
            return np.stack([self._vector(t) for t in texts])
        self.calls.append(list(texts))
        self.texts.extend(texts)
        if self.delay:
            time.sleep(self.delay)
        if self.hold is not None and self._holds(texts) and not self.hold.wait(10):
            self.held_too_long = True
        if self.fail:
            raise RuntimeError("embedding service exploded")
        return np.stack([self._vector(t) for t in texts]) if texts else np.zeros((0, self._dims), np.float32)

    def _holds(self, texts: Sequence[str]) -> bool:
        """Which batches ``hold`` applies to (all of them; subclasses narrow it)."""
        return True

    @property
    def embedded_texts(self) -> list[str]:
        return [t for call in self.calls for t in call]


def make_config(
    *,
    delta_messages: int = 50,
    delta_bytes: int = 100_000,
    debounce_ms: int = 30,
    post_index_sync: str = "async",
    tokens: int = 60,
    overlap: int = 12,
    sources: Sequence[str] = ("memory", "sessions"),
) -> Config:
    return merge(
        Config(),
        {
            "agents": {
                "defaults": {
                    "userTimezone": "UTC",
                    "compaction": {"keepRecentTokens": 40, "postIndexSync": post_index_sync},
                    "memorySearch": {
                        "provider": "none",
                        "sources": list(sources),
                        "chunking": {"tokens": tokens, "overlap": overlap},
                        "query": {"minScore": 0.0},
                        "sync": {
                            "watch": False,
                            "sessions": {
                                "deltaMessages": delta_messages,
                                "deltaBytes": delta_bytes,
                                "debounceMs": debounce_ms,
                            },
                        },
                    },
                }
            }
        },
    )


@contextlib.contextmanager
def index_opener(
    workspace: Path, state: Path, store: StoreUnderTest = SQLITE
) -> Iterator[Callable[..., MemoryIndex]]:
    """``open(config, embedder=None)`` opens the main agent's index (keyword-only without an embedder) in
    ``store``; every index opened is closed on exit."""
    opened: list[MemoryIndex] = []

    def _open(config: Config, embedder: HashEmbedder | None = None) -> MemoryIndex:
        selection = EmbedderSelection(embedder, "test") if embedder else EmbedderSelection(None, "none")
        settings = store.settings(config.for_agent("main").memory_search)
        index = MemoryIndex.open("main", workspace, settings, state_dir=state, selection=selection)
        opened.append(index)
        return index

    try:
        yield _open
    finally:
        for index in opened:
            index.close()


def sessions_dir(state: Path) -> Path:
    return state / "agents" / "main" / "sessions"


def chunk_rows(index: MemoryIndex, path: str) -> list[tuple[int, str, int, int, str, int]]:
    """(rowid, id, start, end, text, updated_at) of a path's chunks: a rewritten row gets a new updated_at."""
    return rows(  # type: ignore[return-value]
        index,
        "SELECT rowid, id, start_line, end_line, text, updated_at FROM chunks WHERE path = ?"
        " ORDER BY start_line, rowid",
        path,
    )


def chat(
    transcript: Transcript, index: MemoryIndex, count: int, start: int = 0, topic: str = "gardening"
) -> None:
    """``count`` messages, alternating user/assistant, each notified to the index as the runner does."""
    for i in range(start, start + count):
        words = f"message {i} about {topic} number{i} with some filler words to read"
        msg = Message.user(words) if i % 2 == 0 else Message.assistant(f"reply {words}")
        transcript.append_message(msg)
        index.notify_transcript_appended(transcript.path)


def new_transcript(state: Path, workspace: Path, name: str = "s1") -> Transcript:
    return Transcript.open(sessions_dir(state) / f"{name}.jsonl", name, workspace)


def jsonl_messages(path: Path, start: int, end: int) -> list[str]:
    """The flattened messages on JSONL lines ``start..end`` (what a user reading the file would see)."""
    out = []
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if start <= number <= end:
                flat = flatten_line(raw)
                if flat is not None:
                    out.append(flat[0])
    return out
