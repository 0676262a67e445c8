"""The rows of the in-memory vector matrix (``vectors.MatrixVectors``): a full load, and the changes since.

A load reads every embedding of the model (``read_matrix``: ~1.2 s at 100k chunks from PostgreSQL). A
store that logs which chunks each write changed (``IndexStore.matrix_changes``; PostgreSQL) lets a
host whose matrix went stale read only those rows instead: :meth:`MatrixState.changed` drops the
changed ids and appends their rows as they are now. Its searches then return what a full load's would:
the live rows are the same, each scored alone, and ties are broken by id, not by position.

The arrays have room to grow, so a change appends in place (a copy of 150 MB per write would cost more
than the search): a state is a view of its first ``n`` rows, and rows past it are written only by the
next state, never seen by an older one. Deleted rows stay in place, masked out by ``live``, until they
are a quarter of the rows or the room is full; then the live rows are copied into a fresh room.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sessionmem.memory.search.sign_codes import SignCodes
from sessionmem.memory.store.index_sqlite import as_store
from sessionmem.memory.store.seam import MatrixChanges

log = logging.getLogger(__name__)

BATCH_ROWS = 4096
SLACK = 0.05  # room for rows written after a load: a share of the rows, plus ROOM_ROWS
ROOM_ROWS = 1024

# ids, sources, dates, audiences, matrix
Loaded = tuple[list[str], list[str], list[str], list[str], np.ndarray]
Row = Sequence[Any]  # (id, source, embedding bytes, date, audience): ``MatrixChanges.rows``


def read_matrix(conn: Any, model: str) -> Loaded:
    """Every embedding of ``model`` read through ``conn`` into one preallocated matrix, in one pass.

    Capacity is ``count(*)`` of all chunks (instant; counting one model's rows would scan the
    table a second time), plus room for later rows. The dimension is the first row's; rows of another
    dimension (a half-migrated index) are skipped with a warning. Peak memory is the matrix plus one batch.
    """
    store = as_store(conn)
    (count,) = store.execute("SELECT count(*) FROM chunks").fetchone()
    batches = store.batches(
        "SELECT id, source, embedding, date, audience FROM chunks WHERE model = ? AND embedding IS NOT NULL",
        (model,),
        BATCH_ROWS,
    )
    matrix = np.empty((0, 0), dtype=np.float32)
    ids: list[str] = []
    sources: list[str] = []
    dates: list[str] = []
    audiences: list[str] = []
    size = 0
    skipped = 0
    for batch in batches:
        if not size:
            size = len(batch[0][2])
            matrix = np.empty((_room_for(int(count)), size // 4), dtype=np.float32)
        rows = [r for r in batch if len(r[2]) == size]
        skipped += len(batch) - len(rows)
        at = len(ids)
        rows = rows[: int(count) - at]  # rows written since the count wait for the next load
        if not rows:
            continue
        matrix[at : at + len(rows)] = _vectors(rows)
        ids += [r[0] for r in rows]
        sources += [r[1] for r in rows]
        dates += [r[3] or "" for r in rows]
        audiences += [r[4] for r in rows]
    if skipped:
        log.warning("memory vectors: %d embeddings of another dimension than %d skipped", skipped, size // 4)
    n = len(ids)
    final = matrix[:n] if n * 10 >= int(count) * 9 else np.ascontiguousarray(matrix[:n])
    return ids, sources, dates, audiences, final


def _room_for(rows: int) -> int:
    return rows + int(rows * SLACK) + ROOM_ROWS


def _vectors(rows: Sequence[Row]) -> np.ndarray:
    return np.frombuffer(b"".join(r[2] for r in rows), dtype="<f4").reshape(len(rows), -1)


class _Room:
    """The arrays a line of states shares, each with room past the rows in use, and where each live id is."""

    def __init__(self, matrix: np.ndarray, sources: np.ndarray, dates: np.ndarray, audiences: np.ndarray):
        self.matrix, self.sources, self.dates, self.audiences = matrix, sources, dates, audiences
        self.positions: dict[str, int] | None = None  # made on the first change

    @classmethod
    def holding(cls, loaded: Loaded) -> _Room:
        """Arrays for ``loaded``, its matrix's own buffer kept when it has room to spare."""
        ids, sources, dates, audiences, matrix = loaded
        n = len(ids)
        base = matrix.base
        if (
            isinstance(base, np.ndarray)
            and base.ndim == 2
            and base.shape[1:] == matrix.shape[1:]
            and base.dtype == matrix.dtype
            and base.ctypes.data == matrix.ctypes.data
        ):
            buffer = base
        else:
            buffer = matrix
        capacity = buffer.shape[0]
        room = cls(
            buffer,
            np.empty(capacity, dtype=object),
            np.empty(capacity, dtype="<U10"),
            np.empty(capacity, dtype=object),
        )
        room.sources[:n], room.dates[:n], room.audiences[:n] = sources, dates, audiences
        return room

    @property
    def capacity(self) -> int:
        return int(self.matrix.shape[0])


@dataclass(frozen=True)
class MatrixState:
    """One state of the matrix; replaced whole, so a reader never sees half of a reload or a change."""

    model: str
    token: object  # the searching connection's write token when this state was read
    ids: list[str]  # one per row, deleted rows' too
    sources: np.ndarray  # object array parallel to ids
    dates: np.ndarray  # "<U10" array parallel to ids, "" when undated
    audiences: np.ndarray  # object array parallel to ids: who may see each row (sessionmem.privacy)
    matrix: np.ndarray  # (len(ids), dims) float32, C-contiguous
    live: np.ndarray | None = None  # False for a row deleted since the load; None: every row is live
    dead: int = 0  # rows False in ``live``
    room: _Room | None = None
    # every source and audience of the rows (deleted rows' may stay: a mask is then made for nothing)
    kinds: tuple[frozenset[str], frozenset[str]] | None = None
    codes: SignCodes | None = None  # the coarse first pass of a large matrix (sign_codes.py), else None
    masks: dict[tuple[frozenset[str], frozenset[str] | None], np.ndarray | None] = field(default_factory=dict)

    @classmethod
    def loaded(cls, model: str, token: object, loaded: Loaded, *, coarse: bool = False) -> MatrixState:
        """The state of a full load; ``coarse``: with the sign bits of its rows (``sign_codes.py``)."""
        room = _Room.holding(loaded)
        n = len(loaded[0])
        return cls(
            model, token, loaded[0], room.sources[:n], room.dates[:n], room.audiences[:n], room.matrix[:n],
            room=room, codes=SignCodes(room.matrix[:n]) if coarse else None,
        )  # fmt: skip

    @property
    def rows(self) -> int:
        return len(self.ids) - self.dead

    def mask(self, wanted: frozenset[str], audiences: frozenset[str] | None = None) -> np.ndarray | None:
        """Rows whose source (and audience, when given) is wanted, and not deleted, cached per pair of
        sets; None when every row qualifies."""
        key = (wanted, audiences)
        if key not in self.masks:
            mask = self.live
            sources, seen_by = self.kinds_of_rows()
            if not sources <= wanted:
                allowed = np.isin(self.sources, list(wanted))
                mask = allowed if mask is None else mask & allowed
            if audiences is not None and not seen_by <= audiences:
                allowed = np.isin(self.audiences, list(audiences))
                mask = allowed if mask is None else mask & allowed
            self.masks[key] = mask
        return self.masks[key]

    def kinds_of_rows(self) -> tuple[frozenset[str], frozenset[str]]:
        if self.kinds is None:  # a frozen dataclass: the cache is set once, as the masks are
            kinds = (frozenset(self.sources.tolist()), frozenset(self.audiences.tolist()))
            object.__setattr__(self, "kinds", kinds)
            return kinds
        return self.kinds

    def prepare_changes(self) -> None:
        """Index the rows by id now (a full load), not in the first search after a write (~15 ms at 100k)."""
        if self.room is not None and self.room.positions is None and self.live is None:
            self.room.positions = {cid: i for i, cid in enumerate(self.ids)}

    def stored_vectors(self, ids: Sequence[str]) -> dict[str, bytes]:
        """The stored bytes of each live row of ``ids`` (as the index holds its embedding); an id
        without a row is left out."""
        self.prepare_changes()
        if self.room is None or self.room.positions is None:
            return {}
        positions = self.room.positions
        n = len(self.ids)
        out = {}
        for cid in ids:
            at = positions.get(cid)
            if at is not None and at < n and (self.live is None or self.live[at]):
                out[cid] = self.matrix[at].tobytes()
        return out

    def changed(self, token: object, changes: MatrixChanges) -> MatrixState | None:
        """This state with ``changes`` applied, as of ``token``; None when only a full load can say
        (nothing loaded yet, so no dimension; or a changed row of another dimension)."""
        room = self.room
        n = len(self.ids)
        if room is None or not n:
            return None
        width = self.matrix.shape[1] * 4
        if any(len(r[2]) != width for r in changes.rows):
            return None
        self.prepare_changes()
        assert room.positions is not None
        live = np.ones(n, dtype=bool) if self.live is None else self.live.copy()
        dead = self.dead
        for cid in changes.ids:
            at = room.positions.pop(cid, None)
            if at is not None:
                live[at] = False
                dead += 1
        added = len(changes.rows)
        if n + added > room.capacity or dead * 4 > n:
            return self._compacted(token, live, changes.rows)
        end = n + added
        if added:
            room.matrix[n:end] = _vectors(changes.rows)
            room.sources[n:end] = [r[1] for r in changes.rows]
            room.dates[n:end] = [r[3] or "" for r in changes.rows]
            room.audiences[n:end] = [r[4] for r in changes.rows]
            for i, r in enumerate(changes.rows):
                room.positions[r[0]] = n + i
            live = np.concatenate([live, np.ones(added, dtype=bool)])
        sources, seen_by = self.kinds_of_rows()
        kinds = (sources | {r[1] for r in changes.rows}, seen_by | {r[4] for r in changes.rows})
        codes = self.codes.extended(room.matrix[n:end]) if self.codes is not None and added else self.codes
        return MatrixState(
            self.model, token, [*self.ids, *(r[0] for r in changes.rows)],
            room.sources[:end], room.dates[:end], room.audiences[:end], room.matrix[:end],
            live if dead else None, dead, room, kinds, codes,
        )  # fmt: skip

    def _compacted(self, token: object, live: np.ndarray, rows: Sequence[Row]) -> MatrixState:
        """The live rows and ``rows`` copied into a fresh room (the old one stays whole for older states)."""
        keep = np.flatnonzero(live)
        kept, added = len(keep), len(rows)
        matrix = np.empty((_room_for(kept + added), self.matrix.shape[1]), dtype=np.float32)
        np.take(self.matrix, keep, axis=0, out=matrix[:kept])
        if added:
            matrix[kept : kept + added] = _vectors(rows)
        ids = [self.ids[i] for i in keep.tolist()] + [r[0] for r in rows]
        loaded: Loaded = (
            ids,
            [*self.sources[keep].tolist(), *(r[1] for r in rows)],
            [*self.dates[keep].tolist(), *(r[3] or "" for r in rows)],
            [*self.audiences[keep].tolist(), *(r[4] for r in rows)],
            matrix[: kept + added],
        )
        state = MatrixState.loaded(self.model, token, loaded, coarse=self.codes is not None)
        state.prepare_changes()
        return state
