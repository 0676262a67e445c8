"""Watching the memory files with watchdog: a change marks the index dirty and syncs after a pause.

Watched (reference §13): ``MEMORY.md``/``memory.md`` (the workspace folder, not recursively, so a
node_modules beside them costs nothing), ``memory/`` recursively (scheduled as soon as it appears),
and each extra path (folders recursively; a single file through its parent). Only Markdown files
and folders count, and nothing under ``.git``, ``node_modules``, virtualenvs or caches.

Each relevant event restarts the debounce timer (``sync.watchDebounceMs``); when it fires, one sync
runs. Events only mark the index dirty: the sync itself rescans with ``stat``, so an event watchdog
misses (a burst, a folder moved in) is still picked up.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from sessionmem.memory.sync.sources import IGNORED_DIRS, ROOT_FILES

log = logging.getLogger(__name__)

_IGNORED_EVENTS = frozenset({"opened", "closed_no_write"})


class WatchedIndex(Protocol):
    """What the watcher needs of the index it keeps fresh (``MemoryIndex`` is one); the index imports
    this module, never the other way round."""

    agent_id: str

    def mark_dirty(self) -> None: ...

    def sync(self, *, reason: str) -> object: ...


class MemoryWatcher(FileSystemEventHandler):
    """Runs a watchdog observer for one index; ``stop`` cancels a pending sync."""

    def __init__(
        self, index: WatchedIndex, workspace: Path, extra_paths: Sequence[Path], *, debounce_s: float = 1.5
    ) -> None:
        self.index = index
        self.workspace = Path(os.path.abspath(workspace))
        self.memory_dir = self.workspace / "memory"
        self.extra_dirs = [p for p in extra_paths if p.is_dir() and not p.is_symlink()]
        self.extra_files = {p for p in extra_paths if p.suffix.lower() == ".md" and not p.is_dir()}
        self.debounce_s = max(0.0, debounce_s)
        self._observer = Observer()
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._stopped = False
        self._memory_watched = False
        self.events_seen = 0

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        if self.workspace.is_dir():
            self._observer.schedule(self, str(self.workspace), recursive=False)
        self._watch_memory_dir()
        for folder in self.extra_dirs:
            self._observer.schedule(self, str(folder), recursive=True)
        for parent in {f.parent for f in self.extra_files if f.parent.is_dir()}:
            if parent != self.workspace:
                self._observer.schedule(self, str(parent), recursive=False)
        self._observer.start()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        with contextlib.suppress(RuntimeError):
            self._observer.stop()
            self._observer.join(timeout=5)

    def _watch_memory_dir(self) -> None:
        if self._memory_watched or not self.memory_dir.is_dir() or self.memory_dir.is_symlink():
            return
        try:
            self._observer.schedule(self, str(self.memory_dir), recursive=True)
            self._memory_watched = True
        except OSError as exc:  # e.g. inotify watch limit reached
            log.warning("cannot watch %s: %s", self.memory_dir, exc)

    # -- events ----------------------------------------------------------------------------------

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in _IGNORED_EVENTS:
            return
        paths = [os.fsdecode(event.src_path)]
        if getattr(event, "dest_path", ""):
            paths.append(os.fsdecode(event.dest_path))
        if Path(paths[0]) == self.memory_dir and event.is_directory:
            self._memory_watched = self._memory_watched and event.event_type != "deleted"
            self._watch_memory_dir()
        if any(self._relevant(Path(p), event.is_directory) for p in paths):
            self.events_seen += 1
            self.index.mark_dirty()
            self._schedule()

    def _relevant(self, path: Path, is_dir: bool) -> bool:
        if any(part in IGNORED_DIRS for part in path.parts):
            return False
        if path in self.extra_files:
            return True
        if path.parent == self.workspace and path.name in ROOT_FILES:
            return True
        if path == self.memory_dir:
            return True
        wanted = is_dir or path.suffix.lower() == ".md"
        if not wanted:
            return False
        return any(path.is_relative_to(root) for root in (self.memory_dir, *self.extra_dirs))

    def _schedule(self) -> None:
        with self._lock:
            if self._stopped:
                return
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(self.debounce_s, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._timer = None
        try:
            self.index.sync(reason="watch")
        except Exception as exc:
            log.warning("memory index %s: watch sync failed: %s", self.index.agent_id, exc)
