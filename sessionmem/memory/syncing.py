"""One sync of a memory index under its sync lock (``MemoryIndex.sync`` runs it; see ``index.py``):
incremental, or the safe rebuild, with the embedding provider's runtime fallback.

The Markdown is the truth; the index is derived and disposable. A pass is incremental (``sync_pass.py``):
an unchanged file costs the ``stat`` discovery already did (DESIGN decision 10). When the configuration
that shaped the index changes (provider, model, sources, extra paths, chunking) or ``force`` is given, a
new index is built beside the live one and copied over it in one transaction (``rebuild.py``): readers
here or in another process never see a half-built index, and a failed rebuild leaves the old one
working. The same rebuild runs when the embedder's vectors turn out to have another width than the
index's (``VectorWidthChanged``, learned mid-pass), so an index never mixes widths and no pass drops the
older vectors. When the provider fails a pass (after its retries) and ``memorySearch.fallback`` is
configured, the fallback takes over once and the index is rebuilt with it (reference §8).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sessionmem.errors import EmbeddingError
from sessionmem.memory.embed.embedder import EmbedderSelection
from sessionmem.memory.embed.selection import can_fall_back, fallback_selection, select_from_config
from sessionmem.memory.search.calibration import refresh as refresh_calibration
from sessionmem.memory.store.meta import read_meta, write_json
from sessionmem.memory.store.rebuild import claim_owner
from sessionmem.memory.store.schema import META_KEY
from sessionmem.memory.sync.index_meta import meta_mismatch
from sessionmem.memory.sync.plan import SyncReport
from sessionmem.memory.sync.rows import VectorWidthChanged, prune_cache
from sessionmem.memory.sync.sync_pass import Indexer

if TYPE_CHECKING:
    from sessionmem.config import MemorySearchConfig
    from sessionmem.memory.connections import IndexConnections
    from sessionmem.memory.embed.embedder import Embedder
    from sessionmem.memory.sync.sources import EntrySource

log = logging.getLogger(__name__)

ProgressFn = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class SyncScope:
    """The files one pass covers: the Markdown memory or not; every transcript (None) or these names."""

    memory: bool = True
    transcripts: tuple[str, ...] | None = None

    @property
    def whole(self) -> bool:
        return self.memory and self.transcripts is None


WHOLE = SyncScope()


def start_over(report: SyncReport, issue: str) -> None:
    """Reset ``report`` for a pass that starts again as a rebuild, noting why in its issues."""
    fresh = SyncReport(reason=report.reason)
    for f in dataclasses.fields(SyncReport):
        setattr(report, f.name, getattr(fresh, f.name))
    report.issues.append(issue)


class IndexSync:
    """The passes of one index over ``db``, and the embedder they use.

    ``sources(scope)``: the entry sources of a pass; ``desired(embedder)``: the meta the index should
    match; ``on_switch``: called (under the selection lock) when the fallback replaces the embedder, so
    the searches embed queries with it. ``calibration_issue``: what the last calibration found amiss."""

    def __init__(
        self,
        db: IndexConnections,
        settings: MemorySearchConfig,
        agent_id: str,
        *,
        selection: EmbedderSelection | None,
        env: Mapping[str, str],
        sources: Callable[[SyncScope], list[EntrySource]],
        desired: Callable[[Embedder | None], dict[str, Any]],
        on_switch: Callable[[], None],
    ) -> None:
        self.db = db
        self.settings = settings
        self.agent_id = agent_id
        self._selection = selection
        self._env = env  # API keys for providers
        self._sources = sources
        self._desired = desired
        self._on_switch = on_switch
        self._fallback_tried = False  # the runtime fallback is tried once per index
        self._selection_lock = threading.Lock()
        self.calibration_issue: str | None = None

    @property
    def selection(self) -> EmbedderSelection:
        """The embedding provider in use (chosen from config on first need)."""
        with self._selection_lock:
            if self._selection is None:
                self._selection = select_from_config(self.settings, self._env)
            return self._selection

    def run(
        self, force: bool, progress: ProgressFn | None, report: SyncReport, scope: SyncScope = WHOLE
    ) -> SyncReport:
        """One pass (the caller holds the sync lock); if the provider fails it (after its retries) and a
        fallback is configured, switch to the fallback once and rebuild everything with it (reference §8
        "Runtime fallback").

        The rebuild is the safe one (``_rebuild``): the old index serves searches until the new one
        is complete, and stays if the fallback fails too."""
        try:
            self._sync_locked(force, progress, report, scope)
            return report
        except EmbeddingError as exc:
            failed = self._activate_fallback(exc)
            if failed is None:
                raise
            original = exc
        selection = self.selection
        fresh = SyncReport(reason=report.reason)
        fresh.issues.append(
            f"embedding provider {failed} failed ({original}); switched to the fallback "
            f"{selection.actual} and rebuilt the index with it"
        )
        try:
            self._sync_locked(True, progress, fresh)
        except EmbeddingError as second:
            raise EmbeddingError(f"{original}\n\nFallback to {selection.actual} failed: {second}") from second
        return fresh

    def _activate_fallback(self, error: EmbeddingError) -> str | None:
        """Switch to ``memorySearch.fallback`` after ``error``, once; the failed provider's name, or
        None when there is nothing to switch to (no fallback, already switched, cannot be created)."""
        with self._selection_lock:
            current = self._selection
            if self._fallback_tried or current is None or not can_fall_back(self.settings, current):
                return None
            self._fallback_tried = True
            chosen = fallback_selection(self.settings, self._env, current, error, agent_id=self.agent_id)
            if chosen is None or chosen.embedder is None:
                return None
            failed, embedder = current.actual, chosen.embedder
            self._selection = chosen
            self._on_switch()  # the next search embeds queries with the fallback
        log.warning(
            "memory index %s: %s failed (%s); switching to fallback %s and rebuilding",
            self.agent_id,
            failed,
            error,
            embedder.provider,
        )
        return failed

    def _indexer(
        self, conn: Any, embedder: Embedder | None, report: SyncReport, progress: ProgressFn | None
    ) -> Indexer:
        return Indexer(
            conn=conn,
            embedder=embedder,
            chunk_tokens=self.settings.chunking.tokens,
            chunk_overlap=self.settings.chunking.overlap,
            fts=self.db.fts_error is None,
            vectors=self.db.vector.loaded,
            cache_enabled=self.settings.cache.enabled,
            report=report,
            progress=progress,
        )

    def _sync_locked(
        self,
        force: bool,
        progress: ProgressFn | None,
        report: SyncReport,
        scope: SyncScope = WHOLE,
    ) -> None:
        embedder = self.selection.embedder
        desired = self._desired(embedder)
        conn = self.db.conn
        stored = read_meta(conn)
        has_files = conn.execute("SELECT 1 FROM files LIMIT 1").fetchone() is not None
        changed = meta_mismatch(stored, desired)
        if force or (changed and (stored is not None or has_files)):
            log.info(
                "memory index %s: full rebuild (%s)", self.db.path, "forced" if force else ", ".join(changed)
            )
            self._rebuild(embedder, desired, progress, report)
            return
        indexer = self._indexer(conn, embedder, report, progress)
        try:
            indexer.sync(self._sources(scope), full=False, targeted=not scope.whole, meta=stored)
        except VectorWidthChanged as exc:
            # Trigger: the embedder answered with another width than the index holds (a remote model
            # tells its width only once called, so the meta check above could not see it). Why: mixing
            # widths hides one of them from vector search; dropping the vec table loses the other.
            # Outcome: the safe rebuild at the new width; the old index serves until it is swapped in.
            log.warning("memory index %s: %s; rebuilding", self.db.path, exc)
            start_over(report, f"{exc}; rebuilt the index at {exc.new} dimensions")
            self._rebuild(embedder, self._desired(embedder), progress, report)
            return
        self._finish(conn, desired, embedder, stored=stored, prune=report.wrote, width=indexer.width)

    def _finish(
        self,
        conn: Any,
        desired: dict[str, Any],
        embedder: Embedder | None,
        *,
        stored: dict[str, Any] | None,
        prune: bool,
        width: int | None = None,
    ) -> None:
        """Record the meta the index now matches (``stored``: the meta it held before the pass;
        ``width``: of the vectors it holds, from :func:`stored_width` or the pass); calibrate the vector
        scores when the vectors changed (``calibration.py``); prune the cache."""
        meta = dict(desired)
        if embedder is not None:
            meta["vectorDims"] = width or embedder.dims
        if stored != meta:
            with conn.atomic():
                write_json(conn, META_KEY, meta)
        if embedder is not None:
            self.calibration_issue = refresh_calibration(
                conn, embedder, meta.get("vectorDims"), changed=prune or stored != meta
            )
        if prune:
            prune_cache(conn, self.settings.cache.max_entries)

    def _rebuild(
        self,
        embedder: Embedder | None,
        desired: dict[str, Any],
        progress: ProgressFn | None,
        report: SyncReport,
    ) -> None:
        """Build a fresh index beside the live one, then copy it over in one transaction.

        A scratch index takes its width from the embedder, or (when the embedder has not been called
        yet) from the vectors seeded into its cache. If those turn out older than the embedder's
        answers (``VectorWidthChanged``), it is built once more, now at the embedder's width."""
        try:
            self._build_and_swap(embedder, desired, progress, report)
        except VectorWidthChanged as exc:
            if embedder is None or embedder.dims != exc.new:
                raise
            start_over(report, f"{exc}; rebuilt the index at {exc.new} dimensions")
            self._build_and_swap(embedder, self._desired(embedder), progress, report)

    def _build_and_swap(
        self,
        embedder: Embedder | None,
        desired: dict[str, Any],
        progress: ProgressFn | None,
        report: SyncReport,
    ) -> None:
        report.full = True
        with self.db.conn.rebuild(self.settings.store.fts.tokenizer, embedder) as (conn, fts_error):
            indexer = self._indexer(conn, embedder, report, progress)
            indexer.fts = fts_error is None
            indexer.sync(self._sources(WHOLE), full=True)
            claim_owner(conn, self.agent_id, self.db.shown_location)  # the new index is this agent's too
            self._finish(conn, desired, embedder, stored=None, prune=True, width=indexer.width)
            if not self.settings.cache.enabled:
                with conn.atomic():
                    conn.execute("DELETE FROM embedding_cache")
        self.db.fts_error = fts_error
