"""When a growing session transcript gets re-indexed (reference §5 "delta tracking", §13).

The runner tells the index after each transcript append (in-process, a set insert). The first
notification starts a debounce timer (``sync.sessions.debounceMs``, 5 s by default; later notifications
do not push it back); when it fires, each notified transcript is checked with
:class:`~sessionmem.memory.sync.session_text.SessionDeltaTracker` through the index's
:class:`~sessionmem.memory.sync.transcript_names.TranscriptShelf` (a sessions folder, or the session
store's rows): its size plus a newline count of the bytes appended since the last check. Only a
transcript whose pending growth reaches ``deltaBytes`` (100,000) or ``deltaMessages`` (50 lines) is
handed to ``on_dirty``, which the index turns into a background pass over that transcript alone. A
normal turn therefore costs a set insert and, once per debounce window, a ``stat`` (or one query) and a
read of the few new bytes; the transcript is not re-indexed until it has grown enough.

After any pass indexed a transcript, the index calls :meth:`TranscriptDeltaScheduler.indexed` so its
pending growth starts from zero again. Files outside the agent's sessions folder, and names that are not
live transcripts (``*.jsonl``, archives excluded), are ignored: a ``.reset.`` archive never grows (a full
sync moves the live file's rows to it, see ``Indexer._adopt_renames``) and a ``.deleted.`` one is not
indexed at all.

Opt-in (DESIGN decision 8): transcripts are a source when ``memorySearch.sources`` lists ``"sessions"``,
as the seeds configure it. OpenClaw also requires ``experimental.sessionMemory``; we accept that key
but do not require it, since a source listed but silently dropped is the trap users report (#85398).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from sessionmem.memory.sync.session_text import SessionDeltaTracker
from sessionmem.memory.sync.transcript_names import FolderShelf, TranscriptShelf, is_live_transcript_name

if TYPE_CHECKING:
    from sessionmem.config import MemorySearchConfig, SessionSyncConfig

__all__ = ["TranscriptDeltaScheduler", "sessions_enabled"]

log = logging.getLogger(__name__)


def sessions_enabled(settings: MemorySearchConfig) -> bool:
    """True when session transcripts are indexed: ``sources`` lists ``"sessions"`` (see module docstring)."""
    return "sessions" in settings.sources


class Timer(Protocol):
    """A started one-shot timer (``threading.Timer`` is one)."""

    def cancel(self) -> None: ...


def start_daemon_timer(delay_s: float, fire: Callable[[], object]) -> Timer:
    """``fire`` on a daemon thread after ``delay_s`` seconds."""
    timer = threading.Timer(delay_s, fire)
    timer.name = "sessionmem-session-delta"
    timer.daemon = True
    timer.start()
    return timer


class TranscriptDeltaScheduler:
    """Debounced delta checks of appended transcripts; thread-safe, one per index.

    ``transcripts``: the shelf they are read from (a path: that sessions folder). Transcripts are
    tracked by name (``<id>.jsonl``); a notification may give the name or, for a folder, the file's path.
    ``baseline(name)`` gives the size the index last recorded for a transcript it has not tracked yet
    (None when never indexed: all of it is then new). ``on_dirty(names)`` is called from the timer thread
    with the transcripts that crossed a threshold. ``start_timer(delay_s, fire)`` starts the debounce
    window (a daemon ``threading.Timer``; a test may start windows it closes itself).
    """

    def __init__(
        self,
        transcripts: str | os.PathLike[str] | TranscriptShelf,
        config: SessionSyncConfig,
        on_dirty: Callable[[list[str]], None],
        baseline: Callable[[str], int | None] = lambda _name: None,
        start_timer: Callable[[float, Callable[[], object]], Timer] = start_daemon_timer,
    ) -> None:
        if not isinstance(transcripts, TranscriptShelf):
            transcripts = FolderShelf(os.path.abspath(transcripts))
        self.shelf: TranscriptShelf = transcripts
        folder = transcripts.folder
        self.sessions_dir = Path(os.path.abspath(folder)) if folder is not None else None
        self.debounce_s = max(0.0, config.debounce_ms / 1000.0)
        self.tracker = SessionDeltaTracker(config.delta_bytes, config.delta_messages)
        self._on_dirty = on_dirty
        self._baseline = baseline
        self._lock = threading.Lock()
        self._pending: set[str] = set()
        self._start_timer = start_timer
        self._timer: Timer | None = None
        self._closed = False
        self._firing = 0
        self.checks = 0  # debounced checks run (for status and tests)

    def wants(self, path: str | os.PathLike[str]) -> str | None:
        """The transcript's name when it is a live transcript of this shelf, else None: a bare name, or
        a file path directly in the sessions folder (a shelf without one takes names only)."""
        text = os.fspath(path)
        name = os.path.basename(text)
        if name != text and (
            self.sessions_dir is None or Path(os.path.abspath(text)).parent != self.sessions_dir
        ):
            return None
        if not is_live_transcript_name(name):
            return None
        return name

    def notify(self, path: str | os.PathLike[str]) -> bool:
        """A transcript was appended to; True when it will be checked after the debounce."""
        target = self.wants(path)
        if target is None:
            return False
        with self._lock:
            if self._closed:
                return False
            self._pending.add(target)
            if self._timer is None:
                self._timer = self._start_timer(self.debounce_s, self._fire)
        return True

    @property
    def pending(self) -> bool:
        """A check is scheduled or running."""
        with self._lock:
            return self._timer is not None or bool(self._pending) or self._firing > 0

    def _fire(self) -> list[str]:
        with self._lock:
            names, self._pending = sorted(self._pending), set()
            self._timer = None
            if self._closed:
                return []
            self.checks += 1
            self._firing += 1
        try:
            dirty = [name for name in names if self._check(name)]
            if dirty:
                try:
                    self._on_dirty(dirty)
                except Exception:  # a detached check must never raise into the timer thread
                    log.warning("scheduling a session transcript sync failed", exc_info=True)
            return dirty
        finally:
            with self._lock:
                self._firing -= 1

    def _check(self, name: str) -> bool:
        if name not in self.tracker.states:
            size = self._baseline(name)
            if size is not None:
                self.tracker.reset(name, size)
        try:
            return self.tracker.observe_shelved(self.shelf, name)
        except OSError:  # gone (archived by /new, deleted): nothing to index
            self.tracker.forget(name)
            return False
        except Exception:  # a database shelf's error: logged, checked again at the next append
            log.warning("checking session transcript %s for growth failed", name, exc_info=True)
            return False

    def indexed(self, sizes: Iterable[tuple[str, int]]) -> None:
        """A pass indexed these transcripts at these sizes: their pending growth is zero again."""
        for name, size in sizes:
            self.tracker.reset(name, size)

    def tracked(self) -> list[str]:
        return list(self.tracker.states)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
