"""The seam between sessions and memory: what a session runner may ask of an agent's memory index.

Sessions use memory; memory knows nothing of sessions (the rooms' order, ``tests/test_module_shape.py``).
So the contract is written here, on the memory side, as small protocols that ``MemoryIndex`` implements
and the runner is typed with (``SessionRunner(memory_index=...)``; None: no memory index):

- :class:`ForgettableMemory`, what ``forget`` needs: the index's place (to find copies kept aside), its
  sync lock, and the erasure of a person's rows;
- :class:`SessionMemory`, what the runner needs, ``forget`` included: a transcript grew (cheap, debounced
  in the index), a search (the session's memory_search tool), a sync now or in the background (all
  files, or only some transcripts), the files changed (mark dirty), the folder or shelf the index reads
  transcripts from, and at the end wait for it or close it.

Both are ``runtime_checkable`` so a test can say ``isinstance(index, SessionMemory)``; mypy checks the
signatures where an index is passed in.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from sessionmem.dsn import PgTarget
    from sessionmem.memory.search.records import SearchRequest, SearchResponse
    from sessionmem.memory.store.erase import IndexErasure
    from sessionmem.memory.sync.transcript_names import TranscriptShelf


@runtime_checkable
class ForgettableMemory(Protocol):
    """What forgetting a person asks of the memory index besides (``MemoryIndex`` implements it)."""

    @property
    def path(self) -> Path | PgTarget:
        """Where the index is: its SQLite file, or its PostgreSQL schema."""
        ...

    def sync_lock(self) -> Any:
        """The lock every sync holds (a context manager); held around an erasure and the files' removal."""
        ...

    def erase(
        self, audiences: Collection[str], paths: Collection[str] = ..., *, dry_run: bool = ...
    ) -> IndexErasure:
        """Remove the rows of the files labelled with ``audiences`` or indexed as ``paths``."""
        ...


@runtime_checkable
class SessionMemory(ForgettableMemory, Protocol):
    """What the session runner asks of the agent's memory index (``MemoryIndex`` implements it), its
    ``forget`` included."""

    @property
    def sessions_dir(self) -> Path:
        """The folder whose transcripts the ``sessions`` source indexes."""
        ...

    @property
    def transcripts(self) -> TranscriptShelf:
        """Where the ``sessions`` source reads transcripts (that folder, or the session store's shelf)."""
        ...

    def notify_transcript_appended(self, path: str | os.PathLike[str]) -> None:
        """A transcript grew (its file, or its name ``<id>.jsonl`` on the shelf); the index decides later
        (debounced) whether to index its new lines."""
        ...

    def sync(
        self, *, reason: str = ..., session_files: Iterable[str | os.PathLike[str]] | None = ...
    ) -> object:
        """Bring the index in line with the files now (only ``session_files``' new lines when given)."""
        ...

    def sync_in_background(self, reason: str = ...) -> None:
        """Start a sync in a thread unless one is running."""
        ...

    def sync_session_files_in_background(
        self, paths: Iterable[str | os.PathLike[str]], reason: str = ...
    ) -> None:
        """Index only ``paths`` (their new lines) in a thread."""
        ...

    def search(self, request: SearchRequest) -> SearchResponse:
        """Rank memory for ``request`` (the ``memory_search`` tool of the session's turns)."""
        ...

    def mark_dirty(self) -> None:
        """The memory files changed: the next search syncs first (in the background)."""
        ...

    def wait_idle(self, timeout: float = ...) -> bool:
        """Wait for pending transcript checks and background syncs; False on timeout."""
        ...

    def close(self) -> None:
        """Stop the index's threads and close its database."""
        ...
