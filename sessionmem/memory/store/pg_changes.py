"""PostgreSQL's log of changed chunks: what a host's stale matrix reads instead of every vector.

Trigger: one host writes (a sync, a forget) while another holds the index's vectors in memory.
Why: the other host's matrix only knew that the write generation moved, so it read every vector again
before its next vector query: ~1.2 s at 100k chunks, for a note of a few chunks. The keyword matrix
(``keyword_postings``) reads the changed chunks' keyword rows the same way (:func:`read_keyword_changes`).
Outcome: triggers on ``chunks`` (``schema.PG_CHANGE_FUNCTIONS``) log each changed chunk id with the
write generation its transaction commits with; a stale matrix holding generation ``g`` reads the ids
logged after ``g`` and the rows they now have (:func:`read_changes`), and applies them
(``search.matrix_rows``). It reloads every row instead when the log does not reach back to ``g``
(``changes_from``: trimmed, or reset by a rebuild) or holds more changes than a load would read.

Why the log is right across hosts: the first logged statement of a transaction moves the generation
and holds the ``meta`` row until it commits, so no other write commits in between, and a host that
read generation ``g`` before that commit finds the transaction's rows stamped above ``g``.
"""

from __future__ import annotations

from typing import Any

from sessionmem.memory.store.schema import PG_CHANGE_FUNCTIONS, PG_CHANGE_TRIGGERS, PG_FTS_TRIGGERS
from sessionmem.memory.store.seam import KeywordChanges, KeywordRow, MatrixChanges

# The log holds every change of a generation above this (meta); a matrix older than it loads every row.
CHANGES_FROM_KEY = "changes_from"
# Generations of changes the log keeps: a host that last searched this many writes ago reloads.
KEEP_GENERATIONS = 10_000


def install(conn: Any, generation_key: str) -> None:
    """The log's functions and missing triggers (an index made before the log gains them: its log
    starts at its current generation, its counts are counted once). In the caller's transaction, after
    the tables (``schema.PG_TABLES``) were made."""
    for statement in PG_CHANGE_FUNCTIONS:
        conn.execute(statement)
    triggers = conn.execute(
        "SELECT tgname FROM pg_trigger WHERE tgrelid IN ('chunks'::regclass, 'chunks_fts'::regclass)"
    ).fetchall()
    have = {r[0] for r in triggers}
    wanted = [(PG_CHANGE_TRIGGERS, "sessionmem_log_chunks"), (PG_FTS_TRIGGERS, "sessionmem_count_fts")]
    for names, function in wanted:
        for name, when in names.items():
            if name not in have:
                conn.execute(f"CREATE TRIGGER {name} {when} FOR EACH STATEMENT EXECUTE FUNCTION {function}()")
    if PG_CHANGE_TRIGGERS.keys() - have:
        conn.execute("DELETE FROM chunk_counts")
        conn.execute(
            "INSERT INTO chunk_counts(source, audience, n)"
            " SELECT source, audience, count(*) FROM chunks GROUP BY source, audience"
        )
    if PG_FTS_TRIGGERS.keys() - have:
        conn.execute("DELETE FROM chunks_fts_totals")
        conn.execute(
            "INSERT INTO chunks_fts_totals(rows, length)"
            " SELECT count(*), coalesce(sum(fts_len), 0) FROM chunks_fts"
        )
    conn.execute(
        "INSERT INTO meta(key, value) SELECT %s, value FROM meta WHERE key = %s ON CONFLICT(key) DO NOTHING",
        (CHANGES_FROM_KEY, generation_key),
    )


def chunk_summary(conn: Any) -> tuple[int, frozenset[str], frozenset[str]]:
    """(chunks, their sources, their audiences), from the counts the triggers keep."""
    rows = conn.execute("SELECT source, audience, n FROM chunk_counts WHERE n > 0").fetchall()
    return sum(int(r[2]) for r in rows), frozenset(r[0] for r in rows), frozenset(r[1] for r in rows)


def keyword_totals(conn: Any) -> tuple[int, int]:
    """(chunks_fts rows, the sum of their lengths), from the totals the triggers keep."""
    row = conn.execute("SELECT rows, length FROM chunks_fts_totals").fetchone()
    return (int(row[0]), int(row[1])) if row is not None else (0, 0)


def trim(conn: Any, generation: int) -> None:
    """Drop the changes older than :data:`KEEP_GENERATIONS` before ``generation`` (in a write transaction)."""
    floor = generation - KEEP_GENERATIONS
    if floor > 0:
        conn.execute(
            "WITH gone AS (DELETE FROM chunk_changes WHERE generation <= %s RETURNING 1)"
            " UPDATE meta SET value = %s WHERE key = %s AND value::bigint < %s"
            " AND EXISTS (SELECT 1 FROM gone)",
            (floor, str(floor), CHANGES_FROM_KEY, floor),
        )


def unlogged(conn: Any) -> None:
    """The rest of this transaction writes chunks without logging them (a rebuild: :func:`reset` after)."""
    conn.execute("SELECT set_config('sessionmem.chunk_log', 'off', true)")


def reset(conn: Any) -> None:
    """In a write transaction (after an unlogged rebuild, or an erasure, whose deleted ids must not stay
    in the log): empty the log, and make every matrix loaded before it load every row (the log now
    starts at this transaction's generation)."""
    (generation,) = conn.execute("SELECT sessionmem_chunk_generation()").fetchone()
    conn.execute("DELETE FROM chunk_changes")
    conn.execute("UPDATE meta SET value = %s WHERE key = %s", (str(generation), CHANGES_FROM_KEY))


def read_changes(conn: Any, model: str, since: object, limit: int) -> MatrixChanges | None:
    """The chunks changed after write generation ``since`` and the rows of those holding a vector of
    ``model`` now; None when the log does not reach back to ``since`` or holds more than ``limit`` ids."""
    held = _generation(since)
    if held is None:
        return None
    # One round trip (a search after a write waits for it): the log's floor, each changed id, and its
    # row when it holds a vector of the model (NULLs: deleted, or not the model's)
    found = conn.execute(
        "SELECT f.floor, x.id, x.source, x.embedding, x.date, x.audience"
        " FROM (SELECT (SELECT value::bigint FROM meta WHERE key = %s) AS floor) f LEFT JOIN ("
        "  SELECT i.id, c.source, c.embedding, c.date, c.audience"
        "  FROM (SELECT DISTINCT id FROM chunk_changes WHERE generation > %s LIMIT %s) i"
        "  LEFT JOIN chunks c ON c.id = i.id AND c.model = %s AND c.embedding IS NOT NULL"
        " ) x ON true",
        (CHANGES_FROM_KEY, held, limit + 1, model),
    ).fetchall()
    ids = _changed_ids(found, held, 1, limit)
    if ids is None:
        return None
    return MatrixChanges(ids, [tuple(r[1:]) for r in found if r[3] is not None])


def read_keyword_changes(conn: Any, generation_key: str, since: object, limit: int) -> KeywordChanges | None:
    """The chunks changed after write generation ``since`` and the keyword rows of those that have one now
    (each token's count: its positions in the tsvector, what the keyword statement's ``ts_rank`` counts),
    with the generation and keyword totals of the same snapshot; None when the log does not reach back to
    ``since`` or holds more than ``limit`` ids."""
    held = _generation(since)
    if held is None:
        return None
    # One round trip, one statement (one snapshot even outside a transaction)
    found = conn.execute(
        "SELECT f.floor, f.generation, f.rows, f.length, x.id, x.rowid, x.fts_len, x.model, x.source,"
        " x.audience, x.date, x.lexemes, x.counts"
        " FROM (SELECT (SELECT value::bigint FROM meta WHERE key = %s) AS floor,"
        "  (SELECT value FROM meta WHERE key = %s) AS generation,"
        "  (SELECT rows FROM chunks_fts_totals) AS rows, (SELECT length FROM chunks_fts_totals) AS length) f"
        " LEFT JOIN ("
        "  SELECT i.id, c.rowid, k.fts_len, c.model, c.source, c.audience, c.date, w.lexemes, w.counts"
        "  FROM (SELECT DISTINCT id FROM chunk_changes WHERE generation > %s LIMIT %s) i"
        "  LEFT JOIN chunks c ON c.id = i.id LEFT JOIN chunks_fts k ON k.rowid = c.rowid"
        "  LEFT JOIN LATERAL (SELECT array_agg(u.lexeme ORDER BY u.lexeme) AS lexemes,"
        "   array_agg(cardinality(u.positions) ORDER BY u.lexeme) AS counts FROM unnest(k.fts) u) w ON true"
        " ) x ON true",
        (CHANGES_FROM_KEY, generation_key, held, limit + 1),
    ).fetchall()
    ids = _changed_ids(found, held, 4, limit)
    if ids is None:
        return None
    rows = [
        KeywordRow(
            r[4],
            int(r[5]),
            int(r[6]),
            r[7],
            r[8],
            r[9],
            r[10],
            dict(zip(r[11] or (), r[12] or (), strict=True)),
        )
        for r in found
        if r[6] is not None
    ]
    generation, total_rows, total_length = found[0][1:4]
    return KeywordChanges(generation, int(total_rows or 0), int(total_length or 0), ids, rows)


def _generation(since: object) -> int | None:
    """The write generation a matrix holds, as the log counts it (None: not a generation of the log)."""
    try:
        return int(str(since))
    except ValueError:
        return None


def _changed_ids(found: list[Any], held: int, at: int, limit: int) -> list[Any] | None:
    """The changed ids of a change-log read (column ``at``; its first column the log's floor); None when
    the log does not reach back to generation ``held`` or holds more than ``limit`` ids."""
    floor = found[0][0]
    if floor is None or held < int(floor):
        return None
    ids = [r[at] for r in found if r[at] is not None]
    return ids if len(ids) <= limit else None
