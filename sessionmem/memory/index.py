"""The per-agent memory index: ``MemoryIndex`` keeps a SQLite file (or a PostgreSQL schema) in step with
the Markdown, and answers searches and status from it. Its jobs live in rooms of their own:

- where the index is (``location.py``), opening it and recovering a damaged one (``connections.py``:
  the writer's connection, the searches' second one, the sync lock; a database that is not one, or is
  malformed, or has another schema version, is moved aside to ``<db>.corrupt-<time>`` and rebuilt from
  the Markdown, and ``status().issues`` says so);
- one sync under the lock (``syncing.py``): incremental, or the safe rebuild beside the live index,
  with the provider's runtime fallback; the pass itself is ``sync/sync_pass.py``;
- what the sessions may ask of it (``session_memory.py``, the protocols it implements);
- search (``search/``) and status (``status.py``), wired here.

It speaks to its database through an ``IndexStore`` (``store/seam.py``): the SQLite file, or, when
``memorySearch.store.path`` is a ``postgresql://`` DSN, one schema shared by gateway hosts on several
machines (``store/index_postgres.py``: there the rebuild is one transaction, the sync lock an advisory
lock, searches read one committed state, and a call that lost its connection to the server reconnects
and runs once more).

Concurrency: one sync at a time per index (concurrent callers wait for and share its result);
across processes a file lock ``<db>.lock`` serialises syncs, and every write is ``BEGIN IMMEDIATE``
with a busy timeout. Searches read through a second connection, so WAL lets them run during a sync.
Background syncs, session-delta syncs and the interval timer run on ``sync/background.Workers``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessionmem.errors import IndexDiskFull, MemoryIndexError
from sessionmem.memory.connections import IndexConnections
from sessionmem.memory.embed.embedder import EmbedderSelection
from sessionmem.memory.location import sessions_folder, store_location, store_path
from sessionmem.memory.search.calibration import Calibration
from sessionmem.memory.status import (
    IndexCounts,
    IndexStatus,
    collect_issues,
    read_counts,
    stale_vectors_issue,
)
from sessionmem.memory.store.database import DB_ERRORS
from sessionmem.memory.store.meta import FTS_ONLY_MODEL, disk_full_reason, is_corruption
from sessionmem.memory.store.rebuild import caused_by_corruption, claim_owner
from sessionmem.memory.sync.background import Workers
from sessionmem.memory.sync.flight import SyncFlight
from sessionmem.memory.sync.index_meta import desired_meta, meta_mismatch
from sessionmem.memory.sync.plan import SyncReport, plan_source
from sessionmem.memory.sync.sources import MarkdownSource, TranscriptSource, normalize_extra_paths
from sessionmem.memory.sync.transcript_names import FolderShelf, TranscriptShelf
from sessionmem.memory.syncing import WHOLE, IndexSync, ProgressFn, SyncScope
from sessionmem.pathnames import given_path

if TYPE_CHECKING:
    from sessionmem.config import MemorySearchConfig
    from sessionmem.dsn import PgTarget
    from sessionmem.memory.embed.embedder import Embedder
    from sessionmem.memory.search.records import SearchRequest, SearchResponse, VectorPath
    from sessionmem.memory.store.erase import IndexErasure
    from sessionmem.memory.sync.session_delta import TranscriptDeltaScheduler
    from sessionmem.memory.sync.sources import EntrySource

__all__ = ["IndexStatus", "MemoryIndex", "SyncReport", "store_location", "store_path"]

log = logging.getLogger(__name__)


def _fitting(calibration: Any, embedder: Embedder | None) -> dict[str, Any] | None:
    """The stored calibration when it was measured for ``embedder``."""
    cal = Calibration.from_json(calibration)
    return cal.to_json() if cal is not None and embedder is not None and cal.fits(embedder, None) else None


class MemoryIndex:
    """One agent's index. Build with :meth:`open`; close with :meth:`close` (or use ``with``)."""

    def __init__(
        self,
        agent_id: str,
        workspace: Path,
        settings: MemorySearchConfig,
        path: Path | PgTarget,
        state_dir: Path,
        selection: EmbedderSelection | None,
        env: Mapping[str, str] | None = None,
        sessions_dir: Path | None = None,
        transcripts: TranscriptShelf | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.workspace = given_path(workspace)  # resolved once: a later chdir moves nothing
        self.settings = settings
        self.path = path
        self.state_dir = given_path(state_dir)
        folder = (
            given_path(sessions_dir) if sessions_dir is not None else sessions_folder(state_dir, agent_id)
        )
        # where the ``sessions`` source reads transcripts: that folder, or the shelf :meth:`open` got
        self.transcripts: TranscriptShelf = transcripts if transcripts is not None else FolderShelf(folder)
        self._state_lock = threading.Lock()
        self._flight: SyncFlight[SyncReport] = SyncFlight(self._state_lock)
        self._session_delta: TranscriptDeltaScheduler | None = None
        self._dirty = True
        self._closed = False
        self._bootstrapped = False
        self._issues: list[str] = []
        self._last_error: str | None = None
        self._workers = Workers(agent_id)
        self._searcher: Any = None
        self._watcher: Any = None
        # the connections (the writer's, the searches') and the sync lock (connections.py)
        self._db = IndexConnections(agent_id, settings, path, self._issues)
        self._syncer = IndexSync(  # the passes and the embedder they use (syncing.py)
            self._db,
            settings,
            agent_id,
            selection=selection,
            env=os.environ if env is None else env,  # API keys for providers
            sources=self._sources,
            desired=self._desired_meta,
            on_switch=self._drop_searcher,
        )

    # -- lifecycle -------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        agent_id: str,
        workspace: Path,
        settings: MemorySearchConfig,
        *,
        state_dir: Path,
        selection: EmbedderSelection | None = None,
        env: Mapping[str, str] | None = None,
        watch: bool | None = None,
        sessions_dir: Path | None = None,
        transcripts: TranscriptShelf | None = None,
    ) -> MemoryIndex:
        """Open (creating, or rebuilding when corrupt) the index of ``agent_id`` over ``workspace``.

        ``selection``: the embedder, else chosen from ``settings`` on first need. ``env``: where
        provider API keys are looked up for that choice and for a runtime fallback (default
        ``os.environ``). ``watch``: watch the memory files (a change syncs after the debounce);
        None follows ``sync.watch``, as OpenClaw's manager does. One-shot commands pass False and
        start no threads. ``sessions_dir``: where the agent's transcripts are (the session store's
        folder when ``session.store`` moves it), default ``<state_dir>/agents/<agentId>/sessions``; or
        ``transcripts``, a shelf that replaces it (a PostgreSQL session store's ``transcript_shelf()``).
        Starting costs about 2 ms (plus the watchdog import, ~20 ms, once per process); it happens
        here, not in the background, so no edit after ``open`` returns is missed."""
        state_dir = given_path(state_dir)
        path = store_location(agent_id, settings, state_dir)
        index = cls(agent_id, workspace, settings, path, state_dir, selection, env, sessions_dir, transcripts)
        index._db.open()
        minutes = settings.sync.interval_minutes
        if minutes and minutes > 0:
            index._workers.every(minutes * 60.0, lambda: index._sync_quietly("interval"))
        if settings.sync.watch if watch is None else watch:
            try:
                index.start_watching()
            except OSError as exc:  # e.g. the inotify watch limit: the index works, only unwatched
                index._issues.append(f"cannot watch the memory files ({exc}); edits wait for the next sync")
                log.warning("memory index %s: cannot watch the memory files: %s", agent_id, exc)
        return index

    def __enter__(self) -> MemoryIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the watcher and timer, wait for a running sync, close the database."""
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
        self._workers.stop()
        if self._session_delta is not None:
            self._session_delta.close()
        if self._watcher is not None:
            self._watcher.stop()
        self._workers.join()
        self._flight.wait()
        self._drop_searcher()
        self._db.close()

    # -- embedder and sources --------------------------------------------------------------------

    @property
    def selection(self) -> EmbedderSelection:
        """The embedding provider in use (chosen from config on first need)."""
        return self._syncer.selection

    def source_names(self) -> list[str]:
        """Configured sources; ``sessions`` when listed (``experimental.sessionMemory`` not required)."""
        if "sessions" not in self.settings.sources:  # the transcript code loads only when it is a source
            return sorted(self.settings.sources)
        from sessionmem.memory.sync.session_delta import sessions_enabled

        names = {s for s in self.settings.sources if s != "sessions" or sessions_enabled(self.settings)}
        return sorted(names)

    @property
    def sessions_dir(self) -> Path:
        """The folder of the transcripts the ``sessions`` source indexes (:meth:`open`'s ``sessions_dir``)."""
        return Path(self.transcripts.folder or sessions_folder(self.state_dir, self.agent_id))

    def _sources(self, scope: SyncScope = WHOLE) -> list[EntrySource]:
        """One entry source per configured source (a new source slots in here), within ``scope``."""
        out: list[EntrySource] = []
        for name in self.source_names():
            if name == "memory" and scope.memory:
                out.append(MarkdownSource(self.workspace, self.settings.extra_paths))
            elif name == "sessions" and scope.transcripts != ():
                out.append(TranscriptSource(self.transcripts, only=scope.transcripts))
        return out

    def _desired_meta(self, embedder: Embedder | None) -> dict[str, Any]:
        return desired_meta(
            self.settings,
            self.workspace,
            self.source_names(),
            embedder,
            vector_loaded=self._db.vector.loaded,
            agent_id=self.agent_id,
        )

    # -- sync ------------------------------------------------------------------------------------

    @property
    def dirty(self) -> bool:
        return self._dirty

    def mark_dirty(self) -> None:
        """Note that the files changed; the next search starts a background sync."""
        self._dirty = True

    def sync(
        self,
        *,
        force: bool = False,
        progress: ProgressFn | None = None,
        reason: str = "manual",
        session_files: Iterable[str | os.PathLike[str]] | None = None,
        sessions: bool = True,
    ) -> SyncReport:
        """Bring the index in line with the files. Concurrent calls share one run (a forced call waits for
        a running unforced one, then runs). ``session_files`` (transcript paths or names): a targeted pass
        over those alone (session deltas, post-compaction), never sharing another run's result, scanning
        or deleting nothing else. ``sessions=False``: transcripts wait for a later pass."""
        if session_files is not None:
            scope = SyncScope(False, tuple(sorted({Path(p).name for p in session_files})))
        else:
            scope = WHOLE if sessions else SyncScope(True, ())
        return self._flight.run(
            lambda: self._db.once_more_if_reconnected(lambda: self._run_sync(force, progress, reason, scope)),
            force=force,
            whole=scope.whole,
            check_open=self._check_open,
        )

    def sync_lock(self) -> Any:
        """The lock every sync holds, across processes (a file lock beside a SQLite file) and hosts (a
        PostgreSQL advisory lock). Reentrant; holding it keeps other syncs waiting, never searches."""
        return self._db.sync_mutex

    def erase(
        self, audiences: Collection[str], paths: Collection[str] = (), *, dry_run: bool = False
    ) -> IndexErasure:
        """Remove the rows of the files labelled ``audiences`` or indexed as ``paths``, their cached
        vectors and any readable copy in the database (``erase.py``): forgetting a person. Holds the sync
        lock; hold it yourself around this and the files' deletion, so no sync indexes them in between."""
        from sessionmem.memory.store.erase import erase_rows

        self._check_open()
        with self._db.sync_mutex:
            erased = erase_rows(
                self._db.conn,
                audiences=audiences,
                paths=paths,
                vectors=self._db.vector.loaded,
                dry_run=dry_run,
            )
        if not dry_run and (erased.chunks or erased.paths) and self._searcher is not None:
            self._searcher.invalidate()
        return erased

    def _check_open(self) -> None:
        if self._closed:
            raise MemoryIndexError(f"memory index {self.path} is closed")

    def _run_sync(
        self, force: bool, progress: ProgressFn | None, reason: str, scope: SyncScope = WHOLE
    ) -> SyncReport:
        started = time.monotonic()
        report = SyncReport(reason=reason)
        if scope.memory:
            self._dirty = False
        try:
            with self._db.sync_mutex:
                self._db.remove_dead_scratch()
                claim_owner(self._db.conn, self.agent_id, self._db.shown_location)  # still this agent's?
                try:
                    report = self._syncer.run(force, progress, report, scope)
                except DB_ERRORS as exc:
                    if not is_corruption(exc):
                        raise
                    self._db.recover_corrupt(str(exc))  # the file moved aside: start afresh
                    self._dirty = True
                    self._drop_searcher()
                    report = self._syncer.run(False, progress, SyncReport(reason=reason))
        except BaseException as exc:
            if scope.memory:
                self._dirty = True
            full = disk_full_reason(exc)
            error = IndexDiskFull(str(self.path), full) if full is not None else None
            self._last_error = f"last sync ({reason}) failed: {error or exc}"
            if error is not None:
                raise error from exc
            raise
        self._last_error = None
        report.seconds = time.monotonic() - started
        if report.wrote and self._searcher is not None:
            self._searcher.invalidate()
        self._reset_session_deltas()
        return report

    # -- background work -------------------------------------------------------------------------

    def _sync_quietly(self, reason: str, session_files: list[str] | None = None) -> None:
        """A detached sync (of ``session_files`` only, when given): failures are logged and shown in
        status, never raised."""
        try:
            self.sync(reason=reason, session_files=session_files)
        except Exception as exc:
            if not self._closed:
                log.warning("memory index %s: %s sync failed: %s", self.agent_id, reason, exc)

    def sync_in_background(self, reason: str = "background") -> None:
        """Start a sync in a thread unless one is running."""
        with self._state_lock:
            if self._flight.running or self._closed:
                return
        self._workers.start(self._sync_quietly, reason, name="sync")

    # -- session transcripts (reference §5; sessionmem.memory.sync.session_delta) -----------------------

    def notify_transcript_appended(self, path: str | os.PathLike[str]) -> None:
        """A transcript (its file, or its name on the shelf) grew. Cheap: a debounced check decides whether
        it passed ``sync.sessions.deltaBytes``/``deltaMessages``; only then are its new lines indexed."""
        if self._closed or "sessions" not in self.source_names():
            return
        scheduler = self._session_delta
        if scheduler is None:
            from sessionmem.memory.sync.session_delta import TranscriptDeltaScheduler

            with self._state_lock:
                if self._session_delta is None:
                    self._session_delta = TranscriptDeltaScheduler(
                        self.transcripts,
                        self.settings.sync.sessions,
                        on_dirty=self.sync_session_files_in_background,
                        baseline=self._indexed_size,
                    )
                scheduler = self._session_delta
        scheduler.notify(path)

    @property
    def session_delta(self) -> TranscriptDeltaScheduler | None:
        return self._session_delta  # the delta scheduler, once a transcript append was notified

    def sync_session_files_in_background(
        self, paths: Iterable[str | os.PathLike[str]], reason: str = "session-delta"
    ) -> None:
        """Index only ``paths`` (their new lines) in a thread; searches never wait for it."""
        files = [os.fspath(p) for p in paths]
        if files and not self._closed:
            self._workers.start(self._sync_quietly, reason, files, name="session-sync")

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Wait for pending delta checks and background syncs (shutdown, tests); False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            scheduler = self._session_delta
            busy = self._workers.busy()
            with self._state_lock:
                running = self._flight.running
            if not busy and not running and not (scheduler is not None and scheduler.pending):
                return True
            for thread in busy:
                thread.join(max(0.0, min(0.05, deadline - time.monotonic())))
            time.sleep(0.005)
        return False

    def _indexed_size(self, name: str, conn: Any = None) -> int | None:
        sql, args = "SELECT size FROM files WHERE path = ? AND source = 'sessions'", (f"sessions/{name}",)
        if conn is not None:
            row = conn.execute(sql, args).fetchone()
        else:
            with self._db.read_lock:
                row = self._db.reader.execute(sql, args).fetchone()
        return int(row[0]) if row is not None else None

    def _reset_session_deltas(self) -> None:
        """After a pass (still owning the writer connection): tracked transcripts start counting growth
        from what is now indexed."""
        scheduler = self._session_delta
        if scheduler is None:
            return
        sized = ((name, self._indexed_size(name, self._db.conn)) for name in scheduler.tracked())
        scheduler.indexed([(name, size) for name, size in sized if size is not None])

    def start_watching(self) -> None:
        """Watch the memory files; a change marks the index dirty and syncs after the debounce."""
        from sessionmem.memory.sync.watch import MemoryWatcher

        with self._state_lock:
            if self._watcher is not None or self._closed:
                return
            self._watcher = MemoryWatcher(
                self,
                self.workspace,
                normalize_extra_paths(self.workspace, self.settings.extra_paths),
                debounce_s=self.settings.sync.watch_debounce_ms / 1000.0,
            )
        self._watcher.start()

    # -- search and status -----------------------------------------------------------------------

    def search(self, request: SearchRequest) -> SearchResponse:
        """Rank memory for ``request``. The first search of an empty index syncs first; later ones
        on a dirty index start a background sync and answer from what is indexed."""
        if self._closed:
            raise MemoryIndexError(f"memory index {self.path} is closed")
        return self._db.once_more_if_reconnected(lambda: self._search(request))

    def _search(self, request: SearchRequest) -> SearchResponse:
        try:
            if not self._bootstrapped:
                self._bootstrapped = True
                if self._count("files") == 0:
                    self.sync(reason="search", sessions=False)  # search never waits for transcripts:
                    if "sessions" in self.source_names():  # they are indexed in the background
                        self.sync_in_background("search")
            if self._dirty and self.settings.sync.on_search:
                self.sync_in_background("search")
            searcher = self._get_searcher()
            response = searcher.search(request)
            if searcher.stale_width is not None:
                self._rebuild_stale_vectors(searcher.stale_width)
            return self._with_fallback(response)
        except Exception as error:
            if not caused_by_corruption(error):
                raise
            exc = error
        # Trigger: the file went bad under us. Why: an incremental sync would not notice (it reads no
        # chunk pages). Outcome: a forced rebuild overwrites every page (or, if even that cannot read
        # the old file, moves it aside); then fresh connections answer once more.
        self._issues.append(f"search found the index damaged ({exc}); rebuilt from the Markdown files")
        self.sync(force=True, reason="recover")
        self._db.reopen_reader()
        self._drop_searcher()
        return self._with_fallback(self._get_searcher().search(request))

    def _rebuild_stale_vectors(self, widths: tuple[int, int]) -> None:
        """The provider answered a query with another width than the index's vectors (``widths``: the
        index's, the query's): rebuild in the background. The sync sees the meta's vectorDims differ
        from the embedder's now-known width; until it is done, status says the vectors are stale."""
        log.warning(
            "memory index %s: vectors are %d-dimensional, queries now %d; rebuilding", self.path, *widths
        )
        self.mark_dirty()
        self.sync_in_background("vectors-stale")

    def _with_fallback(self, response: SearchResponse) -> SearchResponse:
        """Say in every response when the configured provider failed and its fallback answers."""
        sel = self.selection
        if sel.fallback_from is None:
            return response
        return dataclasses.replace(response, fallback={"from": sel.fallback_from, "reason": sel.reason or ""})

    def vector_path(self, *, warm: bool = False) -> VectorPath:
        """The path the next vector query takes and why; ``warm`` loads the in-memory matrix first."""
        searcher = self._get_searcher()
        if warm:
            searcher.warm()
        path: VectorPath = searcher.vector_path
        return path

    def warm_keywords(self) -> None:
        """Load what keyword search keeps in memory now (a large SQLite index's keyword matrix, else
        nothing), rather than in the background while FTS5 answers alone."""
        self._get_searcher().warm_keywords()

    def _get_searcher(self) -> Any:
        if self._searcher is None:
            try:
                from sessionmem.memory.search.searcher import Searcher
            except ImportError as exc:
                raise MemoryIndexError(
                    "memory search is not available (sessionmem.memory.search.searcher is missing)"
                ) from exc
            self._searcher = Searcher(
                self._db.reader,
                self.selection.embedder,
                self.settings,
                self._db.vector,
                workspace=self.workspace,
            )
        return self._searcher

    def _drop_searcher(self) -> None:
        """Forget the searcher (a new connection or embedder); its scan worker stops."""
        searcher, self._searcher = self._searcher, None
        if searcher is not None:
            searcher.close()

    def _count(self, table: str, source: str | None = None) -> int:
        with self._db.read_lock:
            if source is None:
                return int(self._db.reader.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
            sql = f"SELECT COUNT(*) FROM {table} WHERE source = ?"
            return int(self._db.reader.execute(sql, (source,)).fetchone()[0])

    def _read_state(self, embedder: Embedder | None) -> tuple[IndexCounts, bool]:
        """What the index holds, and whether a sync would change it."""
        with self._db.read_lock:
            counts = read_counts(self._db.reader)
            return counts, bool(
                meta_mismatch(counts.meta or None, self._desired_meta(embedder))
                or any(
                    plan_source(self._db.reader, source, retry=counts.vector_issues).pending
                    for source in self._sources()
                )
            )

    def status(self) -> IndexStatus:
        """What the index holds and how it runs, with every problem worth a user's attention."""
        sel = self.selection
        embedder = sel.embedder
        unreadable: str | None = None
        counts = IndexCounts()
        try:
            counts, dirty = self._db.once_more_if_reconnected(lambda: self._read_state(embedder))
        except (*DB_ERRORS, *self._db.conn.errors) as exc:
            dirty = True
            if isinstance(self.path, Path):
                unreadable = f"index database {self.path} is unreadable ({exc}); the next sync rebuilds it"
            else:
                unreadable = f"memory index {self.path} cannot be read ({exc})"
        self._dirty = dirty
        issues = collect_issues(
            [
                *self._issues,
                stale_vectors_issue(embedder, counts.vector_dims),
                self._last_error,
                self._db.fts_error,
                self._syncer.calibration_issue,
            ],
            workspace=self.workspace,
            settings=self.settings,
            sources=self.source_names(),
            file_issues=counts.file_issues,
        )
        return IndexStatus(
            agent_id=self.agent_id,
            workspace=str(self.workspace),
            store_path=self._db.conn.where,
            store_kind=self._db.conn.kind,
            provider_requested=sel.requested,
            provider=sel.actual,
            model=embedder.model if embedder else FTS_ONLY_MODEL,
            fallback_from=sel.fallback_from,
            fallback_reason=sel.reason,
            mode=sel.mode,
            sources=tuple(self.source_names()),
            extra_paths=tuple(self.settings.extra_paths),
            files=sum(counts.files_by_source.values()),
            chunks=sum(counts.chunks_by_source.values()),
            files_by_source=counts.files_by_source,
            chunks_by_source=counts.chunks_by_source,
            dirty=dirty,  # what this look found (a watcher may mark the index meanwhile)
            vector_loaded=self._db.vector.loaded,
            vector_driver=self._db.vector.driver,
            vector_version=self._db.vector.version,
            vector_reason=self._db.vector.reason,
            vector_dims=counts.vector_dims if embedder else None,
            fts_available=self._db.fts_error is None,
            fts_error=self._db.fts_error,
            cache_entries=counts.cache_entries,
            cache_max_entries=self.settings.cache.max_entries,
            issues=tuple(issues + ([unreadable] if unreadable else [])),
            endpoint=getattr(embedder, "endpoint", None),
            calibration=_fitting(counts.calibration, embedder),
        )
